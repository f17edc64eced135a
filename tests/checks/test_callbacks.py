"""Each check as a callback in a real Trainer, the Preflight callback, resume, pickling, and DDP ranks."""

from __future__ import annotations

import pickle

import pytest
import torch
from lightning.pytorch import Callback

from lightning_recipes.checks import (
    DataCheck,
    GradFlowCheck,
    InitLossCheck,
    InputIndependenceCheck,
    OverfitBatchCheck,
    Preflight,
    PreflightError,
)
from lightning_recipes.data import DigitsDataModule
from lightning_recipes.testing import DigitsCNN, InMemoryLogger, TinyClassifier, fast_trainer

from . import _models as M


def test_check_alone_as_callback_raises_before_training(tmp_path):
    model = M.DetachedBranch()
    check = GradFlowCheck()
    trainer = fast_trainer(max_steps=3, callbacks=[check], default_root_dir=tmp_path)
    with pytest.raises(PreflightError, match="grad_flow"):
        trainer.fit(model, M.loader())
    assert trainer.global_step == 0
    assert check.result is not None and check.result.status == "fail"


def test_check_alone_warns_and_training_continues(tmp_path):
    check = InitLossCheck(on_fail="warn")
    trainer = fast_trainer(max_steps=2, callbacks=[check], default_root_dir=tmp_path)
    with pytest.warns(UserWarning, match="init_loss: .*too high"):
        trainer.fit(M.SumReduction(), M.loader())
    assert trainer.global_step == 2
    assert check.failed_on_any_rank


def test_check_logs_its_measurement_and_reads_fit_dataloaders(tmp_path):
    logger = InMemoryLogger()
    check = InitLossCheck()
    trainer = fast_trainer(max_steps=1, callbacks=[check], logger=logger, default_root_dir=tmp_path)
    trainer.fit(TinyClassifier(num_classes=4), train_dataloaders=M.loader())
    assert logger.history("preflight/init_loss") == [(0, pytest.approx(1.3862944, rel=1e-6))]


def test_check_reads_datamodule_and_model_hook_loaders(tmp_path):
    check = DataCheck()
    fast_trainer(max_steps=1, callbacks=[check], default_root_dir=tmp_path).fit(
        DigitsCNN(width=8), datamodule=DigitsDataModule(batch_size=32)
    )
    assert check.result.status == "pass" and check.result.details["num_classes"] == 10

    class NaNHook(M.MLP):
        def train_dataloader(self):
            return M.nan_loader()

    check = DataCheck(on_fail="warn")
    with pytest.warns(UserWarning, match="NaN"):
        fast_trainer(max_steps=1, callbacks=[check], default_root_dir=tmp_path).fit(NaNHook())
    assert check.result.status == "fail" and check.result.details["nonfinite_values"] == 1


def test_preflight_callback_runs_chosen_checks_and_prints(tmp_path, capsys):
    preflight = Preflight(checks=["data", InitLossCheck(num_batches=1), "grad_flow"], on_fail="raise")
    trainer = fast_trainer(max_steps=2, callbacks=[preflight], default_root_dir=tmp_path)
    trainer.fit(M.MLP(), M.loader())
    assert [r.name for r in preflight.report] == ["data", "init_loss", "grad_flow"]
    assert preflight.report.ok and not preflight.failed_on_any_rank
    printed = capsys.readouterr().out
    assert "Preflight OK" in printed and "grad_flow" in printed


def test_preflight_callback_raises_on_failure(tmp_path):
    preflight = Preflight(checks=["overfit_batch", "grad_flow"], print_report=False)
    trainer = fast_trainer(max_steps=2, callbacks=[preflight], default_root_dir=tmp_path)
    with pytest.raises(PreflightError) as info:
        trainer.fit(M.ClampedLoss(), M.loader())
    assert {r.name for r in info.value.results} == {"overfit_batch", "grad_flow"}


def test_preflight_callback_uses_trainer_precision(tmp_path):
    """bf16-mixed autocast reaches the checks: the captured logits are bfloat16."""
    seen: list[torch.dtype] = []

    class Spy(M.MLP):
        def forward(self, x):
            out = super().forward(x)
            seen.append(out.dtype)
            return out

    preflight = Preflight(checks=["init_loss"], print_report=False)
    trainer = fast_trainer(
        max_steps=1, callbacks=[preflight], precision="bf16-mixed", default_root_dir=tmp_path
    )
    trainer.fit(Spy(), M.loader())
    assert seen[0] == torch.bfloat16
    assert preflight.report["init_loss"].status == "pass"


