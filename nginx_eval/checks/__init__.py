"""Checks beside the pipeline: task validation, statements, and the machine's doctor."""
