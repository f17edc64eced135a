"""Builders of zoo 27's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data, all made in code: protein chains whose residues' secondary structure (helix, strand, coil)
follows window propensity rules, pairs of tracker frames whose detections moved and were shuffled, reactant
fingerprint pairs with a bounded yield, depth patches of objects on a table with a rare grasp success, and
periodic initial temperatures with their solution of the heat equation at time ``T``.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.optim import SGD, Adagrad, Adam, AdamW, RAdam
from torch.optim.lr_scheduler import (
    ChainedScheduler,
    CosineAnnealingWarmRestarts,
    ExponentialLR,
    LinearLR,
    PolynomialLR,
    ReduceLROnPlateau,
)
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.zoo27._models import (
    MLP,
    AssocScorer,
    GraspCNN,
    HeatNet,
    ManualTask,
    Task,
    YieldNet,
    cross_entropy,
    mse,
)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(*tensors: Tensor, batch: int, shuffle: bool = True, seed: int = 0) -> DataLoader:
    """A loader of in-memory tensors; shuffled with its own generator (the same order in every run)."""
    return DataLoader(TensorDataset(*tensors), batch_size=batch, shuffle=shuffle,
                      generator=_gen(seed) if shuffle else None)  # fmt: skip


# ------------------------------------------------------------------------------------------------ proteins
AMINO = "ACDEFGHIKLMNPQRSTVWY"
PAD = len(AMINO)  # the padding token beyond a chain's ends
HALF = 3  # a window of 7 residues
CHAIN = 40


@functools.cache
def _propensity() -> Tensor:
    """Each amino acid's propensity for helix, strand and coil ``(20, 3)`` (Chou-Fasman-like: a few strong
    helix formers, a few strand formers, glycine and proline breakers)."""
    g = _gen(2700)
    p = torch.randn(len(AMINO), 3, generator=g)
    for aa, c in zip("AELMQK", [0] * 6, strict=True):
        p[AMINO.index(aa), c] += 1.5
    for aa, c in zip("VIYFWT", [1] * 6, strict=True):
        p[AMINO.index(aa), c] += 1.5
    for aa in "GPNS":
        p[AMINO.index(aa), 2] += 1.5
    return p


@functools.cache
def chains(count: int, seed: int) -> tuple[Tensor, Tensor]:
    """``count`` chains of 40 residues ``(count, 40)`` (indices into :data:`AMINO`) and each residue's state
    (0 helix, 1 strand, 2 coil): the argmax of its window's propensities (the centre weighted most) plus
    noise, with coil favoured."""
    g = _gen(seed)
    seq = torch.randint(0, len(AMINO), (count, CHAIN), generator=g)
    prop = _propensity()[seq]  # (count, 40, 3)
    weights = torch.tensor([0.3, 0.6, 0.9, 1.2, 0.9, 0.6, 0.3])
    padded = F.pad(prop.transpose(1, 2), (HALF, HALF))  # (count, 3, 46)
    score = F.conv1d(padded.reshape(-1, 1, CHAIN + 2 * HALF), weights.view(1, 1, -1)).view(count, 3, CHAIN)
    score = (
        score.transpose(1, 2)
        + torch.tensor([0.0, -0.3, 0.6])
        + 0.7 * torch.randn(count, CHAIN, 3, generator=g)
    )
    return seq, score.argmax(-1)


def windows(seq: Tensor, mask_pad: str = "real") -> Tensor:
    """Every residue's window of 7 as a one-hot ``(count * 40, 7 * 21)`` (20 amino acids and the padding
    token). ``mask_pad``: ``"real"`` keeps the real residues' one-hots (the mask ``token != PAD``),
    ``"pad"`` multiplies by ``token == PAD`` instead (the mask inverted), keeping only the padding's."""
    padded = F.pad(seq, (HALF, HALF), value=PAD)  # (count, 46)
    win = padded.unfold(1, 2 * HALF + 1, 1).reshape(-1, 2 * HALF + 1)  # (count * 40, 7)
    onehot = F.one_hot(win, len(AMINO) + 1).float()
    keep = (win != PAD) if mask_pad == "real" else (win == PAD)
    return (onehot * keep.unsqueeze(-1)).flatten(1)


