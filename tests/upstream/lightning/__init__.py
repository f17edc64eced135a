"""Lightning's own EarlyStopping test file, run against ours (README.md)."""
