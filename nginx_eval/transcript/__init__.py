"""Claude Code's transcript format: the session files the CLI writes (files.py) and the content
blocks of their messages (blocks.py). Read by agent/ and by report/."""
