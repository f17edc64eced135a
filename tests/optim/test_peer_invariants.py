"""The generic optimizer invariants torch's and timm's suites check, on every optimizer and path we ship."""

from __future__ import annotations

import copy
import functools
import io
import pickle
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor
from torch.nn import Parameter

from tests.helpers.optim_runs import OPTIMIZERS, every_optimizer, every_path


def assert_state_dicts_identical(expected: dict[str, Any], got: dict[str, Any]) -> None:
    """Key for key, in order: group options and per-parameter state, tensors bitwise with dtype and device."""
    assert list(got) == list(expected)
    assert len(got["param_groups"]) == len(expected["param_groups"])
    for group_expected, group_got in zip(expected["param_groups"], got["param_groups"]):
        assert list(group_got) == list(group_expected)
        for key in group_expected:
            assert type(group_got[key]) is type(group_expected[key]), key
            assert group_got[key] == group_expected[key], key
    assert list(got["state"]) == list(expected["state"])
    for index, state_expected in expected["state"].items():
        state_got = got["state"][index]
        assert list(state_got) == list(state_expected), index
        for key, value in state_expected.items():
            if torch.is_tensor(value):
                other = state_got[key]
                assert (other.dtype, other.device, other.shape) == (value.dtype, value.device, value.shape)
                assert torch.equal(other, value), (index, key)
            else:
                assert state_got[key] == value, (index, key)


def _weight_bias(seed: int = 0) -> tuple[Parameter, Parameter, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    weight = Parameter(torch.randn(10, 5, generator=generator))
    bias = Parameter(torch.randn(10, generator=generator))
    return weight, bias, torch.randn(5, generator=generator)


def _closure(
    optimizer: torch.optim.Optimizer, weight: Tensor, bias: Tensor, x: Tensor
) -> Callable[[], Tensor]:
    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = (weight.mv(x) + bias).pow(2).sum()
        loss.backward()
        return loss

    return closure


Constructor = Callable[[Parameter, Parameter], torch.optim.Optimizer]


def _constructors(name: str, implementation: str) -> dict[str, Constructor]:
    """timm's parameter layouts: a flat list, two groups with a per-group ``lr``, one bare-tensor group."""
    cls = OPTIMIZERS[name]
    kwargs = {"implementation": implementation, "weight_decay": 0.01}
    return {
        "list": lambda w, b: cls([w, b], lr=1e-3, **kwargs),
        "groups": lambda w, b: cls([{"params": [w]}, {"params": [b], "lr": 3e-3}], lr=1e-3, **kwargs),
        "single_tensor_group": lambda w, b: cls([{"params": b, "lr": 3e-3}], lr=1e-3, **kwargs),
    }


layouts = pytest.mark.parametrize("layout", ["list", "groups", "single_tensor_group"])


# ---- state dict --------------------------------------------------------------------------------------------


@every_optimizer
@every_path
@layouts
def test_loaded_state_dict_is_deterministic_and_continues_in_lock_step(name, implementation, layout):
    """timm ``_test_state_dict``, torch ``test_state_dict_deterministic`` and ``..._with_weights_only``."""
    constructor = _constructors(name, implementation)[layout]
    weight, bias, x = _weight_bias()
    optimizer = constructor(weight, bias)
    for _ in range(20):
        optimizer.step(_closure(optimizer, weight, bias, x))
    weight_c, bias_c = Parameter(weight.detach().clone()), Parameter(bias.detach().clone())
    optimizer_c = constructor(weight_c, bias_c)
    saved, loaded = copy.deepcopy(optimizer.state_dict()), copy.deepcopy(optimizer.state_dict())
    optimizer_c.load_state_dict(loaded)
    assert_state_dicts_identical(saved, loaded)  # the caller's dict is not modified
    assert_state_dicts_identical(optimizer.state_dict(), optimizer_c.state_dict())
    assert optimizer_c.defaults == optimizer.defaults
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)
    from_disk = constructor(Parameter(weight.detach().clone()), Parameter(bias.detach().clone()))
    from_disk.load_state_dict(torch.load(buffer, weights_only=True))
    assert_state_dicts_identical(optimizer.state_dict(), from_disk.state_dict())
    for _ in range(20):
        optimizer.step(_closure(optimizer, weight, bias, x))
        optimizer_c.step(_closure(optimizer_c, weight_c, bias_c, x))
        assert torch.equal(weight, weight_c) and torch.equal(bias, bias_c)
    assert_state_dicts_identical(optimizer.state_dict(), optimizer_c.state_dict())
    optimizer_c.param_groups.extend(optimizer_c.param_groups)
    assert optimizer.state_dict()["param_groups"][-1] == optimizer_c.state_dict()["param_groups"][-1]


