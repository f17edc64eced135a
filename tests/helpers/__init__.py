"""Helpers shared by several test modules: no test module imports another test module, they import from
here (helpers that benchmarks need as well live in ``lightning_recipes.testing``)."""
