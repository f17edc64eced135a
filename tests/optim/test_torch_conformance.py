"""Lion and Lamb keep torch's generic optimizer contract, on every implementation path."""

from __future__ import annotations

import copy
import inspect
import math
import pickle

import pytest
import torch

from lightning_recipes._deprecation import LightningRecipesDeprecationWarning
from lightning_recipes.optim import Lamb
from lightning_recipes.optim._common import resolve_device_implementation
from tests.helpers.optim_runs import OPTIMIZERS, every_path
from tests.helpers.optim_runs import every_optimizer as both
from tests.optim._reference import lamb_reference_step, lion_reference_step

KWARGS = {"lion": {"lr": 0.01, "weight_decay": 0.1}, "lamb": {"lr": 0.01, "weight_decay": 0.1}}


def _model(dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3)).to(dtype)


def _batch(step: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(6, 5, generator=torch.Generator().manual_seed(100 + step), dtype=dtype)


def _train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, steps: range) -> None:
    dtype = next(model.parameters()).dtype
    for step in steps:
        optimizer.zero_grad()
        model(_batch(step, dtype)).pow(2).mean().backward()
        optimizer.step()


def _make(name: str, params, implementation: str, **overrides):
    return OPTIMIZERS[name](params, **{**KWARGS[name], **overrides}, implementation=implementation)


# ---- state dict --------------------------------------------------------------------------------------------


@both
@pytest.mark.parametrize("target", [torch.float64, torch.bfloat16])
def test_loaded_state_is_cast_like_torch_optimizers_do(name, target):
    """Moments take the parameter's dtype, the step stays float32 (torch's rule; AdamW the oracle)."""
    saved = {}
    for cls in (OPTIMIZERS[name], torch.optim.AdamW):
        model = _model()
        optimizer = cls(model.parameters(), lr=0.01)
        _train(model, optimizer, range(2))
        saved[cls] = optimizer.state_dict()
    for cls in (OPTIMIZERS[name], torch.optim.AdamW):
        model = _model(target)
        optimizer = cls(model.parameters(), lr=0.01)
        optimizer.load_state_dict(saved[cls])
        for param in model.parameters():
            state = optimizer.state[param]
            assert state["exp_avg"].dtype == target
            if "step" in state:
                assert state["step"].dtype == torch.float32
        _train(model, optimizer, range(2, 3))
        for param in model.parameters():
            assert param.dtype == target and torch.isfinite(param).all()
            if "step" in optimizer.state[param]:
                assert float(optimizer.state[param]["step"]) == 3.0


@pytest.mark.parametrize("numeric", [3, 3.0])
def test_numeric_step_counters_load_like_torch(numeric):
    """Older optimizers saved ``step`` as a python number; torch's accept it, so Lamb must (item 7)."""
    results = {}
    for form in ("tensor", "number"):
        model = _model()
        optimizer = Lamb(model.parameters(), lr=0.01)
        _train(model, optimizer, range(3))
        state = copy.deepcopy(optimizer.state_dict())
        if form == "number":
            for param_state in state["state"].values():
                param_state["step"] = numeric
        fresh = Lamb(model.parameters(), lr=0.01)
        fresh.load_state_dict(state)
        steps = [s["step"] for s in fresh.state.values()]
        assert all(torch.is_tensor(step) and step.dtype == torch.float32 for step in steps)
        _train(model, fresh, range(3, 5))
        results[form] = [p.detach().clone() for p in model.parameters()]
    for a, b in zip(results["tensor"], results["number"]):
        assert torch.equal(a, b)
    adamw = torch.optim.AdamW(_model().parameters())  # the oracle accepts numbers as well
    moments = {"exp_avg": torch.zeros(4, 5), "exp_avg_sq": torch.zeros(4, 5)}
    groups = adamw.state_dict()["param_groups"]
    oracle_state = {"state": {0: {"step": numeric, **moments}}, "param_groups": groups}
    adamw.load_state_dict(oracle_state)


@both
def test_state_dicts_missing_a_newer_group_option_load_and_step(name):
    """``__setstate__`` back-fills group options added after a checkpoint was written (issue 13)."""
    model = _model()
    optimizer = _make(name, model.parameters(), "for_loop")
    _train(model, optimizer, range(2))
    state = copy.deepcopy(optimizer.state_dict())
    newer = ["implementation"] + (["trust_clip", "layer_adaptation"] if name == "lamb" else [])
    for group in state["param_groups"]:
        for key in newer:
            del group[key]
    fresh = _make(name, model.parameters(), "for_loop")
    fresh.load_state_dict(state)
    _train(model, fresh, range(2, 3))
    assert fresh.param_groups[0]["implementation"] == "for_loop"

    pickled = _make(name, model.parameters(), "for_loop")
    for key in newer:  # an optimizer pickled by a version without these options
        del pickled.defaults[key]
        for group in pickled.param_groups:
            del group[key]
    restored = pickle.loads(pickle.dumps(pickled))
    assert all(key in restored.defaults and key in restored.param_groups[0] for key in newer)
    _train(model, restored, range(3, 4))