@every_optimizer
@every_path
@pytest.mark.parametrize("copier", ["pickle", "deepcopy"])
def test_pickle_and_deepcopy_round_trips_are_identical_and_step_alike(name, implementation, copier):
    """Pickled/deep-copied: same state dict, defaults, public attributes (torch), then bitwise-equal steps."""
    weight, bias, x = _weight_bias()
    optimizer = OPTIMIZERS[name]([{"params": [weight]}, {"params": [bias], "lr": 3e-3}], lr=1e-3,
                                 implementation=implementation)  # fmt: skip
    for _ in range(3):
        optimizer.step(_closure(optimizer, weight, bias, x))
    copied = pickle.loads(pickle.dumps(optimizer)) if copier == "pickle" else copy.deepcopy(optimizer)
    assert_state_dicts_identical(optimizer.state_dict(), copied.state_dict())
    assert copied.defaults == optimizer.defaults and list(copied.defaults) == list(optimizer.defaults)
    public = {k for k in vars(optimizer) if not k.startswith("_")}
    assert {k for k in vars(copied) if not k.startswith("_")} == public
    weight_c, bias_c = (group["params"][0] for group in copied.param_groups)
    assert weight_c is not weight and torch.equal(weight_c, weight)
    for _ in range(3):
        optimizer.step(_closure(optimizer, weight, bias, x))
        copied.step(_closure(copied, weight_c, bias_c, x))
    assert torch.equal(weight, weight_c) and torch.equal(bias, bias_c)
    assert_state_dicts_identical(optimizer.state_dict(), copied.state_dict())


@every_optimizer
@every_path
def test_add_param_group_after_load_matches_a_never_loaded_optimizer(name, implementation):
    """A group added after a load/unpickling gets exactly ``defaults`` (nothing from __setstate__)."""
    weight, bias, x = _weight_bias()
    optimizer = OPTIMIZERS[name]([weight], lr=1e-3, implementation=implementation)
    optimizer.step(_closure(optimizer, weight, bias, x))
    loaded = OPTIMIZERS[name]([Parameter(weight.detach().clone())], lr=1e-3, implementation=implementation)
    loaded.load_state_dict(optimizer.state_dict())
    unpickled = pickle.loads(pickle.dumps(optimizer))
    for other in (loaded, unpickled):
        other.add_param_group({"params": [Parameter(bias.detach().clone())], "lr": 2e-3})
    optimizer.add_param_group({"params": [bias], "lr": 2e-3})
    for other in (loaded, unpickled):
        assert_state_dicts_identical(optimizer.state_dict(), other.state_dict())
        # (a loaded group's "params" key moves last, as with torch's optimizers: compare the key sets)
        assert [set(g) for g in other.param_groups] == [set(g) for g in optimizer.param_groups]


