"""GradNormMonitor: values against independent references, every strategy we can run here, zero syncs."""

from __future__ import annotations

import math
import pickle
import subprocess
import sys
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.plugins import MixedPrecision
from lightning.pytorch.strategies import DeepSpeedStrategy
from lightning.pytorch.utilities import grad_norm
from torch.nn import functional as F
from torch.utils.data import DistributedSampler

from lightning_recipes.callbacks import AdaptiveGradClip, GradNormMonitor, InputPipelineMonitor
from lightning_recipes.strategies import deepspeed_available
from lightning_recipes.testing import (
    HostSyncCounter,
    InMemoryLogger,
    TinyClassifier,
    TinyTransformerLM,
    fast_trainer,
    random_classification_loader,
    random_token_loader,
)
from tests.callbacks._shared import AppliedGradient

SCRIPTS = Path(__file__).parent / "scripts"
LR = 0.1


class GradRecorder(Callback):
    """Copies of every gradient at ``on_before_optimizer_step`` (placed after the monitor)."""

    def __init__(self) -> None:
        self.steps: list[dict[str, torch.Tensor]] = []
        self.params: list[dict[str, torch.Tensor]] = []
        self.params_after: list[dict[str, torch.Tensor]] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        grads = {n: p.grad.detach().clone() for n, p in pl_module.named_parameters() if p.grad is not None}
        self.steps.append(grads)
        self.params.append({n: p.detach().clone() for n, p in pl_module.named_parameters()})

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.params_after.append({n: p.detach().clone() for n, p in pl_module.named_parameters()})


class SyncLedger(Callback):
    """Host syncs per training batch, from one ``on_train_batch_start`` to the next (with its log flush)."""

    def __init__(self, counter: HostSyncCounter) -> None:
        self.counter = counter
        self.per_batch: list[int] = []
        self._mark: int | None = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._close()
        self._mark = self.counter.count

    def on_train_end(self, trainer, pl_module):
        self._close()

    def _close(self) -> None:
        if self._mark is not None:
            self.per_batch.append(self.counter.count - self._mark)


class SGDTransformerLM(TinyTransformerLM):
    """``torch.optim.AdamW`` on CPU reads its step counter with ``.item()`` (a host tensor: no sync on a GPU,
    but the CPU counter cannot tell); SGD reads nothing, so the bare Trainer's count is a clean zero."""

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=LR)


class LightningGradNormRecipe(SGDTransformerLM):
    """Lightning's documented replacement for ``track_grad_norm``: ``log_dict(grad_norm(...))`` every step."""

    def on_before_optimizer_step(self, optimizer):
        self.log_dict(grad_norm(self, norm_type=2))