def test_state_dict_round_trip_and_resume_skips_the_checks(tmp_path):
    check = InitLossCheck()
    preflight = Preflight(checks=["init_loss"], print_report=False)
    trainer = fast_trainer(
        max_steps=2, callbacks=[check, preflight], enable_checkpointing=True, default_root_dir=tmp_path
    )
    trainer.fit(TinyClassifier(), M.loader())
    ckpt = tmp_path / "done.ckpt"
    trainer.save_checkpoint(ckpt)

    restored, restored_pf = InitLossCheck(), Preflight(checks=["init_loss"], print_report=False)
    restored.load_state_dict(check.state_dict())
    restored_pf.load_state_dict(preflight.state_dict())
    assert restored.result.to_dict() == check.result.to_dict()
    assert restored_pf.report.to_dict() == preflight.report.to_dict()
    restored.load_state_dict({})  # tolerant of old checkpoints
    assert restored.result is None

    # Resume from the checkpoint of a trained model: the init-loss check must not run again (it would fail).
    resumed_check = InitLossCheck()
    resumed_pf = Preflight(checks=["init_loss"], print_report=False)
    trainer = fast_trainer(
        max_steps=4, max_epochs=3, callbacks=[resumed_check, resumed_pf], default_root_dir=tmp_path
    )
    trainer.fit(TinyClassifier(), M.loader(), ckpt_path=ckpt)
    assert trainer.global_step == 4
    assert resumed_check.result.to_dict() == check.result.to_dict()  # restored, not re-measured
    assert resumed_pf.report.to_dict() == preflight.report.to_dict()


def test_callbacks_pickle():
    for callback in (Preflight(), InputIndependenceCheck(max_steps=3), OverfitBatchCheck()):
        clone = pickle.loads(pickle.dumps(callback))
        assert type(clone) is type(callback)


class RecordDecision(Callback):
    """Writes each rank's local and collective preflight outcome to a file (hooks run in the workers)."""

    def __init__(self, preflight: Preflight, directory: str) -> None:
        self.preflight = preflight
        self.directory = directory

    def on_train_start(self, trainer, pl_module) -> None:
        report = self.preflight.report
        with open(f"{self.directory}/rank{trainer.global_rank}.txt", "w") as handle:
            handle.write(f"{report['data'].status} {self.preflight.failed_on_any_rank}")


def test_ddp_decision_is_collective_when_one_rank_fails(tmp_path):
    """Only rank 1's data has a NaN; with on_fail="warn" both ranks learn that a check failed."""
    preflight = Preflight(checks=["data"], on_fail="warn", print_report=False)
    trainer = fast_trainer(
        max_steps=1,
        strategy="ddp_fork",
        devices=2,
        callbacks=[preflight, RecordDecision(preflight, str(tmp_path))],
        default_root_dir=tmp_path,
    )
    trainer.fit(M.RankOneNaN())  # warnings are raised in the worker processes
    outcomes = {path.name: path.read_text() for path in tmp_path.glob("rank*.txt")}
    assert outcomes == {"rank0.txt": "pass True", "rank1.txt": "fail True"}


def test_ddp_every_rank_raises_when_one_rank_fails(tmp_path):
    preflight = Preflight(checks=["data"], on_fail="raise", print_report=False)
    trainer = fast_trainer(
        max_steps=1, strategy="ddp_fork", devices=2, callbacks=[preflight], default_root_dir=tmp_path
    )
    with pytest.raises(Exception, match="preflight check"):
        trainer.fit(M.RankOneNaN())


def test_ddp_healthy_model_trains(tmp_path):
    preflight = Preflight(checks=["data", "init_loss", "grad_flow", "batch_independence"], print_report=False)
    recorder = RecordDecision(preflight, str(tmp_path))
    trainer = fast_trainer(
        max_steps=2,
        strategy="ddp_fork",
        devices=2,
        callbacks=[preflight, recorder],
        default_root_dir=tmp_path,
    )
    trainer.fit(M.MLP(), M.loader())
    outcomes = {path.name: path.read_text() for path in tmp_path.glob("rank*.txt")}
    assert outcomes == {"rank0.txt": "pass False", "rank1.txt": "pass False"}


def test_preflight_callback_configured_from_lightning_cli(tmp_path):
    from lightning.pytorch.cli import LightningCLI

    args = [
        "--trainer.callbacks+=lightning_recipes.callbacks.Preflight",  # the old path, as in users' YAMLs
        "--trainer.callbacks.checks=[data, init_loss]",
        "--trainer.callbacks.on_fail=warn",
        "--trainer.callbacks.print_report=false",
        "--trainer.max_steps=1",
        "--trainer.logger=false",
        "--trainer.enable_checkpointing=false",
        "--trainer.enable_progress_bar=false",
        f"--trainer.default_root_dir={tmp_path}",
    ]
    cli = LightningCLI(M.MLP, run=False, args=args)
    (preflight,) = [c for c in cli.trainer.callbacks if isinstance(c, Preflight)]
    assert [c.name for c in preflight.checks] == ["data", "init_loss"] and preflight.on_fail == "warn"
    cli.trainer.fit(cli.model, M.loader())
    assert preflight.report.ok and preflight.report["init_loss"].status == "pass"