@both
def test_backfilled_defaults_match_the_constructor(name):
    signature = inspect.signature(OPTIMIZERS[name])
    defaults = OPTIMIZERS[name]._group_defaults
    expected = {k: p.default for k, p in signature.parameters.items() if k not in ("params", "lr")}
    assert defaults == expected


# ---- step protocol -----------------------------------------------------------------------------------------


@both
@every_path
def test_closure_is_called_once_with_grad_enabled_and_its_loss_returned(name, implementation):
    model = _model()
    optimizer = _make(name, model.parameters(), implementation)
    calls = []

    def closure():
        calls.append(torch.is_grad_enabled())
        optimizer.zero_grad()
        loss = model(_batch(0)).pow(2).mean()
        loss.backward()
        return loss

    loss = optimizer.step(closure)
    assert calls == [True]
    assert torch.is_tensor(loss) and loss.requires_grad


@both
def test_step_and_state_dict_hooks_fire_as_for_torch_optimizers(name):
    counts: dict[type, list[str]] = {}
    for cls in (OPTIMIZERS[name], torch.optim.AdamW):
        model = _model()
        optimizer = cls(model.parameters(), lr=0.01)
        _register_hooks(optimizer, counts.setdefault(cls, []))
        _train(model, optimizer, range(1))
        optimizer.load_state_dict(optimizer.state_dict())
    assert counts[OPTIMIZERS[name]] == counts[torch.optim.AdamW] == HOOKS


HOOKS = [f"{kind}_{when}" for kind in ("step", "state_dict", "load_state_dict") for when in ("pre", "post")]


def _register_hooks(optimizer: torch.optim.Optimizer, seen: list[str]) -> None:
    for kind in HOOKS:
        getattr(optimizer, f"register_{kind}_hook")(lambda *a, kind=kind: seen.append(kind))


@both
def test_add_param_group_fills_defaults_and_refuses_duplicates_and_bad_options(name):
    first, second = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(3))
    optimizer = OPTIMIZERS[name]([first], lr=0.02)
    optimizer.add_param_group({"params": [second], "weight_decay": 0.5})
    group = optimizer.param_groups[1]
    assert group.keys() == optimizer.param_groups[0].keys()
    assert group["lr"] == 0.02 and group["weight_decay"] == 0.5
    with pytest.raises(ValueError, match="more than one parameter group"):
        optimizer.add_param_group({"params": [first]})
    with pytest.raises(ValueError, match="`lr`"):
        optimizer.add_param_group({"params": [torch.nn.Parameter(torch.ones(1))], "lr": -1})
    assert len(optimizer.param_groups) == 2  # the refused group was not added


@both
@every_path
def test_params_without_grad_are_skipped_and_empty_params_step(name, implementation):
    used, unused = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3))
    empty, empty_2d = torch.nn.Parameter(torch.ones(0)), torch.nn.Parameter(torch.ones(0, 4))
    optimizer = _make(name, [used, unused, empty, empty_2d], implementation)
    ((used * 2).sum() + empty.sum() + empty_2d.sum()).backward()
    optimizer.step()
    assert not torch.equal(used, torch.ones(3))
    assert torch.equal(unused, torch.ones(3)) and unused not in optimizer.state  # as torch.optim.AdamW
    assert empty.shape == (0,) and empty_2d.shape == (0, 4)


@both
def test_maximize_is_refused_clearly(name):
    """Neither optimizer implements ``maximize`` (torch's AdamW does): refused at construction."""
    with pytest.raises(TypeError, match="maximize"):
        OPTIMIZERS[name]([torch.nn.Parameter(torch.ones(2))], maximize=True)


# ---- complex and sparse ------------------------------------------------------------------------------------


@both
@every_path
def test_complex_parameters_step_as_their_real_views(name, implementation):
    """Complex parameters step on ``view_as_real`` views (as torch's optimizers): norms are complex norms."""
    generator = torch.Generator().manual_seed(3)
    start = torch.randn(4, 3, dtype=torch.complex128, generator=generator)
    param = torch.nn.Parameter(start.clone())
    optimizer = _make(name, [param], implementation)
    real = torch.view_as_real(start).clone()
    m, v = torch.zeros_like(real), torch.zeros_like(real)
    for step in range(1, 4):
        grad = torch.randn(4, 3, dtype=torch.complex128, generator=generator)
        param.grad = grad
        optimizer.step()
        g = torch.view_as_real(grad)
        if name == "lion":
            real, m = lion_reference_step(real, g, m, lr=0.01, beta1=0.9, beta2=0.99, wd=0.1)
        else:
            real, m, v = lamb_reference_step(real, g, m, v, step, lr=0.01, beta1=0.9, beta2=0.999, eps=1e-6,
                                             wd=0.1)  # fmt: skip
    assert param.dtype == torch.complex128
    torch.testing.assert_close(torch.view_as_real(param.detach()), real, rtol=0, atol=1e-12)
    torch.testing.assert_close(torch.view_as_real(optimizer.state[param]["exp_avg"]), m, rtol=0, atol=1e-12)


