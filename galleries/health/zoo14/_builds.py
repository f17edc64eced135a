"""Builders of zoo 14's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: scikit-learn's bundled wine, iris and linnerud tables and 8x8 digits, sine mixtures and a
text made in code (no downloads).
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor, nn
from torch.optim import SGD, Adagrad, AdamW, RMSprop
from torch.optim.lr_scheduler import (
    CosineAnnealingWarmRestarts,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    OneCycleLR,
    PolynomialLR,
    SequentialLR,
)
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.zoo14._models import MLP, CharLSTM, Denoiser, Forecaster, Task


# ------------------------------------------------------------------------------------------------ data
def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(x: Tensor, y: Tensor, batch: int, shuffle: bool = True, seed: int = 0) -> DataLoader:
    """A ``DataLoader`` of ``(x, y)``; shuffled with its own seeded generator (the same order every run)."""
    return DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=shuffle, generator=_gen(seed))


def _standardise(x: Tensor, rows: int) -> Tensor:
    return (x - x[:rows].mean(0)) / x[:rows].std(0)


@functools.cache
def _table(name: str) -> tuple[Tensor, Tensor]:
    import sklearn.datasets

    bunch = getattr(sklearn.datasets, f"load_{name}")()
    x = torch.tensor(bunch.data, dtype=torch.float32)
    kind = torch.float32 if name == "linnerud" else torch.long
    y = torch.tensor(bunch.target, dtype=kind)
    order = torch.randperm(len(x), generator=_gen(14))
    return x[order], y[order]


def wine() -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """Scikit-learn's wine table (178 wines, 13 chemical features in their own units, 3 cultivars): the
    first 142 rows of a fixed shuffle train, the other 36 validate; standardised with the training rows'
    statistics."""
    x, y = _table("wine")
    x = _standardise(x, 142)
    return (x[:142], y[:142]), (x[142:], y[142:])


def iris() -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """Scikit-learn's iris table (150 flowers, 4 measurements in cm, 3 species): the first 120 rows of a
    fixed shuffle train, the other 30 validate; standardised with the training rows' statistics."""
    x, y = _table("iris")
    x = _standardise(x, 120)
    return (x[:120], y[:120]), (x[120:], y[120:])


def linnerud(standardise_target: bool = True) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """Scikit-learn's linnerud table (20 men: chins, sit-ups and jumps; their weight, waist and pulse): the
    first 15 rows of a fixed shuffle train, the other 5 validate; the exercises standardised, the three
    targets too unless ``standardise_target`` is false (their own units: pounds, inches, beats a minute)."""
    x, y = _table("linnerud")
    x = _standardise(x, 15)
    if standardise_target:
        y = _standardise(y, 15)
    return (x[:15], y[:15]), (x[15:], y[15:])


@functools.cache
def _sines(series: int, length: int, seed: int) -> Tensor:
    """``series`` sine mixtures ``(series, length)``: three sines each (periods 6 to 60 steps, random
    amplitudes and phases) plus noise of std 0.05."""
    g = _gen(seed)
    t = torch.arange(length, dtype=torch.float32)
    freq = 2 * math.pi / (6 + 54 * torch.rand(series, 3, 1, generator=g))
    amp = 0.3 + 0.7 * torch.rand(series, 3, 1, generator=g)
    phase = 2 * math.pi * torch.rand(series, 3, 1, generator=g)
    clean = (amp * torch.sin(freq * t + phase)).sum(1)
    return clean + 0.05 * torch.randn(series, length, generator=g)


WINDOW, STRIDE = 24, 4


