"""Stage 6: the task's nginx-tests files run with prove (stage.py), their TAP parsed."""