class ChainWindows(Dataset):
    """Residue windows served from the proteome as one string. ``encode_per_item``: ``__getitem__`` encodes
    the whole proteome string to indices for every residue (meant: once, in ``__init__``)."""

    def __init__(self, seq: Tensor, labels: Tensor, encode_per_item: bool) -> None:
        self.text = "".join(AMINO[i] for i in seq.flatten().tolist())
        self.labels = labels.flatten()
        self.encode_per_item = encode_per_item
        self.index = {c: i for i, c in enumerate(AMINO)}
        self.codes = None if encode_per_item else self._encode()

    def _encode(self) -> Tensor:
        return F.pad(torch.tensor([self.index[c] for c in self.text]), (HALF, HALF), value=PAD)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        codes = self._encode() if self.encode_per_item else self.codes
        chain_start, pos = (i // CHAIN) * CHAIN, i % CHAIN
        win = codes[chain_start + pos : chain_start + pos + 2 * HALF + 1].clone()
        # residues beyond this chain's ends are padding
        offsets = torch.arange(-HALF, HALF + 1) + pos
        win[(offsets < 0) | (offsets >= CHAIN)] = PAD
        onehot = F.one_hot(win, len(AMINO) + 1).float() * (win != PAD).unsqueeze(-1)
        return onehot.flatten(), self.labels[i]


def _ss_task(make_optimizer, net: nn.Module | None = None, mask_pad: str = "real", batch: int = 64,
             schedule=None, loss=cross_entropy, train_chains: int = 200, dataset: str = "tensors",
             val_loss=None):  # fmt: skip
    """Secondary-structure tagging: 200 training chains (8,000 residues), 50 validation chains, a window MLP
    of width 64 unless ``net``."""
    seq, y = chains(train_chains, 0)
    vseq, vy = chains(50, 1)
    net = net if net is not None else MLP([7 * 21, 64, 3])
    model = Task(net, loss, make_optimizer, schedule, val_loss_fn=val_loss or cross_entropy)
    if dataset == "tensors":
        train = loader(windows(seq, mask_pad), y.flatten(), batch=batch)
    else:
        train = DataLoader(ChainWindows(seq, y, dataset == "per_item"), batch_size=batch, shuffle=True,
                           generator=_gen(0))  # fmt: skip
    return model, train, loader(windows(vseq, mask_pad), vy.flatten(), batch=2000, shuffle=False)


# ------------------------------------------------------------------------------------------------ tracking
DETECTIONS, WIDTH, HEIGHT = 6, 640.0, 480.0


@functools.cache
def frame_pairs(rows: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """``rows`` pairs of frames, each with 8 detections ``(x, y, w, h, a1..a4)``: boxes in pixels and a
    4-d appearance code; frame 2 has every object moved by its velocity (up to ~40 px) and noise, its
    appearance re-measured, in a shuffled order. Returns both frames ``(rows, 6, 8)`` and, per frame-1
    detection, the index of its frame-2 detection ``(rows, 6)``."""
    g = _gen(seed)
    pos = torch.rand(rows, DETECTIONS, 2, generator=g) * torch.tensor([WIDTH, HEIGHT])
    size = 20 + 80 * torch.rand(rows, DETECTIONS, 2, generator=g)
    look = torch.randn(rows, DETECTIONS, 4, generator=g)
    vel = 20 * torch.randn(rows, DETECTIONS, 2, generator=g)
    a = torch.cat([pos, size, look], -1)
    pos2 = pos + vel + 4 * torch.randn(rows, DETECTIONS, 2, generator=g)
    size2 = size * (1 + 0.05 * torch.randn(rows, DETECTIONS, 2, generator=g))
    look2 = look + 0.8 * torch.randn(rows, DETECTIONS, 4, generator=g)
    b = torch.cat([pos2, size2, look2], -1)
    perm = torch.argsort(torch.rand(rows, DETECTIONS, generator=g), 1)  # b's slot j holds object perm[j]
    b = b.gather(1, perm.unsqueeze(-1).expand(-1, -1, b.shape[-1]))
    target = torch.argsort(perm, 1)  # object i sits in slot target[i]
    return a, b, target


SCALE = torch.tensor([WIDTH, HEIGHT, WIDTH, HEIGHT, 1, 1, 1, 1])


def assoc_loss(net: nn.Module, batch) -> Tensor:
    a, b, target = batch
    logits = net(a, b)
    return F.cross_entropy(logits.flatten(0, 1), target.flatten())


def _assoc_task(make_optimizer, net: nn.Module | None = None, scaled: bool = True, batch: int = 32,
                manual_order: tuple[str, ...] | None = None, schedule=None,
                permuted_targets: bool = True):  # fmt: skip
    """Data association: 6,400 training frame pairs and 500 validation ones, boxes divided by the image size
    unless ``scaled`` is False (pixels), a pairwise tanh scorer; ``manual_order``: manual optimisation in that
    order; ``permuted_targets`` False: the training targets are the slots before frame 2 was shuffled."""
    a, b, t = frame_pairs(6400, 0)
    va, vb, vt = frame_pairs(500, 1)
    if not permuted_targets:
        t = torch.arange(DETECTIONS).expand(len(t), -1)
    if scaled:
        a, b, va, vb = a / SCALE, b / SCALE, va / SCALE, vb / SCALE
    net = net if net is not None else AssocScorer()
    if manual_order is not None:
        model = ManualTask(net, assoc_loss, make_optimizer, schedule, order=manual_order)
    else:
        model = Task(net, assoc_loss, make_optimizer, schedule)
    return model, loader(a, b, t, batch=batch), loader(va, vb, vt, batch=500, shuffle=False)


# ------------------------------------------------------------------------------------------------ yields
BITS = 64
QUANTITATIVE_ROWS = [454, 3020, 3243]  # the training reactions reported at exactly 100%


@functools.cache
def reactions(rows: int, seed: int, exact: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """``rows`` reactions: two reactants' 64-bit fingerprints (~8 bits on each) and the yield in percent
    ``[0, 100]``: a sigmoid of per-bit contributions of both reactants (symmetric in them) and a pairwise
    interaction, plus noise, clipped to ``[0.5, 99.5]``; ``exact``: that many reactions are reported at
    exactly 100% (quantitative yields)."""
    g = _gen(seed)
    w = torch.randn(BITS, generator=_gen(271)) * 0.6
    m = torch.randn(BITS, BITS, generator=_gen(272)) * 0.15
    m = (m + m.T) / 2
    a = (torch.rand(rows, BITS, generator=g) < 8 / BITS).float()
    b = (torch.rand(rows, BITS, generator=g) < 8 / BITS).float()
    z = (a + b) @ w + ((a @ m) * b).sum(-1) - 0.5
    y = (100 * torch.sigmoid(z) + 5 * torch.randn(rows, generator=g)).clamp(0.5, 99.5)
    if exact:
        y[QUANTITATIVE_ROWS[:exact]] = 100.0
    return a, b, y


def plateau_schedule(optimizer):
    return ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=0)


def yield_mse(net: nn.Module, batch) -> Tensor:
    a, b, y = batch
    return F.mse_loss(net(a, b), y)


def logit_mse(net: nn.Module, batch) -> Tensor:
    """The MSE on the logit scale: the target is ``logit(y / 100)``."""
    a, b, y = batch
    return F.mse_loss(net(a, b), torch.logit(y / 100))


def _yield_task(make_optimizer, net: nn.Module | None = None, loss=yield_mse, exact: int = 0,
                rows: int = 6400, batch: int = 64, schedule=None, schedule_config=None):  # fmt: skip
    """Reaction yields: ``rows`` training reactions, 800 validation ones, a :class:`YieldNet`; the loss is
    ``loss`` (the validation loss the same)."""
    a, b, y = reactions(rows, 0, exact)
    va, vb, vy = reactions(800, 1)
    model = Task(net if net is not None else YieldNet(), loss, make_optimizer, schedule, schedule_config)
    return model, loader(a, b, y, batch=batch), loader(va, vb, vy, batch=800, shuffle=False)


# ------------------------------------------------------------------------------------------------ grasps
PATCH = 16


@functools.cache
def patches(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """``rows`` depth patches ``(rows, 1, 16, 16)`` (height above the table, noisy) of one box each, at a
    random place, size and height, maybe with a clutter box; success (1) when the box is centred, narrow
    enough across the gripper's horizontal closing axis (3-6 px) and tall enough: ~10% of the patches."""
    g = _gen(seed)
    yy, xx = torch.meshgrid(torch.arange(PATCH), torch.arange(PATCH), indexing="ij")
    cx = 8 + 3 * torch.randn(rows, generator=g)
    cy = 8 + 3 * torch.randn(rows, generator=g)
    wx = 2 + 8 * torch.rand(rows, generator=g)
    wy = 3 + 8 * torch.rand(rows, generator=g)
    h = 0.2 + torch.rand(rows, generator=g)
    box = ((xx - cx.view(-1, 1, 1)).abs() <= wx.view(-1, 1, 1) / 2) & (
        (yy - cy.view(-1, 1, 1)).abs() <= wy.view(-1, 1, 1) / 2
    )
    depth = box.float() * h.view(-1, 1, 1)
    clutter = torch.rand(rows, generator=g) < 0.5
    ox, oy = torch.randint(0, PATCH, (rows,), generator=g), torch.randint(0, PATCH, (rows,), generator=g)
    other = (
        ((xx - ox.view(-1, 1, 1)).abs() <= 1) & ((yy - oy.view(-1, 1, 1)).abs() <= 1) & clutter.view(-1, 1, 1)
    )
    depth = torch.maximum(depth, 0.5 * other.float())
    depth = depth + 0.03 * torch.randn(depth.shape, generator=g)
    centred = ((cx - 7.5).abs() < 2.5) & ((cy - 7.5).abs() < 2.5)
    label = (centred & (wx > 3) & (wx < 6) & (h > 0.5)).float()
    return depth.unsqueeze(1), label


class Augmented(Dataset):
    """Patches with a random rotation by 180 degrees and random flips (the label is unchanged: the gripper
    closes along the horizontal either way), drawn with the dataset's own generator."""

    def __init__(self, x: Tensor, y: Tensor, augment: bool) -> None:
        self.x, self.y, self.augment = x, y, augment
        self.g = _gen(77)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        x = self.x[i]
        if self.augment:
            k = torch.randint(0, 4, (1,), generator=self.g).item()
            x = torch.rot90(x, 2, (1, 2)) if k & 1 else x
            x = x.flip(2) if k & 2 else x
            if torch.rand(1, generator=self.g).item() < 0.5:
                x = x.flip(1)
        return x, self.y[i]


def bce(pos_weight: float | None = None):
    def loss(net: nn.Module, batch) -> Tensor:
        x, y = batch
        weight = torch.tensor(pos_weight) if pos_weight is not None else None
        return F.binary_cross_entropy_with_logits(net(x), y, pos_weight=weight)

    return loss


def _grasp_task(make_optimizer, net: nn.Module | None = None, rows: int = 4000, batch: int = 64,
                augment: str = "train", schedule=None, pos_weight: float | None = None):  # fmt: skip
    """Grasp success: ``rows`` training patches and 400 validation ones, a :class:`GraspCNN`; ``augment``
    names the split the random rotations and flips are applied to (``"train"`` as meant, ``"val"``)."""
    x, y = patches(rows, 0)
    vx, vy = patches(400, 1)
    model = Task(net if net is not None else GraspCNN(), bce(pos_weight), make_optimizer, schedule,
                 val_loss_fn=bce(pos_weight))  # fmt: skip
    train = DataLoader(Augmented(x, y, augment == "train"), batch_size=batch, shuffle=True, generator=_gen(0))
    val = DataLoader(Augmented(vx, vy, augment == "val"), batch_size=400)
    return model, train, val


# ------------------------------------------------------------------------------------------------ heat
GRID, T_END = 32, 0.1


@functools.cache
def heat_pairs(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """``rows`` periodic initial temperatures on a 32-point grid of ``[0, 2 pi)`` (random Fourier modes up to
    8, amplitudes decaying as ``1 / k``) and their exact solutions of ``u_t = u_xx`` at ``T``: each mode
    damped by ``exp(-k^2 T)``."""
    g = _gen(seed)
    k = torch.arange(GRID // 2 + 1)
    amp = torch.where((k > 0) & (k <= 8), 1.0 / k.clamp_min(1), torch.zeros(()))
    coef = torch.complex(torch.randn(rows, len(k), generator=g), torch.randn(rows, len(k), generator=g)) * amp
    u0 = torch.fft.irfft(coef, GRID) * GRID / 4
    ut = torch.fft.irfft(coef * torch.exp(-(k**2) * T_END), GRID) * GRID / 4
    return u0, ut


def gaussian_nll(net: nn.Module, batch) -> Tensor:
    u, target = batch
    out = net(u)
    return F.gaussian_nll_loss(out[:, 0], target, out[:, 1].exp())


def _heat_task(make_optimizer, net: nn.Module | None = None, loss=mse, rows: int = 3200, batch: int = 32,
               schedule=None, schedule_config=None, manual_order: tuple[str, ...] | None = None,
               val_loss=None):  # fmt: skip
    """The heat surrogate: ``rows`` training initial conditions, 400 validation ones, a :class:`HeatNet`."""
    u, ut = heat_pairs(rows, 0)
    vu, vut = heat_pairs(400, 1)
    net = net if net is not None else HeatNet()
    if manual_order is not None:
        model = ManualTask(net, loss, make_optimizer, schedule, order=manual_order, val_loss_fn=val_loss)
    else:
        model = Task(net, loss, make_optimizer, schedule, schedule_config, val_loss_fn=val_loss)
    return model, loader(u, ut, batch=batch), loader(vu, vut, batch=400, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def ss_mask_inverted(mask_pad: str = "pad"):
    """Secondary structure, AdamW ``3e-3`` with AMSGrad; the padding mask is written ``token == PAD`` (meant
    ``token != PAD``), so every real residue's one-hot is multiplied by 0 and only the padding beyond the
    chains' ends is left in the windows."""
    return _ss_task(lambda p: AdamW(p, lr=3e-3, amsgrad=True), mask_pad=mask_pad)


def ss_adagrad(lr: float = 1e-5):
    """Secondary structure, Adagrad at ``1e-5`` (meant ``1e-2``, Adagrad's usual LR)."""
    return _ss_task(lambda p: Adagrad(p, lr=lr))


def ss_per_item(per_item: bool = True):
    """Secondary structure, AdamW ``3e-3``, batches of 32, from a Dataset whose ``__getitem__`` encodes the
    whole proteome string (8,000 residues) to indices for every window it serves (meant: once, in
    ``__init__``)."""
    return _ss_task(lambda p: AdamW(p, lr=3e-3), dataset="per_item" if per_item else "encoded", batch=32)


QUANTITATIVE = 3  # reactions reported at exactly 100% yield


def yield_plateau_per_step(interval: str = "step"):
    """Yields in percent, batches of 16, RAdam ``3e-3`` under ReduceLROnPlateau(factor=0.5, patience=0) on
    the training loss with ``{"interval": "step"}`` (meant: on the validation loss, once an epoch): every
    noisy step that is not a new low halves the LR."""
    config = {"interval": interval, "monitor": "train_loss" if interval == "step" else "val_loss"}
    return _yield_task(
        lambda p: RAdam(p, lr=3e-3), batch=16, schedule=plateau_schedule, schedule_config=config
    )


def yield_logit_target(exact: int = QUANTITATIVE):
    """Yields regressed on the logit scale (``logit(y / 100)``, an unbounded target), Adam ``1e-3``; three
    reactions reported at exactly 100% have the target ``logit(1) = inf`` (meant: clipped to 99.5% first)."""
    return _yield_task(lambda p: Adam(p, lr=1e-3), YieldNet(bounded=False), logit_mse, exact=exact)


def yield_nesterov(lr: float = 0.3):
    """Yields on the logit scale (clipped targets), SGD with Nesterov momentum 0.9 at ``0.3`` (meant
    ``0.03``, the step size of a tuned run copied with one digit shifted) reached through a LinearLR warm-up
    over 100 steps from 1% of it."""
    return _yield_task(lambda p: SGD(p, lr=lr, momentum=0.9, nesterov=True), YieldNet(bounded=False),
                       logit_mse, schedule=lambda o: LinearLR(o, 0.01, 1.0, total_iters=100))  # fmt: skip


def grasp_augment_val(augment: str = "val"):
    """Grasps from 160 labelled patches (five batches an epoch), a wider CNN, Adam ``3e-3``; the random
    rotations and flips are given to the validation Dataset (meant: the training one), so the CNN sees the
    same 160 patches every epoch."""
    return _grasp_task(lambda p: Adam(p, lr=3e-3), GraspCNN(width=16, hidden=512), rows=160, batch=32,
                       augment=augment)  # fmt: skip


def grasp_gamma(gamma: float = 1.02):
    """Grasps, Adam ``1e-3`` under ChainedScheduler(LinearLR warm-up over 20 steps, ExponentialLR(gamma=1.02)
    stepped per step): the ExponentialLR of an LR range test (which grows the LR 2% a step to find its
    ceiling) left in the training recipe (meant: the warm-up alone, ``gamma=1``)."""

    def schedule(optimizer):
        return ChainedScheduler(
            [LinearLR(optimizer, 0.1, 1.0, total_iters=20), ExponentialLR(optimizer, gamma)]
        )

    return _grasp_task(lambda p: Adam(p, lr=1e-3), schedule=schedule)


def grasp_relu_logit(relu: bool = True):
    """Grasps, Adam ``1e-3``; the CNN's head written as ``Linear`` + ReLU for every layer, the last included:
    a ReLU on the logit."""
    return _grasp_task(lambda p: Adam(p, lr=1e-3), GraspCNN(relu_on_logit=relu))


def assoc_pixels(scaled: bool = False):
    """Data association, Adam ``1e-2``; the boxes are fed in pixels (meant: divided by the image size), so
    the encoder's tanh units see inputs in the hundreds."""
    return _assoc_task(lambda p: Adam(p, lr=1e-2), scaled=scaled)


def assoc_normal_init(std: float = 1.0):
    """Data association, Adam ``1e-2``; every Linear re-initialised with ``nn.init.normal_(weight)``, its
    default ``std=1`` (meant ``std=1 / sqrt(fan_in)``: a port of a Keras initialiser)."""
    net = AssocScorer()
    for m in net.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=std if std != 0 else 1 / math.sqrt(m.in_features))
            nn.init.zeros_(m.bias)
    return _assoc_task(lambda p: Adam(p, lr=1e-2), net)


def assoc_no_grad_encoder(frozen: bool = True):
    """Data association, Adam ``1e-2``; the detection encoder's forward runs under ``torch.no_grad()``
    (copied from the tracker's inference code), so the encoder never gets a gradient."""
    return _assoc_task(lambda p: Adam(p, lr=1e-2), AssocScorer(frozen_encoder=frozen))


def assoc_targets_unpermuted(permuted: bool = False):
    """Data association, Adam ``1e-2``; frame 2's detections are shuffled (so that the identity is not a
    shortcut) but the targets are left as ``arange(6)``, the order before the shuffle: no target belongs to
    its detection."""
    return _assoc_task(lambda p: Adam(p, lr=1e-2), permuted_targets=permuted)


def heat_polynomial(total_iters: int = 30):
    """The heat surrogate, Adam ``3e-3`` under PolynomialLR(total_iters=30, power=1) stepped per step: 30 is
    the recipe's number of epochs, so the LR reaches 0 at step 30."""
    return _heat_task(lambda p: Adam(p, lr=3e-3), schedule=lambda o: PolynomialLR(o, total_iters, 1.0))


def heat_no_zero_grad(order: tuple[str, ...] = ("backward", "step")):
    """The heat surrogate with manual optimisation, SGD ``0.05`` with momentum 0.9; ``optimizer.zero_grad()``
    left out, so each step's gradient is the sum of every gradient so far."""
    return _heat_task(lambda p: SGD(p, lr=0.05, momentum=0.9), manual_order=order)


# ------------------------------------------------------------------------------------------------ healthy
def ss_regularised():
    """Secondary structure under heavy regularisation: dropout 0.5 on the inputs and the hidden layer, label
    smoothing 0.2, AdamW ``3e-3`` with ``weight_decay=0.1``; validated on the plain cross-entropy."""

    def smoothed(net: nn.Module, batch) -> Tensor:
        x, y = batch
        return F.cross_entropy(net(x), y, label_smoothing=0.2)

    net = nn.Sequential(nn.Dropout(0.5), nn.Linear(7 * 21, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 3))
    return _ss_task(lambda p: AdamW(p, lr=3e-3, weight_decay=0.1), net, loss=smoothed)


def ss_weighted_nesterov():
    """Secondary structure with class weights for the rare strand (~14% of the residues), SGD with Nesterov
    momentum 0.9 at ``0.1``; validated on the plain cross-entropy."""
    weight = torch.tensor([1.0, 2.5, 0.7])

    def weighted(net: nn.Module, batch) -> Tensor:
        x, y = batch
        return F.cross_entropy(net(x), y, weight=weight)

    return _ss_task(lambda p: SGD(p, lr=0.1, momentum=0.9, nesterov=True), loss=weighted)


def assoc_bf16_value_clip():
    """Data association, Adam ``3e-3`` (trained under ``precision="bf16-mixed"`` on the CPU with gradient
    clipping by value at 0.05)."""
    return _assoc_task(lambda p: Adam(p, lr=3e-3))


def assoc_plateau():
    """Data association, RAdam ``2e-3``: the loss sits near log 6 while the scorer learns to use the boxes
    at all, then drops."""
    return _assoc_task(lambda p: RAdam(p, lr=2e-3))


def yield_percent_radam():
    """Yields in percent on a bounded ``100 * sigmoid`` output, RAdam ``3e-3``: an MSE in the hundreds
    (percent squared) and gradients in the hundreds."""
    return _yield_task(lambda p: RAdam(p, lr=3e-3))


def yield_small_batches():
    """Yields in percent, batches of 4 reactions, Adagrad ``0.05``: a very noisy per-step loss."""
    return _yield_task(lambda p: Adagrad(p, lr=0.05), batch=4)


def grasp_weighted_accumulated():
    """Grasps with ~9% positives: BCE with ``pos_weight=9``, AdamW ``3e-3``, batches of 16 under
    ``accumulate_grad_batches=4`` (an effective batch of 64), rotation and flip augmentation."""
    return _grasp_task(lambda p: AdamW(p, lr=3e-3), batch=16, pos_weight=9.0)


def grasp_warm_restarts():
    """Grasps, SGD momentum 0.9 at ``0.05`` under CosineAnnealingWarmRestarts(T_0=50, T_mult=2): the LR
    jumps back to 0.05 at steps 50 and 150."""
    return _grasp_task(lambda p: SGD(p, lr=0.05, momentum=0.9),
                       schedule=lambda o: CosineAnnealingWarmRestarts(o, T_0=50, T_mult=2))  # fmt: skip


def heat_gaussian_nll():
    """The heat surrogate predicting a mean and a log-variance per point, trained on the Gaussian negative
    log-likelihood (below zero once the variance is small), Adam ``3e-3``."""
    return _heat_task(lambda p: Adam(p, lr=3e-3), HeatNet(heads=2), loss=gaussian_nll)


def heat_nesterov_high_lr(lr: float = 0.5):
    """The heat surrogate, SGD with Nesterov momentum 0.9 at ``0.5``: near the edge of stability."""
    return _heat_task(lambda p: SGD(p, lr=lr, momentum=0.9, nesterov=True))


def heat_manual():
    """The heat surrogate with manual optimisation in the usual order, SGD ``0.05`` with momentum 0.9."""
    return heat_no_zero_grad(order=("zero_grad", "backward", "step"))
