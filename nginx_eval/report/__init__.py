"""Stage 9: the report of a run (stage.py): its records, statistics, tables and charts."""
