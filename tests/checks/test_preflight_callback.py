"""In ``trainer.fit``, the checks read the loaders the Trainer itself uses, through its public properties
(``trainer.train_dataloader`` / ``trainer.val_dataloaders`` at ``on_train_start``), not its private loops."""

from __future__ import annotations

from pathlib import Path

from torch.utils.data import DistributedSampler

from lightning_recipes.checks import CheckContext, CheckResult, InputIndependenceCheck, Preflight, SanityCheck
from lightning_recipes.testing import TinyClassifier, fast_trainer

from . import _models as M


class LoaderProbe(SanityCheck):
    """Records which loaders the check saw (module level: the DDP test forks)."""

    name = "loader_probe"

    def __init__(self, out: Path | None = None) -> None:
        super().__init__()
        self.out = out
        self.seen: dict[str, object] = {}

    def check(self, context: CheckContext) -> CheckResult:
        trainer = context.trainer
        assert trainer is not None
        self.seen = {
            "train_is_trainers": context.train_dataloader is trainer.train_dataloader,
            "val_is_trainers": context.val_dataloader is trainer.val_dataloaders,
            "distributed": isinstance(getattr(context.train_dataloader, "sampler", None), DistributedSampler),
        }
        if self.out is not None:
            (self.out / f"rank{trainer.global_rank}.txt").write_text(repr(sorted(self.seen.items())))
        return CheckResult(self.name, "pass", "seen")


def test_checks_see_the_loaders_passed_to_fit(tmp_path):
    probe = LoaderProbe()
    flight = Preflight(checks=[probe, InputIndependenceCheck(max_steps=25)], print_report=False)
    trainer = fast_trainer(max_steps=1, callbacks=[flight], default_root_dir=tmp_path)
    model = TinyClassifier(in_features=M.IN, num_classes=M.C, lr=0.5)  # has a validation_step
    trainer.fit(model, train_dataloaders=M.loader(), val_dataloaders=M.loader(shuffle=False))
    assert probe.seen == {"train_is_trainers": True, "val_is_trainers": True, "distributed": False}
    assert flight.report is not None
    assert flight.report["input_independence"].details["evaluated_on"] == "validation"


def test_ddp_ranks_check_the_loader_with_the_trainers_distributed_sampler(tmp_path):
    probe = LoaderProbe(out=tmp_path)
    trainer = fast_trainer(
        max_steps=1, strategy="ddp_fork", devices=2, callbacks=[probe], default_root_dir=tmp_path
    )
    trainer.fit(M.MLP(), M.loader())
    expected = repr([("distributed", True), ("train_is_trainers", True), ("val_is_trainers", True)])  # None
    outcomes = {path.name: path.read_text() for path in tmp_path.glob("rank*.txt")}
    assert outcomes == {"rank0.txt": expected, "rank1.txt": expected}
