"""nginx-eval: score coding agents on real nginx bug fixes with an incremental doit pipeline."""

__version__ = "0.1.0"
