"""The field gallery's problem runs of the optimisation itself (learning rate, dead, vanishing, saturated and
exploding units), each with a proof from a plain recording that the problem is real."""

from __future__ import annotations

import statistics
from typing import Any

import torch
from torch import nn

from galleries.health.field._case import FieldCase, PlainRecorder
from galleries.health.field._field_data import (
    LengthCurriculum,
    blob_images,
    loader,
    sequence_data,
    teacher_data,
)
from galleries.health.field._field_models import (
    FieldModule,
    FReluCNN,
    FReluMLP,
    GatedStack,
    GeluMLP,
    Highway,
    SeqNet,
    SigmoidCNN,
    kill_units,
)
from galleries.health.field._field_proofs import (
    mean,
    median_max_update_ratio,
    share,
    stuck_high,
    update_ratios_of,
    zero_rows_of,
)

SGD, Adam, AdamW, RMSprop = torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW, torch.optim.RMSprop


# ---- lr_too_high -------------------------------------------------------------------------------------------


def _gelu_mlp_adam_half() -> Any:
    model = FieldModule(GeluMLP(16, 64, 4, depth=3), lambda p: Adam(p, lr=0.5))
    return model, loader(teacher_data(4096), 32), None


def _proof_lr_too_high(recorder: PlainRecorder) -> None:
    stuck_high(recorder, 0.9)
    ratio = median_max_update_ratio(recorder)
    assert ratio > 0.05, f"median largest update ratio {ratio:.4f}"


def _gru_sgd_momentum_far_too_high() -> Any:
    net = SeqNet("gru", 4, 32, 4)
    model = FieldModule(net, lambda p: SGD(p, lr=20.0, momentum=0.9))
    return model, loader(sequence_data(4096), 32), None


def _frelu_mlp_lr_kills_units() -> Any:
    model = FieldModule(FReluMLP(16, 64, 4, depth=2), lambda p: SGD(p, lr=4.0))
    return model, loader(teacher_data(4096), 32), None


def _proof_lr_kills_units(recorder: PlainRecorder) -> None:
    _proof_lr_too_high(recorder)
    early = max(max(r.values()) for r in recorder.update_ratios[:5])
    assert early > 0.1, f"the first steps' largest update ratio {early:.4f}"
    dead = zero_rows_of(recorder, "net.hidden.1.weight")[20:]
    assert share([d >= 0.6 for d in dead]) >= 0.8, f"dead rows of hidden.1 after step 20: {dead[::20]}"


# ---- lr_too_low --------------------------------------------------------------------------------------------


def _highway_adamw_1e6() -> Any:
    model = FieldModule(Highway(16, 32, 4, depth=4), lambda p: AdamW(p, lr=1e-6, weight_decay=0.01))
    return model, loader(teacher_data(4096), 32), None


def _proof_lr_too_low_from_start(recorder: PlainRecorder) -> None:
    first, last = mean(recorder.losses[:40]), mean(recorder.losses[-40:])
    assert last > 0.98 * first, f"the loss went from {first:.4f} to {last:.4f}"
    ratio = median_max_update_ratio(recorder)
    assert ratio < 1e-4, f"median largest update ratio {ratio:.2e}"


COLLAPSE_STEPLR, COLLAPSE_LAMBDA = 80, 120


def _frelu_mlp_steplr_collapse() -> Any:
    model = FieldModule(
        FReluMLP(16, 64, 4, depth=2),
        lambda p: SGD(p, lr=0.01, momentum=0.9, weight_decay=5e-4),
        lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=COLLAPSE_STEPLR, gamma=1e-6),
    )
    return model, loader(teacher_data(8192), 32), None


def _gru_rmsprop_lambda_collapse() -> Any:
    model = FieldModule(
        SeqNet("gru", 4, 32, 4),
        lambda p: RMSprop(p, lr=3e-3),
        lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0 if s < COLLAPSE_LAMBDA else 1e-6),
    )
    return model, loader(sequence_data(8192), 32), None


def _proof_collapse(onset: int) -> Any:
    def proof(recorder: PlainRecorder) -> None:
        lrs = [g[0] for g in recorder.lrs]
        assert lrs[onset] <= 1e-6 * lrs[onset - 1] * 1.0001 and lrs[onset - 1] == lrs[0], lrs[
            onset - 2 : onset + 2
        ]
        earlier, late = (
            mean(recorder.losses[onset - 60 : onset - 30]),
            mean(recorder.losses[onset - 30 : onset]),
        )
        assert late < 0.95 * earlier, (
            f"the loss was not falling before the collapse: {earlier:.3f} -> {late:.3f}"
        )
        moving, frozen = (
            median_max_update_ratio(recorder, onset - 30, onset),
            median_max_update_ratio(recorder, onset),
        )
        assert moving > 1e-3 and frozen < 1e-5, (
            f"update ratios before/after the collapse {moving:.1e} / {frozen:.1e}"
        )

    return proof