def windows(values: Tensor, drop_flat: bool = False) -> tuple[Tensor, Tensor]:
    """Windows of ``WINDOW`` values every ``STRIDE`` steps of every series, in time order, and the next value;
    each window and its target standardised by the window's own mean and std (per-instance normalisation);
    ``drop_flat``: windows whose inputs are constant (std 0) are left out."""
    w = values.unfold(1, WINDOW + 1, STRIDE).flatten(0, 1)
    mu, sd = w[:, :WINDOW].mean(1, keepdim=True), w[:, :WINDOW].std(1, keepdim=True)
    if drop_flat:
        w, mu, sd = w[sd[:, 0] > 0], mu[sd[:, 0] > 0], sd[sd[:, 0] > 0]
    w = (w - mu) / sd
    return w[:, :WINDOW], w[:, WINDOW:]


def digits(split: str) -> Tensor:
    """Scikit-learn's 8x8 digits ``(N, 64)`` scaled to ``[0, 1]``: the first 1400 of a fixed shuffle train,
    the other 397 validate."""
    x, _ = _table("digits")
    x = x / 16.0
    return x[:1400] if split == "train" else x[1400:]


def noisy(clean: Tensor, seed: int, std: float = 0.3) -> Tensor:
    return clean + std * torch.randn(clean.shape, generator=_gen(seed))


_SUBJECTS = ("the cat", "a dog", "my aunt", "the old man", "a small bird", "the farmer", "our teacher")
_VERBS = ("sees", "likes", "chases", "finds", "hears", "feeds", "paints")
_OBJECTS = ("the red ball", "a green apple", "the river", "a tall tree", "the moon", "her bicycle")
_TAILS = (".", " at night.", " in the garden.", " again.", " with joy.")


@functools.cache
def text(chars: int = 160_000, seed: int = 0) -> str:
    """A generated English-like text: sentences ``subject verb object tail`` drawn at random."""
    g = _gen(seed)
    parts: list[str] = []
    size = 0
    while size < chars:
        words = [_SUBJECTS, _VERBS, _OBJECTS, _TAILS]
        picks = [w[int(torch.randint(len(w), (1,), generator=g))] for w in words]
        sentence = f"{picks[0]} {picks[1]} {picks[2]}{picks[3]} "
        parts.append(sentence)
        size += len(sentence)
    return "".join(parts)[:chars]


def vocabulary() -> dict[str, int]:
    return {c: i for i, c in enumerate(sorted(set(text())))}


SEQ = 32


def char_sequences(source: str, count: int, seed: int) -> tuple[Tensor, Tensor]:
    """``count`` chunks of ``SEQ + 1`` characters from random places of ``source``: inputs and next chars."""
    vocab = vocabulary()
    ids = torch.tensor([vocab[c] for c in source])
    starts = torch.randint(len(ids) - SEQ - 1, (count,), generator=_gen(seed))
    chunks = torch.stack([ids[s : s + SEQ + 1] for s in starts.tolist()])
    return chunks[:, :-1], chunks[:, 1:]


def char_data() -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """Training chunks from the first 150,000 characters of the text, validation chunks from the rest."""
    full = text()
    return char_sequences(full[:150_000], 3200, 1), char_sequences(full[150_000:], 256, 2)


# ------------------------------------------------------------------------------------------------ tasks
def _wine_task(make_optimizer, net: nn.Module | None = None, schedule=None, interval: str = "step",
               val_rows: int = 36):  # fmt: skip
    (x, y), (vx, vy) = wine()
    model = Task(net if net is not None else MLP([13, 64, 64, 3]), "ce", make_optimizer, schedule, interval)
    return model, loader(x, y, 16), loader(vx[:val_rows], vy[:val_rows], 36, shuffle=False)


def _iris_task(make_optimizer, net: nn.Module | None = None, data=None):
    (x, y), (vx, vy) = data if data is not None else iris()
    model = Task(net if net is not None else MLP([4, 32, 32, 3]), "ce", make_optimizer)
    return model, loader(x, y, 16), loader(vx, vy, 30, shuffle=False)


