"""The strict verdict: a resolved patch must not break the rest of nginx or add memory errors."""
