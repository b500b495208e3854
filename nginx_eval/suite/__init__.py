"""The agent's nginx-tests tree as of the base commit (a mode's `tests = "base"`)."""