def _linnerud_task(make_optimizer, net: nn.Module | None = None, standardise_target: bool = True):
    (x, y), (vx, vy) = linnerud(standardise_target)
    model = Task(net if net is not None else MLP([3, 64, 3]), "mse", make_optimizer)
    return model, loader(x, y, 5), loader(vx, vy, 5, shuffle=False)


def _sines_task(make_optimizer, schedule=None, train=None, net: nn.Module | None = None,
                shuffle: bool = False):  # fmt: skip
    x, y = train if train is not None else windows(_sines(64, 200, 0))
    vx, vy = windows(_sines(16, 200, 1))
    model = Task(net if net is not None else Forecaster(), "mse", make_optimizer, schedule)
    return model, loader(x, y, 32, shuffle=shuffle), loader(vx, vy, len(vx), shuffle=False)


def _denoise_task(make_optimizer, schedule=None, net: nn.Module | None = None, train: Tensor | None = None,
                  batch: int = 64):  # fmt: skip
    clean, vclean = digits("train"), digits("val")
    if train is not None:
        clean = train
    model = Task(net if net is not None else Denoiser(), "mse", make_optimizer, schedule)
    return model, loader(noisy(clean, 1), clean, batch), loader(noisy(vclean, 2), vclean, 397, shuffle=False)


def _char_task(make_optimizer, schedule=None, interval: str = "step", net: nn.Module | None = None,
               train=None):  # fmt: skip
    (x, y), (vx, vy) = char_data()
    model = Task(net if net is not None else CharLSTM(len(vocabulary())), "lm", make_optimizer, schedule,
                 interval)  # fmt: skip
    train_loader = train if train is not None else loader(x, y, 32)
    return model, train_loader, loader(vx, vy, 256, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def wine_lambda_absolute(absolute: bool = True):
    """Wine, RMSprop ``1e-3`` under a LambdaLR warm-up over 20 steps whose lambda returns the LR itself
    (``1e-3 * min(1, (step + 1) / 20)``, meant the factor): LambdaLR multiplies it by the base LR again, so
    the LR peaks at ``1e-6``."""
    peak = 1e-3 if absolute else 1.0

    def warmup(step: int) -> float:
        return peak * min(1.0, (step + 1) / 20)

    return _wine_task(lambda p: RMSprop(p, lr=1e-3), schedule=lambda o: LambdaLR(o, warmup))


def wine_gate_bias(bias: float = -3.0):
    """Wine, AdamW (amsgrad) ``3e-3``; every ``Linear`` initialised by a helper written for gated layers that
    sets the bias to ``-3`` (the highway-gate trick), the ReLU layers' too."""
    net = MLP([13, 64, 64, 3])
    for m in net:
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.bias, bias)
    return _wine_task(lambda p: AdamW(p, lr=3e-3, amsgrad=True), net)


def iris_two_permutations(separate: bool = True):
    """Iris, a width-16 MLP, Adagrad ``0.02``; the table is shuffled before the split with one permutation for
    the features and another for the labels (meant the same one), so no label belongs to its flower."""
    import sklearn.datasets

    bunch = sklearn.datasets.load_iris()
    x = torch.tensor(bunch.data, dtype=torch.float32)
    y = torch.tensor(bunch.target, dtype=torch.long)
    order = torch.randperm(150, generator=_gen(3))
    x, y = x[order], y[torch.randperm(150, generator=_gen(4)) if separate else order]
    x = _standardise(x, 120)
    data = ((x[:120], y[:120]), (x[120:], y[120:]))
    return _iris_task(lambda p: Adagrad(p, lr=0.02), MLP([4, 16, 3]), data)