# ---- dead_units --------------------------------------------------------------------------------------------


def _frelu_mlp_negative_bias() -> Any:
    net = FReluMLP(16, 64, 4, depth=2)
    kill_units(net.hidden[1], 0.75)
    model = FieldModule(net, lambda p: AdamW(p, lr=3e-3, weight_decay=0.01))
    return model, loader(teacher_data(4096), 32), None


def _proof_dead(name: str) -> Any:
    def proof(recorder: PlainRecorder) -> None:
        dead = zero_rows_of(recorder, name)
        assert share([d >= 0.6 for d in dead]) >= 0.9, f"rows of {name} with a zero gradient: {dead[::20]}"

    return proof


def _frelu_cnn_dead_channels() -> Any:
    net = FReluCNN(16, 4)
    kill_units(net.conv2, 0.75)
    model = FieldModule(net, lambda p: SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-4))
    return model, loader(blob_images(2048), 32), None


# ---- vanishing_gradients -----------------------------------------------------------------------------------


def _deep_sigmoid_cnn() -> Any:
    model = FieldModule(SigmoidCNN(8, 4, depth=10), lambda p: SGD(p, lr=0.05, momentum=0.9))
    return model, loader(blob_images(2048), 32), None


def _proof_vanishing(first: str, last: str) -> Any:
    def proof(recorder: PlainRecorder) -> None:
        low, high = update_ratios_of(recorder, first), update_ratios_of(recorder, last)
        ratio = statistics.median(a / b for a, b in zip(low, high) if b > 0)
        assert ratio < 1e-3, f"median update ratio of {first} / {last}: {ratio:.2e}"
        stuck_high(recorder, 0.9, width=20)

    return proof


def _deep_gated_stack() -> Any:
    model = FieldModule(GatedStack(16, 32, 4, depth=16), lambda p: SGD(p, lr=0.1))
    return model, loader(teacher_data(4096), 32), None


# ---- saturated_activations ---------------------------------------------------------------------------------

_SATURATED_MODELS: list[nn.Module] = []


def _sigmoid_cnn_big_init() -> Any:
    net = SigmoidCNN(8, 4, depth=2, init_std=10.0)
    _SATURATED_MODELS[:] = [net]
    model = FieldModule(net, lambda p: SGD(p, lr=0.05, momentum=0.9))
    return model, loader(blob_images(2048), 32), None


def _proof_saturated(recorder: PlainRecorder) -> None:
    net = _SATURATED_MODELS[0]
    outputs: list[torch.Tensor] = []
    hooks = [
        m.register_forward_hook(lambda m, i, o: outputs.append(o))
        for m in net.modules()
        if isinstance(m, nn.Sigmoid)
    ]
    with torch.no_grad():
        net(blob_images(256, seed=99).tensors[0])
    for h in hooks:
        h.remove()
    for out in outputs:
        saturated = float(((out - 0.5).abs() > 0.49).float().mean())
        assert saturated > 0.7, f"saturated share of a sigmoid's outputs: {saturated:.2f}"
    conv = statistics.median(update_ratios_of(recorder, "net.features.0.weight"))
    head = statistics.median(update_ratios_of(recorder, "net.head.weight"))
    assert conv < 1e-2 * head, f"median update ratios: first conv {conv:.1e}, head {head:.1e}"


# ---- exploding_gradients -----------------------------------------------------------------------------------

LENGTH_JUMP = 150


def _relu_rnn_length_jump() -> Any:
    net = SeqNet("rnn", 4, 32, 4, nonlinearity="relu")
    with torch.no_grad():
        nn.init.orthogonal_(net.rnn.weight_hh_l0, gain=2.0)
    model = FieldModule(net, lambda p: Adam(p, lr=1e-4))
    data = LengthCurriculum(240 * 16, LENGTH_JUMP * 16, short=6, long=40)
    return model, loader(data, 16, shuffle=False), None


