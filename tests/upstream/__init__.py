"""Peer projects' own test files, vendored verbatim, run against lightning_recipes (see each README)."""