@both
def test_sparse_gradients_raise_naming_the_parameter_before_anything_changes(name):
    dense = torch.nn.Linear(3, 3)
    embedding = torch.nn.Embedding(10, 3, sparse=True)
    optimizer = OPTIMIZERS[name]([{"params": dense.parameters()}, {"params": embedding.parameters()}], lr=0.1)
    before = [p.detach().clone() for p in (*dense.parameters(), *embedding.parameters())]
    (dense(torch.ones(1, 3)).sum() + embedding(torch.tensor([1, 2])).sum()).backward()
    named = r"sparse gradients.*param_groups\[1\]\['params'\]\[0\] \(shape \(10, 3\)\)"
    with pytest.raises(RuntimeError, match=named):
        optimizer.step()
    after = [p.detach() for p in (*dense.parameters(), *embedding.parameters())]
    assert all(torch.equal(a, b) for a, b in zip(before, after))
    assert len(optimizer.state) == 0
    with pytest.raises(RuntimeError, match="sparse gradients"):  # the oracle refuses them too
        torch.optim.AdamW(embedding.parameters()).step()


# ---- deliberate differences from peers ---------------------------------------------------------------------


def test_lamb_has_no_built_in_gradient_clipping():
    """Unlike timm's (``max_grad_norm=1.0``): no clipping, ``m = (1 - beta1) g`` for |g| = 100."""
    param = torch.nn.Parameter(torch.ones(4))
    optimizer = Lamb([param], lr=0.01, implementation="for_loop")
    param.grad = torch.full((4,), 50.0)  # norm 100
    optimizer.step()
    torch.testing.assert_close(optimizer.state[param]["exp_avg"], torch.full((4,), 5.0))


def test_lamb_always_bias_corrects():
    """Bias correction always on (timm, NVLAMB): the first step's direction is ``g / (|g| + eps)``."""
    param = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))  # ||p|| = 0: trust ratio 1
    optimizer = Lamb([param], lr=1.0, eps=1e-6, weight_decay=0.0, implementation="for_loop")
    param.grad = torch.tensor([0.5, -2.0, 1e-3], dtype=torch.float64)
    optimizer.step()
    expected = -param.grad / (param.grad.abs() + 1e-6)
    torch.testing.assert_close(param.detach(), expected, rtol=0, atol=1e-12)


# ---- argument validation -----------------------------------------------------------------------------------

_INVALID = [
    ("lr", True), ("lr", math.inf), ("lr", math.nan), ("lr", "0.1"), ("lr", 0), ("lr", -1),
    ("betas", (0.9,)), ("betas", (0.9, 0.99, 0.9)), ("betas", (True, 0.9)), ("betas", [0.9, 1.0]),
    ("betas", None),
    ("weight_decay", math.inf), ("weight_decay", True), ("weight_decay", -0.1), ("weight_decay", None),
    ("implementation", "AUTO"), ("implementation", None), ("implementation", "compiled_split"),
]  # fmt: skip
_INVALID_LAMB = [
    ("eps", 0), ("eps", -1e-8), ("eps", True), ("eps", math.inf),
    ("trust_clip", 0), ("trust_clip", True), ("trust_clip", math.inf), ("trust_clip", -1.0),
    ("layer_adaptation", 1), ("layer_adaptation", None), ("layer_adaptation", "yes"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "argument", "value"),
    [("lion", a, v) for a, v in _INVALID] + [("lamb", a, v) for a, v in _INVALID + _INVALID_LAMB],
)
def test_every_invalid_constructor_argument_is_refused_naming_it(name, argument, value):
    """``implementation="compiled_split"`` is an internal route, not a user option."""
    with pytest.raises(ValueError, match=f"`{argument}"):
        OPTIMIZERS[name]([torch.nn.Parameter(torch.zeros(2))], **{argument: value})


@both
def test_the_removed_compiled_implementation_warns_and_runs_as_auto(name):
    """``implementation="compiled"`` (removed, benchmarks/RESULTS.md) warns and runs the ``auto`` route."""
    param = torch.nn.Parameter(torch.ones(3))
    with pytest.warns(LightningRecipesDeprecationWarning, match="compiled"):
        optimizer = _make(name, [param], "compiled")
    param.grad = torch.ones(3)
    with pytest.warns(LightningRecipesDeprecationWarning):
        optimizer.step()
    assert optimizer.implementation_used == resolve_device_implementation("auto", torch.device("cpu"))