def _proof_exploding(recorder: PlainRecorder) -> None:
    norms = recorder.grad_norms
    before = statistics.median(norms[LENGTH_JUMP - 50 : LENGTH_JUMP])
    after = statistics.median(norms[LENGTH_JUMP:])
    assert after > 100 * before, (
        f"median gradient norm {before:.3g} before step {LENGTH_JUMP}, {after:.3g} after"
    )
    assert max(norms[:LENGTH_JUMP]) < 20 * before


OPTIM_CASES = [
    FieldCase(
        "gelu_mlp_adam_lr_half",
        _gelu_mlp_adam_half,
        "lr_too_high",
        0,
        _proof_lr_too_high,
        also_allowed=("dead_units",),
        max_steps=200,
        description="A GELU MLP with Adam at lr 0.5: huge updates, the loss stays near chance.",
    ),
    FieldCase(
        "gru_sgd_momentum_lr_20",
        _gru_sgd_momentum_far_too_high,
        "lr_too_high",
        0,
        _proof_lr_too_high,
        max_steps=200,
        description="A GRU classifier with SGD + momentum 0.9 at lr 20: the loss never falls.",
    ),
    FieldCase(
        "frelu_mlp_sgd_lr_kills_units",
        _frelu_mlp_lr_kills_units,
        "lr_too_high",
        0,
        _proof_lr_kills_units,
        also_allowed=("dead_units",),
        max_steps=200,
        description="An F.relu MLP with SGD at lr 4: the first huge steps kill most hidden units.",
    ),
    FieldCase(
        "highway_adamw_lr_1e6",
        _highway_adamw_1e6,
        "lr_too_low",
        0,
        _proof_lr_too_low_from_start,
        max_steps=200,
        description="A highway net with AdamW at lr 1e-6: updates ~1e-6 of the weights, the loss stays.",
    ),
    FieldCase(
        "frelu_mlp_steplr_collapse",
        _frelu_mlp_steplr_collapse,
        "lr_too_low",
        COLLAPSE_STEPLR,
        _proof_collapse(COLLAPSE_STEPLR),
        max_steps=260,
        description="SGD + momentum + weight decay learning well until StepLR(gamma=1e-6) collapses the LR.",
    ),
    FieldCase(
        "gru_rmsprop_lambdalr_collapse",
        _gru_rmsprop_lambda_collapse,
        "lr_too_low",
        COLLAPSE_LAMBDA,
        _proof_collapse(COLLAPSE_LAMBDA),
        max_steps=280,
        description="A GRU with RMSprop learning until a LambdaLR multiplies the LR by 1e-6 at step 120.",
    ),
    FieldCase(
        "frelu_mlp_negative_bias_dead",
        _frelu_mlp_negative_bias,
        "dead_units",
        0,
        _proof_dead("net.hidden.1.weight"),
        max_steps=200,
        description="75% of an F.relu layer's units have bias -20 and never fire (AdamW).",
    ),
    FieldCase(
        "frelu_cnn_dead_channels",
        _frelu_cnn_dead_channels,
        "dead_units",
        0,
        _proof_dead("net.conv2.weight"),
        max_steps=160,
        description="75% of an F.relu CNN's second-layer channels never fire (SGD + momentum + wd).",
    ),
    FieldCase(
        "deep_sigmoid_cnn_vanishing",
        _deep_sigmoid_cnn,
        "vanishing_gradients",
        0,
        _proof_vanishing("net.features.0.weight", "net.head.weight"),
        max_steps=160,
        description="Ten 3x3 conv + sigmoid layers, no normalisation: the first layers get no gradient.",
    ),
    FieldCase(
        "deep_gated_stack_vanishing",
        _deep_gated_stack,
        "vanishing_gradients",
        0,
        _proof_vanishing("net.stem.weight", "net.head.weight"),
        max_steps=200,
        description="Sixteen sigmoid-gated tanh units without a carry path or normalisation (plain SGD).",
    ),
    FieldCase(
        "sigmoid_cnn_big_init_saturated",
        _sigmoid_cnn_big_init,
        "saturated_activations",
        0,
        _proof_saturated,
        max_steps=160,
        description="A sigmoid CNN initialised with std 10: most sigmoid outputs sit at 0 or 1, the "
        "convolutions barely learn.",
    ),
    FieldCase(
        "relu_rnn_length_jump_exploding",
        _relu_rnn_length_jump,
        "exploding_gradients",
        LENGTH_JUMP,
        _proof_exploding,
        max_steps=240,
        description="A ReLU RNN with recurrent gain 2: fine on 6-step sequences, exploding on 40-step ones.",
    ),
]
