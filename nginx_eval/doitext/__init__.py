"""What nginx-eval relies on inside doit (the doit pin in tests/test_doit_pin.py guards it)."""