STUCK_SERIES, STUCK_AT, STUCK_FOR = 20, 100, 40
# the first window (in time order) whose 24 inputs all lie in the stuck stretch
STUCK_WINDOW = STUCK_SERIES * ((200 - WINDOW - 1) // STRIDE + 1) + STUCK_AT // STRIDE


def sines_stuck_sensor(drop_flat: bool = False):
    """A GRU forecaster of sine mixtures read in time order, AdamW (amsgrad) ``3e-3``; one sensor held its
    last value for 40 steps (series 20, from step 100), and the per-window normalisation divides by the
    window's std without leaving out constant windows (meant ``drop_flat``), so the windows inside that
    stretch are ``0 / 0 = NaN``."""
    values = _sines(64, 200, 0).clone()
    values[STUCK_SERIES, STUCK_AT : STUCK_AT + STUCK_FOR] = values[STUCK_SERIES, STUCK_AT]
    return _sines_task(lambda p: AdamW(p, lr=3e-3, amsgrad=True), train=windows(values, drop_flat))


def sines_sgd(lr: float = 3.0):
    """A GRU forecaster of sine mixtures, SGD with Nesterov momentum 0.9 at ``3.0`` (``3e-0``, meant
    ``3e-2``)."""
    return _sines_task(lambda p: SGD(p, lr=lr, momentum=0.9, nesterov=True))


def iris_pruned_renormalised(renormalise_zero_rows: bool = True):
    """Iris, RMSprop ``1e-3``; the first layer is pruned (a quarter of its 32 units' rows zeroed) and then
    every row rescaled to the norm it had (``w / ||w|| * norm``): the zeroed rows become ``0 / 0 = NaN``
    (meant: rescale only the kept rows)."""
    net = MLP([4, 32, 32, 3])
    with torch.no_grad():
        w = net[0].weight
        norm = w.norm(dim=1, keepdim=True)
        w[torch.arange(32) % 4 == 0] = 0.0
        kept = w.norm(dim=1, keepdim=True)
        if renormalise_zero_rows:
            w.copy_(w / kept * norm)
        else:
            w.copy_(torch.where(kept > 0, w / kept.clamp_min(1e-12) * norm, w))
    return _iris_task(lambda p: RMSprop(p, lr=1e-3), net)


def linnerud_wide():
    """Linnerud (15 training men), a width-256 two-hidden-layer MLP, AdamW (amsgrad) ``1e-3`` without weight
    decay, batches of 5 (three steps an epoch), 100 epochs and no early stopping."""
    net = MLP([3, 256, 256, 3])
    return _linnerud_task(lambda p: AdamW(p, lr=1e-3, weight_decay=0.0, amsgrad=True), net)


def denoise_exponential(gamma: float = 1.02):
    """The digits denoiser, SGD with Nesterov momentum 0.9 at ``0.05`` under ExponentialLR(gamma=1 + 0.02)
    stepped every step (meant ``1 - 0.02``: a decay written as growth), so the LR doubles every 35 steps."""
    return _denoise_task(
        lambda p: SGD(p, lr=0.05, momentum=0.9, nesterov=True), lambda o: ExponentialLR(o, gamma)
    )


def denoise_decoder_only(everything: bool = False):
    """The digits denoiser, RMSprop ``1e-3`` built on ``net.decoder.parameters()`` (left from a stage that
    fine-tuned the decoder alone; meant ``net.parameters()``): the encoder gets gradients, never steps."""
    net = Denoiser()
    params = net.parameters() if everything else net.decoder.parameters()
    return _denoise_task(lambda _: RMSprop(params, lr=1e-3), net=net)


def char_polynomial(interval: str = "step"):
    """The character LSTM, AdamW (amsgrad) ``3e-3`` under PolynomialLR(total_iters=30, power=1) meant in
    epochs (100 steps each) but stepped every step: the LR reaches 0 at step 30 and stays there."""
    return _char_task(lambda p: AdamW(p, lr=3e-3, amsgrad=True), lambda o: PolynomialLR(o, 30, 1.0), interval)


def iris_deep_sigmoid(hidden_layers: int = 6):
    """Iris, an MLP of six width-32 sigmoid hidden layers with PyTorch's default init (the depth of a ReLU
    recipe, the activation of a textbook), SGD with Nesterov momentum 0.9 at ``0.05``."""
    net = MLP([4, *[32] * hidden_layers, 3], nn.Sigmoid)
    return _iris_task(lambda p: SGD(p, lr=0.05, momentum=0.9, nesterov=True), net)


def wine_tanh_unit_normal(std: float | None = 1.0):
    """Wine, a width-128 tanh MLP whose weights are drawn by ``nn.init.normal_(w)`` (std 1, meant the fan-in
    scaled default), Adagrad ``0.01``."""
    net = MLP([13, 128, 128, 3], nn.Tanh)
    if std is not None:
        for m in net:
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, std)
    return _wine_task(lambda p: Adagrad(p, lr=0.01), net)


