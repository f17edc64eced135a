"""Norm math and GradNormMonitor against the value tables of Lightning's ``tests/.../utilities/test_grads.py``
(and a float64 ``1e23`` gradient whose 2-norm must stay finite)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lightning_recipes import norms
from lightning_recipes.callbacks import GradNormMonitor
from lightning_recipes.norms import (
    distributed_total_norm,
    group_powers,
    norm_power,
    power_to_norm,
    total_norm,
    update_ratios,
)
from lightning_recipes.testing import InMemoryLogger, fast_trainer

GRAD0 = [-1.0, 2.0, -3.0]
GRAD1 = [[-4.0], [5.0]]


def _p_norm(values: list[float], p: float) -> float:
    """The formula, written out: ``(sum |x|^p) ** (1/p)``, ``max |x|`` for ``p = inf``."""
    if math.isinf(p):
        return max(abs(v) for v in values)
    return sum(abs(v) ** p for v in values) ** (1.0 / p)


NORM_TYPES = [1.0, 2.0, 3.14, math.inf]


@pytest.mark.parametrize("norm_type", NORM_TYPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_norm_functions_match_the_formula(norm_type, dtype):
    g0, g1 = torch.tensor(GRAD0, dtype=dtype), torch.tensor(GRAD1, dtype=dtype).t()  # non-contiguous
    flat0, flat1 = GRAD0, [v for row in GRAD1 for v in row]
    assert total_norm([g0], norm_type).item() == pytest.approx(_p_norm(flat0, norm_type), rel=1e-6)
    assert total_norm([g1], norm_type).item() == pytest.approx(_p_norm(flat1, norm_type), rel=1e-6)
    expected = _p_norm(flat0 + flat1, norm_type)
    got = total_norm([g0, g1], norm_type)
    # float64 inputs keep float64 (their powers may not fit a float32), the rest float32
    assert got.dtype == (torch.float64 if dtype == torch.float64 else torch.float32) and got.dim() == 0
    assert got.item() == pytest.approx(expected, rel=1e-6)
    assert distributed_total_norm([g0, g1], norm_type).item() == pytest.approx(expected, rel=1e-6)
    power = norm_power([g0, g1], norm_type)
    assert power_to_norm(power, norm_type).item() == pytest.approx(expected, rel=1e-6)
    # per group, and the update ratio ||dW|| / ||W|| of a step from W = [g0, g1] to 1.5 W: 0.5 in each group
    groups = group_powers([g0, g1], [1, 0], 2, norm_type)
    want = [_p_norm(flat1, norm_type), _p_norm(flat0, norm_type)]
    assert power_to_norm(groups, norm_type).tolist() == pytest.approx(want, rel=1e-6)
    change = group_powers([0.5 * g0, 0.5 * g1], [1, 0], 2, norm_type)
    assert update_ratios(groups, change, norm_type).tolist() == pytest.approx([0.5, 0.5], rel=1e-2)


def test_both_cpu_kernels_are_exact_and_the_choice_is_deterministic():
    big = [torch.randn(600, 300), torch.randn(300, 600).t(), torch.randn(70_000)]
    expected = float(torch.linalg.vector_norm(torch.cat([t.double().flatten() for t in big])))
    assert math.isclose(float(norms._dot_squares(big)) ** 0.5, expected, rel_tol=1e-5)
    assert math.isclose(float(norms._foreach_power(big, 2.0)) ** 0.5, expected, rel_tol=1e-5)
    first = total_norm(big)
    for _ in range(5):  # same inputs, same kernel, bitwise the same norm: clipping stays reproducible
        assert torch.equal(total_norm(big), first)
    assert torch.equal(norms.norm_power(big), norms._dot_squares(big))
    assert float(total_norm([])) == 0.0 and update_ratios(torch.zeros(1), torch.ones(1)).item() == 0.0
    assert math.isinf(float(total_norm([torch.tensor([1.0, math.inf])])))
    assert math.isnan(float(total_norm([torch.tensor([1.0, math.nan])])))


@pytest.mark.parametrize("norm_type", NORM_TYPES)
@pytest.mark.parametrize("numel", [1, 1 << 17])  # the foreach and the BLAS-dot paths
def test_float64_gradient_of_1e23_has_a_finite_norm(norm_type, numel):
    grad = torch.full((numel,), 1e23, dtype=torch.float64)
    expected = 1e23 if math.isinf(norm_type) else 1e23 * numel ** (1.0 / norm_type)
    power = norm_power([grad], norm_type)
    assert power.dtype == torch.float64
    assert total_norm([grad], norm_type).item() == pytest.approx(expected, rel=1e-9)
    distributed = distributed_total_norm([grad, torch.ones(2)], norm_type)
    assert distributed.item() == pytest.approx(expected, rel=1e-9)


def _fixed_gradient_module(grads: dict[str, torch.Tensor], dtype: torch.dtype):
    """Lightning's ``test_grad_norm`` model: the loss gives its parameters exactly the table's gradients."""
    import lightning.pytorch as pl

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            shapes = {"param0": (3,), "param1": (2, 1), "param2": (1,)}  # param2: no gradient
            self.inner = nn.ParameterDict({name: torch.rand(s, dtype=dtype) for name, s in shapes.items()})

        def training_step(self, batch, batch_idx):
            return sum((self.inner[name] * grad.to(dtype)).sum() for name, grad in grads.items())

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

        def train_dataloader(self):
            return torch.utils.data.DataLoader(torch.zeros(4, 1), batch_size=1)

    return Module()


@pytest.mark.parametrize("norm_type", NORM_TYPES)
def test_grad_norm_monitor_matches_lightnings_grad_norm_table(norm_type, tmp_path):
    grads = {"param0": torch.tensor(GRAD0), "param1": torch.tensor(GRAD1)}
    logger = InMemoryLogger()
    monitor = GradNormMonitor(norm_type=norm_type, group_by={r"param0": "param0", r"param1": "param1"})
    settings = {"logger": logger, "log_every_n_steps": 1, "default_root_dir": tmp_path}
    trainer = fast_trainer(max_steps=2, callbacks=[monitor], **settings)
    trainer.fit(_fixed_gradient_module(grads, torch.float32))
    flat1 = [v for row in GRAD1 for v in row]
    assert logger.last("grad_norm/param0") == pytest.approx(_p_norm(GRAD0, norm_type), rel=1e-6)
    assert logger.last("grad_norm/param1") == pytest.approx(_p_norm(flat1, norm_type), rel=1e-6)
    assert logger.last("grad_norm/total") == pytest.approx(_p_norm(GRAD0 + flat1, norm_type), rel=1e-6)
    assert logger.last("grad_norm/other") == 0  # param2 (in the optimizer, no gradient) contributes nothing


@pytest.mark.parametrize("norm_type", NORM_TYPES)
def test_grad_norm_monitor_logs_a_float64_gradient_of_1e23(norm_type, tmp_path):
    logger = InMemoryLogger()
    monitor = GradNormMonitor(norm_type=norm_type)
    settings = {"log_every_n_steps": 1, "default_root_dir": tmp_path, "precision": "64-true"}
    trainer = fast_trainer(max_steps=2, logger=logger, callbacks=[monitor], **settings)
    trainer.fit(_fixed_gradient_module({"param2": torch.tensor([1e23], dtype=torch.float64)}, torch.float64))
    # Lightning's `log` stores Python floats as float32 tensors: 1e23 arrives as 9.9999998e22
    assert logger.last("grad_norm/total") == pytest.approx(1e23, rel=1e-6)
    assert logger.last("grad_norm/total_max") == pytest.approx(1e23, rel=1e-6)
    assert logger.last("grad_norm/nonfinite_steps") == 0
