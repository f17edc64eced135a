"""Private machinery shared by the sanity-check callbacks and ``lightning_recipes.preflight``."""
