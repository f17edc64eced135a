"""Benchmarks: speed, memory and overhead against the best public alternatives, measured side by side."""
