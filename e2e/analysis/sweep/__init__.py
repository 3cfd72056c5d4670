"""The sweep's comparison: run records -> comparable cells -> blocked comparisons, noise,
attribution, warnings and the one headline rule."""