class TwoOptimizers(TinyClassifier):
    """Manual optimization with one optimizer per layer."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        for opt in self.optimizers():
            opt.zero_grad()
        self.manual_backward(loss)
        for opt in self.optimizers():
            opt.step()
        return loss

    def configure_optimizers(self):
        return tuple(torch.optim.SGD(layer.parameters(), lr=LR) for layer in (self.hidden, self.head))


def _norm(tensors, p: float = 2.0) -> float:
    return float(torch.linalg.vector_norm(torch.cat([t.double().flatten() for t in tensors]), p))


def _fit(tmp_path, model, loader, callbacks, **trainer_kwargs) -> tuple[pl.Trainer, InMemoryLogger]:
    """A fit logging to an in-memory logger (every step unless told otherwise): the Trainer and the logger."""
    logger = InMemoryLogger()
    kwargs = {"log_every_n_steps": 1, "logger": logger, "default_root_dir": tmp_path, **trainer_kwargs}
    trainer = fast_trainer(callbacks=callbacks, **kwargs)
    trainer.fit(model, loader)
    return trainer, logger


@pytest.mark.parametrize(
    ("accumulate", "precision", "plugins"),
    [
        (1, "32-true", None),
        (3, "32-true", None),
        (2, "bf16-mixed", None),
        # Trainer(precision="16-mixed") on CPU silently becomes bf16; the explicit plugin keeps fp16 +
        # GradScaler.
        (2, None, "fp16-scaler"),
    ],
)
def test_logged_norm_is_the_norm_of_the_applied_gradient(tmp_path, accumulate, precision, plugins):
    # every step logged and compared: also no stale value (Lightning re-sends a value logged once)
    applied = AppliedGradient(LR)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    fp16 = {"plugins": [MixedPrecision("16-mixed", "cpu", scaler=scaler)]}
    extra = fp16 if plugins else {"precision": precision}
    loader = random_classification_loader(num_samples=32 * 4 * accumulate, batch_size=32)
    _, logger = _fit(tmp_path, TinyClassifier(lr=LR), loader, [GradNormMonitor(), applied], max_steps=4,
                     accumulate_grad_batches=accumulate, **extra)  # fmt: skip
    logged = logger.values("grad_norm/total")
    assert len(logged) == 4 == len(applied.norms)
    assert min(applied.norms) > 0
    # fp16: a scaled (x1024) or an unaccumulated gradient would be far off
    np.testing.assert_allclose(logged, applied.norms, rtol=2e-3)
    assert [s for s, _ in logger.history("grad_norm/total")] == [0, 1, 2, 3]


def test_interval_statistics_and_groups_against_recorded_gradients(tmp_path):
    recorder = GradRecorder()
    groups = {r"^blocks\.0\.": "first_block", r"^blocks\.": "later_blocks", r"embedding": "embeddings"}
    monitor = GradNormMonitor(group_by=groups, log_param_norm=True, log_update_ratio=True)
    model = TinyTransformerLM(d_model=32, n_layers=2)
    loader = random_token_loader(num_samples=48, batch_size=8)
    _, logger = _fit(tmp_path, model, loader, [monitor, recorder], max_steps=6, log_every_n_steps=3)
    assert [s for s, _ in logger.history("grad_norm/total")] == [2, 5]
    totals = [_norm(step.values()) for step in recorder.steps]
    np.testing.assert_allclose(logger.values("grad_norm/total"), [totals[2], totals[5]], rtol=1e-5)
    for key, statistic in (("total_mean", np.mean), ("total_max", max)):
        expected = [statistic(totals[:3]), statistic(totals[3:])]
        np.testing.assert_allclose(logger.values(f"grad_norm/{key}"), expected, rtol=1e-5)
    assert logger.values("grad_norm/nonfinite_steps") == [0.0, 0.0]

    def group_of(name: str) -> str:
        if name.startswith("blocks.0."):
            return "first_block"
        if name.startswith("blocks."):
            return "later_blocks"
        return "embeddings" if "embedding" in name else "other"

    for group in ("first_block", "later_blocks", "embeddings", "other"):
        for logged_at, step in ((0, 2), (1, 5)):
            grads = [g for n, g in recorder.steps[step].items() if group_of(n) == group]
            params = [p for n, p in recorder.params[step].items() if group_of(n) == group]
            after = recorder.params_after[step]
            deltas = [after[n] - p for n, p in recorder.params[step].items() if group_of(n) == group]
            assert math.isclose(logger.values(f"grad_norm/{group}")[logged_at], _norm(grads), rel_tol=1e-5)
            assert math.isclose(logger.values(f"param_norm/{group}")[logged_at], _norm(params), rel_tol=1e-5)
            ratio = _norm(deltas) / _norm(params)
            assert math.isclose(logger.values(f"update_ratio/{group}")[logged_at], ratio, rel_tol=1e-3)
    all_params = recorder.params[5].values()
    assert math.isclose(logger.last("param_norm/total"), _norm(all_params), rel_tol=1e-5)
    all_deltas = [recorder.params_after[5][n] - p for n, p in recorder.params[5].items()]
    ratio = _norm(all_deltas) / _norm(all_params)
    assert math.isclose(logger.last("update_ratio/total"), ratio, rel_tol=1e-3)


def test_group_by_module_depth_and_inf_norm(tmp_path):
    recorder, monitor = GradRecorder(), GradNormMonitor(norm_type="inf", group_by=2, prefix="train/")
    model, callbacks = TinyTransformerLM(n_layers=2), [monitor, recorder]
    _, logger = _fit(tmp_path, model, random_token_loader(), callbacks, max_steps=2)
    logged = logger.keys()
    groups = {k.removeprefix("train/grad_norm/") for k in logged if k.startswith("train/grad_norm/")}
    assert {"blocks.0", "blocks.1", "token_embedding", "position_embedding", "ln_f", "head"} <= groups
    grads = recorder.steps[-1]
    block1 = [g for n, g in grads.items() if n.startswith("blocks.1.")]
    assert math.isclose(logger.last("train/grad_norm/blocks.1"), _norm(block1, math.inf), rel_tol=1e-6)
    assert math.isclose(logger.last("train/grad_norm/total"), _norm(grads.values(), math.inf), rel_tol=1e-6)


def test_several_optimizers_get_their_own_keys(tmp_path):
    recorder = GradRecorder()
    _, logger = _fit(tmp_path, TwoOptimizers(), random_classification_loader(), [GradNormMonitor(), recorder],
                     max_steps=4, log_every_n_steps=2)  # fmt: skip
    logged = logger.keys()
    assert {"grad_norm/optimizer_0/total", "grad_norm/optimizer_1/total"} <= logged
    assert "grad_norm/total" not in logged
    # manual optimization: on_before_optimizer_step runs once per optimizer; the recorder sees all grads each
    # time
    last = recorder.steps[-1]
    hidden = [g for n, g in last.items() if n.startswith("hidden")]
    head = [g for n, g in last.items() if n.startswith("head")]
    assert math.isclose(logger.last("grad_norm/optimizer_0/total"), _norm(hidden), rel_tol=1e-5)
    assert math.isclose(logger.last("grad_norm/optimizer_1/total"), _norm(head), rel_tol=1e-5)


def test_own_cadence_writes_straight_to_the_loggers(tmp_path):
    callbacks = [GradNormMonitor(log_every_n_steps=2)]
    trainer, logger = _fit(tmp_path, TinyClassifier(), random_classification_loader(), callbacks, max_steps=6,
                           log_every_n_steps=50)  # fmt: skip
    assert [s for s, _ in logger.history("grad_norm/total")] == [1, 3, 5]
    assert "grad_norm/total" not in trainer.callback_metrics


def _syncs_per_batch(module: pl.LightningModule, callbacks: list[Callback], tmp_path: Path) -> list[int]:
    with HostSyncCounter() as counter:
        ledger = SyncLedger(counter)
        loader = random_token_loader(num_samples=40, seq_len=8, batch_size=4)
        _fit(tmp_path, module, loader, [ledger, *callbacks], max_steps=10, log_every_n_steps=5)
    assert len(ledger.per_batch) == 10
    return ledger.per_batch


SMALL = {"d_model": 32, "n_layers": 1}  # the dispatch-mode counter costs a Python call per op: keep ops few


def test_zero_host_syncs_on_non_logging_steps(tmp_path):
    torch.manual_seed(0)
    bare = _syncs_per_batch(SGDTransformerLM(**SMALL), [], tmp_path)
    monitor = GradNormMonitor(group_by=1, log_param_norm=True, log_update_ratio=True)
    stack = [monitor, AdaptiveGradClip(warmup_steps=2, window=8), InputPipelineMonitor()]
    ours = _syncs_per_batch(SGDTransformerLM(**SMALL), stack, tmp_path)
    recipe = _syncs_per_batch(LightningGradNormRecipe(**SMALL), [], tmp_path)
    logging_batches = {4, 9}
    non_logging = [i for i in range(10) if i not in logging_batches]
    assert [bare[i] for i in non_logging] == [0] * 8, f"the bare Trainer already syncs: {bare}"
    assert [ours[i] for i in non_logging] == [0] * 8, f"syncs per batch with the monitoring stack: {ours}"
    assert all(ours[i] > bare[i] for i in logging_batches), (ours, bare)  # the counter sees our logging syncs
    assert all(recipe[i] >= 16 for i in non_logging), f"Lightning's recipe: {recipe}"  # one per parameter


@pytest.mark.gpu
def test_no_sync_on_cuda_non_logging_steps(tmp_path):
    """``set_sync_debug_mode("error")`` raises on any sync; it is switched on only for non-logging steps."""

    class SyncErrors(Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            # the next batch is a logging batch when (batch_idx + 1) % 4 == 0
            torch.cuda.set_sync_debug_mode(0 if (batch_idx + 1) % 4 == 0 else "error")

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            torch.cuda.set_sync_debug_mode(0)

    class NoLogLM(TinyTransformerLM):
        def training_step(self, batch, batch_idx):
            tokens, target = batch
            return self.loss(self(tokens), target)

    callbacks = [
        SyncErrors(),
        GradNormMonitor(group_by=1),
        AdaptiveGradClip(warmup_steps=2),
        InputPipelineMonitor(),
    ]
    try:  # 12 steps: two epochs of random_token_loader()
        _fit(tmp_path, NoLogLM(), random_token_loader(), callbacks, accelerator="cuda", max_steps=12,
             max_epochs=2, log_every_n_steps=4)  # fmt: skip
    finally:
        torch.cuda.set_sync_debug_mode(0)


def test_ddp_fork_logs_the_norm_of_the_full_batch_gradient(tmp_path):
    torch.manual_seed(0)
    model = TinyClassifier(lr=LR)
    loader = random_classification_loader(batch_size=32)
    # Lightning gives each rank a DistributedSampler(shuffle=True, seed=0); DDP averages the two ranks'
    # gradients
    rows = [i for rank in (0, 1) for i in list(DistributedSampler(loader.dataset, 2, rank, seed=0))[:32]]
    x, y = loader.dataset[rows]
    reference = TinyClassifier(lr=LR)
    reference.load_state_dict(model.state_dict())
    F.cross_entropy(reference(x), y).backward()
    expected = _norm([p.grad for p in reference.parameters()])
    ddp = {"strategy": "ddp_fork", "devices": 2}
    trainer, _ = _fit(tmp_path, model, loader, [GradNormMonitor()], max_steps=1, **ddp)
    assert math.isclose(float(trainer.callback_metrics["grad_norm/total"]), expected, rel_tol=1e-5)


def test_pickled_copies_of_all_three_callbacks_run_under_ddp(tmp_path):
    """What ddp_spawn does with them (forked ranks: no fresh interpreters)."""
    clip = AdaptiveGradClip(warmup_steps=1, window=4)
    originals = (GradNormMonitor(group_by=1), clip, InputPipelineMonitor())
    callbacks = [pickle.loads(pickle.dumps(callback)) for callback in originals]
    trainer, _ = _fit(tmp_path, TinyClassifier(), random_classification_loader(), callbacks,
                      strategy="ddp_fork", devices=2, max_steps=4, log_every_n_steps=2)  # fmt: skip
    metrics = trainer.callback_metrics
    for key in ("grad_norm/total", "grad_norm/head", "grad_clip/threshold", "input_pipeline/wait_fraction"):
        assert key in metrics, sorted(metrics)
    assert float(metrics["grad_norm/total"]) > 0


@pytest.mark.slow  # starts its own processes: over 20 s on a 2-core CPU
def test_fsdp2_norms_and_clipping_match_the_full_gradient():
    """FSDP2 via ``ModelParallelStrategy`` + ``fully_shard`` on 2 CPU processes (see the script)."""
    script = [sys.executable, str(SCRIPTS / "grad_norm_monitor_fsdp2.py")]
    result = subprocess.run(
        script, capture_output=True, text=True, timeout=240, cwd=Path(__file__).parents[2]
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert "FSDP2-OK steps=8" in result.stdout, result.stdout[-3000:]


def test_deepspeed_accepts_only_the_engine_global_norm():
    trainer = pl.Trainer(accelerator="cpu", devices=1, strategy=DeepSpeedStrategy(stage=2), logger=False)
    GradNormMonitor().setup(trainer, TinyClassifier(), "fit")  # the default configuration is accepted
    with pytest.raises(ValueError, match="engine's global 2-norm"):
        GradNormMonitor(group_by=1).setup(trainer, TinyClassifier(), "fit")
    with pytest.raises(ValueError, match=r"norm_type=2\.0"):
        GradNormMonitor(norm_type=1).setup(trainer, TinyClassifier(), "fit")


@pytest.mark.gpu
@pytest.mark.skipif(not deepspeed_available(), reason="DeepSpeed is not installed")
def test_deepspeed_logs_the_engine_global_norm(tmp_path):
    trainer, logger = _fit(tmp_path, TinyClassifier(), random_classification_loader(), [GradNormMonitor()],
                           accelerator="cuda", strategy=DeepSpeedStrategy(stage=2), max_steps=3)  # fmt: skip
    engine = trainer.strategy.deepspeed_engine
    assert math.isclose(logger.last("grad_norm/total"), float(engine.get_global_grad_norm()), rel_tol=1e-5)


def test_state_dict_round_trip_and_resume(tmp_path):
    monitor = GradNormMonitor(norm_type=1.0, prefix="p/")
    clone = GradNormMonitor(norm_type=1.0, prefix="p/")
    clone.load_state_dict(monitor.state_dict())
    assert clone.state_dict() == monitor.state_dict()
    clone.load_state_dict({})  # an old or foreign checkpoint loads
    settings = {"enable_checkpointing": True, "default_root_dir": tmp_path}
    first = fast_trainer(max_steps=3, callbacks=[GradNormMonitor()], **settings)
    first.fit(TinyClassifier(), random_classification_loader(num_samples=96))  # one epoch = 3 steps
    ckpt = next(Path(tmp_path).rglob("*.ckpt"))
    assert any(key.startswith("GradNormMonitor") for key in torch.load(ckpt, weights_only=False)["callbacks"])
    loader = random_classification_loader(num_samples=96)
    second = fast_trainer(max_epochs=2, max_steps=6, logger=(logger := InMemoryLogger()), log_every_n_steps=1,
                          callbacks=[GradNormMonitor()], default_root_dir=tmp_path)  # fmt: skip
    second.fit(TinyClassifier(), loader, ckpt_path=ckpt)
    assert second.global_step > 3
    assert [s for s, _ in logger.history("grad_norm/total")] == list(range(3, second.global_step))
