"""Parameter layouts shared by the benchmarks, so every table measures the same shapes."""

from __future__ import annotations


def transformer25m_shapes() -> list[tuple[int, ...]]:
    """A GPT-like 25.2M-parameter layout in 147 tensors: a 10240x384 embedding, 12 blocks (LN, qkv, proj, LN,
    fc1, fc2, with biases) and a final LN. The largest tensor has 3.9M elements."""
    d, ff, vocab = 384, 1536, 10240
    shapes: list[tuple[int, ...]] = [(vocab, d)]
    for _ in range(12):
        shapes += [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (ff, d), (ff,), (d, ff), (d,)]
    shapes += [(d,), (d,)]
    return shapes


def small200_shapes() -> list[tuple[int, ...]]:
    """2.06M parameters in 200 small tensors: 50 x (Linear(128->160), Linear(160->128))."""
    shapes: list[tuple[int, ...]] = []
    for _ in range(50):
        shapes += [(160, 128), (160,), (128, 160), (128,)]
    return shapes
