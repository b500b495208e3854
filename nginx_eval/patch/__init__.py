"""Stage 4: the agent's patch, taken from its workspace (or the gold patch, or a prediction)."""
