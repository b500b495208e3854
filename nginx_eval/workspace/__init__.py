"""Stage 2: a fresh repository at the task's base commit for an agent to work in."""
