"""Stage 7: every named assertion graded from the prove stage's TAP."""
