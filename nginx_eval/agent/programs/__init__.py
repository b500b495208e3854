"""The agent programs behind one seam: base.py, a module per program, registry.py."""
