"""Where heavy units run: in this process or on a Ray cluster."""
