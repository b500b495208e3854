"""Plain helpers that import nothing of the project: paths, files, git, processes, locks."""
