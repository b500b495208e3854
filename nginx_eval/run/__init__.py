"""What a run is made of: command-line options, the benchmark, modes, the run record."""