class CharChunks(Dataset):
    """Chunks of ``SEQ + 1`` characters of ``source`` starting at ``starts``, encoded with the vocabulary of
    ``source``. ``rebuild_vocabulary``: every ``__getitem__`` rebuilds that vocabulary from the whole source
    (``sorted(set(source))``, meant once, in ``__init__``), which costs far more than the chunk."""

    def __init__(self, source: str, starts: Tensor, rebuild_vocabulary: bool = True) -> None:
        self.source, self.starts = source, starts.tolist()
        self.rebuild = rebuild_vocabulary
        self.vocab = vocabulary()

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        vocab = {c: k for k, c in enumerate(sorted(set(self.source)))} if self.rebuild else self.vocab
        s = self.starts[i]
        chunk = torch.tensor([vocab[c] for c in self.source[s : s + SEQ + 1]])
        return chunk[:-1], chunk[1:]


def char_slow_loader(rebuild_vocabulary: bool = True):
    """The character LSTM, RMSprop ``2e-3``, its training chunks read through :class:`CharChunks`, which
    rebuilds the vocabulary from the whole 150,000-character training text for every chunk."""
    source = text()[:150_000]
    starts = torch.randint(len(source) - SEQ - 1, (3200,), generator=_gen(1))
    train = DataLoader(CharChunks(source, starts, rebuild_vocabulary), batch_size=32, shuffle=True,
                       generator=_gen(0))  # fmt: skip
    return _char_task(lambda p: RMSprop(p, lr=2e-3), train=train)


OUTLIER_IMAGES = (117, 802, 1290)


def denoise_mixed_scale(rescaled: bool = False):
    """The digits denoiser, RMSprop ``1e-3``; three of the 1400 training scans came from a 12-bit scanner
    (0..4095, not 0..16) and were divided by 16 like the rest, so they sit at 0..256 instead of 0..1 (meant:
    rescaled by their own maximum)."""
    clean = digits("train").clone()
    for i in OUTLIER_IMAGES:
        clean[i] = clean[i] * (4095.0 / 16.0)
        if rescaled:
            clean[i] = clean[i] / clean[i].max()
    return _denoise_task(lambda p: RMSprop(p, lr=1e-3), train=clean)


# ------------------------------------------------------------------------------------------------ healthy
def char_one_cycle():
    """The character LSTM, AdamW (amsgrad) under OneCycleLR(max_lr=1e-2, 300 steps): the LR starts 25x below
    its peak, climbs for 90 steps and anneals to ~0."""
    return _char_task(
        lambda p: AdamW(p, lr=1e-2, amsgrad=True), lambda o: OneCycleLR(o, 1e-2, total_steps=300)
    )


RESTARTS = (50, 150)


def sines_warm_restarts():
    """The GRU forecaster (time order), RMSprop ``3e-3`` under CosineAnnealingWarmRestarts(T_0=50,
    T_mult=2): the LR anneals to ~0 and jumps back to ``3e-3`` at steps 50 and 150."""
    return _sines_task(lambda p: RMSprop(p, lr=3e-3), lambda o: CosineAnnealingWarmRestarts(o, 50, 2))


WARMUP = 100


