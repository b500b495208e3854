"""Stage 8: a run's rows, one per unit, in results.jsonl."""
