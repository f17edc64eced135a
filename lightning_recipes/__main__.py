"""``python -m lightning_recipes ...`` is the same as the ``lightning-recipes`` command."""

from lightning_recipes.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