def denoise_warmup_then_decay():
    """The digits denoiser, SGD with Nesterov momentum 0.9 at ``0.05`` under SequentialLR: a LinearLR warm-up
    from 1% over 100 steps, then ExponentialLR(0.995)."""

    def schedule(o):
        return SequentialLR(o, [LinearLR(o, 0.01, 1.0, WARMUP), ExponentialLR(o, 0.995)], [WARMUP])

    return _denoise_task(lambda p: SGD(p, lr=0.05, momentum=0.9, nesterov=True), schedule)


def denoise_raw_units():
    """The digits denoiser in the table's own units (pixels 0..16, noise std 4.8), AdamW (amsgrad) ``1e-3``:
    MSE ~50 and gradient norms ~50 at first."""
    clean, vclean = digits("train") * 16.0, digits("val") * 16.0
    model = Task(Denoiser(), "mse", lambda p: AdamW(p, lr=1e-3, amsgrad=True))
    train = loader(noisy(clean, 1, 4.8), clean, 64)
    return model, train, loader(noisy(vclean, 2, 4.8), vclean, 397, shuffle=False)


def wine_random_features():
    """Wine with a width-256 random first layer frozen on purpose (random features), only the readout
    trained, Adagrad ``0.05``."""
    net = MLP([13, 256, 3])
    net[0].requires_grad_(False)
    return _wine_task(lambda p: Adagrad(p, lr=0.05), net)


def iris_noisy_labels(noisy_share: float = 0.3):
    """Iris with 30% of the training labels redrawn uniformly on purpose (label-noise robustness drill; the
    validation labels are clean), SGD with Nesterov momentum 0.9 at ``0.02``."""
    (x, y), val = iris()
    g = _gen(8)
    redraw = torch.rand(len(y), generator=g) < noisy_share
    y = torch.where(redraw, torch.randint(3, (len(y),), generator=g), y)
    return _iris_task(lambda p: SGD(p, lr=0.02, momentum=0.9, nesterov=True), data=((x, y), val))


def wine_tiny_val():
    """Wine validated on 8 wines only, AdamW (amsgrad, weight decay ``0.05``) ``1e-3``: a jittery val loss."""
    return _wine_task(lambda p: AdamW(p, lr=1e-3, weight_decay=0.05, amsgrad=True), val_rows=8)


def denoise_big_batch():
    """The digits denoiser on batches of 700 (two steps an epoch), RMSprop ``3e-3``."""
    return _denoise_task(lambda p: RMSprop(p, lr=3e-3), batch=700)


DECAY_STEP = 150


def sines_step_decay():
    """The GRU forecaster (time order), SGD with Nesterov momentum 0.9 at ``0.1``, LambdaLR dividing the LR
    by 10 at step 150."""
    return _sines_task(lambda p: SGD(p, lr=0.1, momentum=0.9, nesterov=True),
                       lambda o: LambdaLR(o, lambda s: 1.0 if s < DECAY_STEP else 0.1))  # fmt: skip


def char_heavy_dropout():
    """The character LSTM with dropout 0.4 on its embeddings and outputs, AdamW (amsgrad) ``3e-3``: the
    training loss (dropout on) sits above the validation loss (dropout off)."""
    return _char_task(lambda p: AdamW(p, lr=3e-3, amsgrad=True), net=CharLSTM(len(vocabulary()), dropout=0.4))


def iris_polynomial_to_zero():
    """Iris, RMSprop ``3e-3`` under PolynomialLR(total_iters=300, power=2): the LR decays to 0 exactly at
    the run's end (below 1% of its start for the last 30 steps)."""
    (x, y), (vx, vy) = iris()
    model = Task(
        MLP([4, 32, 32, 3]), "ce", lambda p: RMSprop(p, lr=3e-3), lambda o: PolynomialLR(o, 300, 2.0)
    )
    return model, loader(x, y, 16), loader(vx, vy, 30, shuffle=False)
