"""Stage 1: bare clones of nginx and nginx-tests, fetched once and shared by every run."""