@every_optimizer
@every_path
def test_step_is_a_noop_for_zero_gradients_without_weight_decay(name, implementation):
    """torch ``test_step_is_noop_for_zero_grads``: zero gradients, no decay: bitwise unchanged."""
    weight, bias, _ = _weight_bias()
    before = [weight.detach().clone(), bias.detach().clone()]
    optimizer = OPTIMIZERS[name]([weight, bias], lr=0.1, weight_decay=0.0, implementation=implementation)
    for _ in range(3):
        weight.grad, bias.grad = torch.zeros_like(weight), torch.zeros_like(bias)
        optimizer.step()
    assert torch.equal(weight, before[0]) and torch.equal(bias, before[1])
    assert set(optimizer.state) == {weight, bias}  # the state exists: the step ran


# ---- timm's convergence expectations -----------------------------------------------------------------------


@every_optimizer
@every_path
@layouts
@pytest.mark.parametrize("contiguous", [True, False])
def test_loss_falls_over_200_closure_steps(name, implementation, layout, contiguous):
    """timm ``_test_basic_cases_template``: 200 closure steps lower ``||W x + b||^2``, strided views too."""
    generator = torch.Generator().manual_seed(1)
    if contiguous:
        weight, bias = torch.randn(10, 5, generator=generator), torch.randn(10, generator=generator)
    else:
        weight = torch.randn(10, 5, 2, generator=generator)[..., 0]
        bias = torch.randn(10, 2, generator=generator)[..., 0]
        assert not weight.is_contiguous() and not bias.is_contiguous()
    weight, bias, x = Parameter(weight), Parameter(bias), torch.randn(5, generator=generator)
    optimizer = _constructors(name, implementation)[layout](weight, bias)
    assert type(optimizer).__name__ in repr(optimizer)
    closure = _closure(optimizer, weight, bias, x)
    initial = float(closure().detach())
    for _ in range(200):
        optimizer.step(closure)
    assert float(closure().detach()) < initial


@every_optimizer
@pytest.mark.parametrize("implementation", ["for_loop", "auto"])
def test_rosenbrock_with_alternating_coordinate_gradients_gets_closer(name, implementation):
    """timm ``_test_rosenbrock``: 2000 alternating-coordinate steps end nearer (1, 1) than (1.5, 1.5)."""
    params = Parameter(torch.tensor([1.5, 1.5]))
    optimizer = OPTIMIZERS[name]([params], lr=1e-3, weight_decay=0.0, implementation=implementation)
    solution = torch.tensor([1.0, 1.0])
    initial = float(params.detach().dist(solution))

    def closure(coordinate: int) -> Tensor:
        optimizer.zero_grad()
        x, y = params
        loss = (1 - x) ** 2 + 100 * (y - x**2) ** 2
        loss.backward()
        with torch.no_grad():
            assert params.grad is not None
            params.grad[1 - coordinate] = 0.0
        return loss

    for step in range(2000):
        optimizer.step(functools.partial(closure, step % 2))
    assert float(params.detach().dist(solution)) <= initial


@every_optimizer
def test_monotone_loss_on_timms_fixed_model(name):
    """timm ``_test_model``: the fixed 2-3-1 sigmoid network's summed output falls at each of 20 steps."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Sigmoid())
    model.extend([torch.nn.Linear(3, 1), torch.nn.Sigmoid()])
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[-0.2109, -0.4976], [-0.1413, -0.3420], [-0.2524, 0.6976]]))
        model[0].bias.copy_(torch.tensor([-0.1085, -0.2979, 0.6892]))
        model[2].weight.copy_(torch.tensor([[-0.0508, -0.3941, -0.2843]]))
        model[2].bias.copy_(torch.tensor([-0.0711]))
    x = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]).reshape(3, 2)
    optimizer = OPTIMIZERS[name](model.parameters(), lr=1e-3, weight_decay=0.0)  # timm's test_lamb settings
    previous = float("inf")
    for _ in range(20):
        optimizer.zero_grad()
        loss = model(x).sum()
        loss.backward()
        assert float(loss.detach()) < previous
        previous = float(loss.detach())
        optimizer.step()
