"""Stage 5: nginx built with the patch (stage.py), from a plan over a shared build cache."""
