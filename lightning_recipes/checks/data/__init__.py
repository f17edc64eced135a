"""Data stage: what the loaders serve (purity, pairing, duplicates, splits, leakage)."""
