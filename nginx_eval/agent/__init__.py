"""Stage 3: the agent runs in its workspace (stage.py), with its program, sandbox and limits."""
