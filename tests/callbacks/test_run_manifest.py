"""RunManifest: what it records, where it writes it, what each real logger receives, and its Trainer-free
collectors tested by value."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import pickle
import platform
import subprocess
from argparse import Namespace
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes._jsonable import jsonable
from lightning_recipes.callbacks import RunManifest
from lightning_recipes.callbacks.run_manifest import (
    combine_fingerprints,
    git_info,
    hash_batch,
    host_info,
    library_versions,
    loggable,
    optimizer_record,
    seeds,
)
from lightning_recipes.testing import (
    InMemoryLogger,
    TinyClassifier,
    fast_trainer,
    random_classification_loader,
)


@dataclasses.dataclass
class _Recipe:
    optimizer: str = "lion"
    lr: float = 3e-4
    betas: tuple[float, float] = (0.9, 0.99)


class _RecipeClassifier(TinyClassifier):
    def __init__(self) -> None:
        super().__init__()
        self.recipe = _Recipe()


class _FailingClassifier(TinyClassifier):
    def training_step(self, batch: Any, batch_idx: int) -> Any:
        if batch_idx == 1:
            raise RuntimeError("boom at batch 1")
        return super().training_step(batch, batch_idx)


def _fit(tmp_path: Path, manifest: RunManifest, *, model: Any = None, loader: Any = None, **kw: Any) -> Any:
    """Fit ``model`` (a TinyClassifier) on ``loader`` with ``manifest`` (4 steps unless told otherwise)."""
    ckpt_path = kw.pop("ckpt_path", None)
    kw = {"max_steps": 4, "callbacks": [manifest], "default_root_dir": tmp_path, **kw}
    trainer = fast_trainer(**kw)
    trainer.fit(model or TinyClassifier(), loader or random_classification_loader(), ckpt_path=ckpt_path)
    return trainer


def test_manifest_records_run(tmp_path: Path) -> None:
    manifest = RunManifest(fingerprint_batches=3, extra={"ticket": "EXP-7"})
    torch.manual_seed(0)
    trainer = _fit(tmp_path, manifest, model=_RecipeClassifier(), accumulate_grad_batches=2, max_steps=2)
    record = json.loads((tmp_path / "manifest.json").read_text())
    assert record == json.loads(json.dumps(manifest.manifest, default=str))
    assert record["hparams"] == {"in_features": 16, "num_classes": 4, "hidden": 32, "lr": 0.1}
    assert record["recipe"] == {"optimizer": "lion", "lr": 3e-4, "betas": [0.9, 0.99]}
    assert record["extra"] == {"ticket": "EXP-7"}
    info = record["trainer"]
    assert info["strategy"] == "SingleDeviceStrategy"
    assert (info["world_size"], info["accumulate_grad_batches"], info["per_device_batch_size"]) == (1, 2, 32)
    assert info["effective_batch_size"] == 64
    assert info["callbacks"][0] == "RunManifest"
    assert record["optimizers"][0]["class"] == "SGD"
    assert record["optimizers"][0]["param_groups"][0]["lr"] == 0.1
    assert record["optimizers"][0]["param_groups"][0]["num_parameters"] == 16 * 32 + 32 + 32 * 4 + 4
    assert record["model"]["trainable_parameters"] == record["model"]["parameters"] == 676
    assert record["seeds"]["torch_initial_seed"] == 0
    assert record["versions"]["torch"].startswith(torch.__version__.split("+")[0])
    assert {"python", "lightning", "lightning_recipes"} <= set(record["versions"])
    assert record["hardware"]["accelerator"] == "CPUAccelerator"
    assert record["data_fingerprint"]["batches"] == 3
    assert trainer.global_step == 2


def test_the_git_section_is_git_info_of_repo_dir(repo: Path) -> None:
    (repo / "train.py").write_text("print('v2, uncommitted')\n")
    manifest = RunManifest(repo_dir=repo, fingerprint_batches=0)
    _fit(repo / "run", manifest, max_steps=1)
    assert manifest.manifest["git"] == git_info(str(repo)) and manifest.manifest["git"]["dirty"]


def _loader(values: torch.Tensor) -> DataLoader:
    labels = torch.arange(len(values)) % 4
    return DataLoader(TensorDataset(values, labels), batch_size=8)


def test_fingerprint_identifies_the_batches(tmp_path: Path) -> None:
    data = torch.randn(64, 16)
    changed = data.clone()
    changed[9, 3] += 1e-3  # one value of the second batch
    late_change = data.clone()
    late_change[40, 0] += 1.0  # sixth batch: beyond the two that are hashed

    def fingerprint(values: torch.Tensor, name: str) -> dict[str, Any]:
        manifest = RunManifest(fingerprint_batches=2)
        _fit(tmp_path / name, manifest, loader=_loader(values), max_steps=8)
        return manifest.manifest["data_fingerprint"]

    first = fingerprint(data, "a")
    assert first == fingerprint(data.clone(), "b")
    assert first["sha256"] != fingerprint(changed, "c")["sha256"]
    assert first == fingerprint(late_change, "d")
    assert first["batches"] == 2 and len(first["per_rank"]) == 1
    assert first["sha256"] == hashlib.sha256(first["per_rank"][0].encode()).hexdigest()


def test_does_not_change_training(tmp_path: Path) -> None:
    def final_weights(callbacks: list[Any], name: str) -> list[torch.Tensor]:
        torch.manual_seed(3)
        model = TinyClassifier()
        loader = random_classification_loader(shuffle=True)
        trainer = fast_trainer(max_steps=6, callbacks=callbacks, default_root_dir=tmp_path / name)
        trainer.fit(model, loader)
        return [p.detach().clone() for p in model.parameters()]

    plain = final_weights([], "plain")
    manifest = RunManifest(fingerprint_batches=50)  # more than the run has: the fingerprint still completes
    recorded = final_weights([manifest], "recorded")
    assert all(torch.equal(a, b) for a, b in zip(plain, recorded))
    assert manifest.manifest["data_fingerprint"]["batches"] == 6
    record = json.loads((tmp_path / "recorded" / "manifest.json").read_text())
    assert record["data_fingerprint"]["batches"] == 6


def test_exception_leaves_partial_manifest(tmp_path: Path) -> None:
    manifest = RunManifest(fingerprint_batches=4)
    with pytest.raises(RuntimeError, match="boom at batch 1"):
        _fit(tmp_path, manifest, model=_FailingClassifier())
    record = json.loads((tmp_path / "manifest.json").read_text())
    assert record["exception"] == "RuntimeError: boom at batch 1"
    assert record["data_fingerprint"]["status"] == "incomplete"
    assert record["data_fingerprint"]["batches"] == 2


def test_state_dict_round_trip_and_resume(tmp_path: Path) -> None:
    first = RunManifest()
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    _fit(tmp_path / "a", first, callbacks=[first, checkpoint], enable_checkpointing=True)

    restored = RunManifest()
    restored.load_state_dict(pickle.loads(pickle.dumps(first.state_dict())))
    assert restored._previous is not None
    restored.load_state_dict({})  # old checkpoints without our state load fine

    second = RunManifest()
    last = str(tmp_path / "ckpt" / "last.ckpt")
    _fit(tmp_path / "b", second, max_steps=12, max_epochs=2, enable_checkpointing=True, ckpt_path=last,
         callbacks=[second, ModelCheckpoint(dirpath=tmp_path / "ckpt2")])  # fmt: skip
    resumed = second.manifest["resumed_from"]
    assert resumed["created_at"] == first.manifest["created_at"]
    assert resumed["data_fingerprint"] == first.manifest["data_fingerprint"]["sha256"]
    record = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert record["resumed_from"] == resumed
    assert record["trainer"]["ckpt_path"] == last
    assert first.manifest["trainer"]["ckpt_path"] is None


def test_pickles_and_records_ddp(tmp_path: Path) -> None:
    manifest = pickle.loads(pickle.dumps(RunManifest(fingerprint_batches=2)))
    loader = random_classification_loader(batch_size=16)
    _fit(tmp_path, manifest, loader=loader, max_steps=3, strategy="ddp_fork", devices=2,
         accumulate_grad_batches=2)  # fmt: skip
    record = json.loads((tmp_path / "manifest.json").read_text())
    info = record["trainer"]
    assert (info["strategy"], info["world_size"], info["per_device_batch_size"]) == ("DDPStrategy", 2, 16)
    assert info["effective_batch_size"] == 16 * 2 * 2
    ranks = record["data_fingerprint"]["per_rank"]
    assert len(ranks) == 2 and ranks[0] != ranks[1]  # DistributedSampler gives each rank different samples
    assert record["data_fingerprint"]["sha256"] == hashlib.sha256("".join(ranks).encode()).hexdigest()


def test_every_attached_logger_receives_it_once(tmp_path: Path) -> None:
    class CountingLogger(InMemoryLogger):
        def __init__(self) -> None:
            super().__init__()
            self.manifest_calls = 0

        def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
            self.manifest_calls += "manifest" in params
            super().log_hyperparams(params, *args, **kwargs)

    memory, csv_logger = CountingLogger(), CSVLogger(tmp_path, name="csv")
    manifest = RunManifest(fingerprint_batches=3)
    _fit(tmp_path, manifest, logger=[csv_logger, memory], max_steps=5)
    assert memory.manifest_calls == 1  # once, after the fingerprint is complete
    assert memory.hyperparams["manifest"]["data_fingerprint"]["batches"] == 3
    logged = yaml.safe_load((Path(csv_logger.log_dir) / "hparams.yaml").read_text())["manifest"]
    assert logged["data_fingerprint"] == memory.hyperparams["manifest"]["data_fingerprint"]
    assert (logged["trainer"]["effective_batch_size"], logged["hparams"]["num_classes"]) == (32, 4)
    assert len(logged["data_fingerprint"]["sha256"]) == 64
    assert (Path(csv_logger.log_dir) / "manifest.json").is_file()  # the first logger's directory


def test_effective_batch_with_several_training_loaders(tmp_path: Path) -> None:
    class TwoLoaders(TinyClassifier):
        def training_step(self, batch: Any, batch_idx: int) -> Any:
            return sum(super(TwoLoaders, self).training_step(part, batch_idx) for part in batch.values())

    manifest = RunManifest(fingerprint_batches=1)
    loaders = {name: random_classification_loader(batch_size=size) for name, size in (("a", 8), ("b", 24))}
    _fit(tmp_path, manifest, model=TwoLoaders(), loader=loaders, max_steps=2)
    assert manifest.manifest["trainer"]["per_device_batch_size"] == 32
    assert manifest.manifest["trainer"]["effective_batch_size"] == 32


class _CLIModel(TinyClassifier):
    def train_dataloader(self) -> DataLoader:
        return random_classification_loader(in_features=self.hparams["in_features"])


def test_records_the_lightning_cli_config(tmp_path: Path) -> None:
    from lightning.pytorch.cli import LightningCLI

    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump({"model": {"hidden": 8, "lr": 0.05}, "trainer": {"max_steps": 2}}))
    args = ["fit", f"--config={config}", f"--trainer.default_root_dir={tmp_path}", "--trainer.logger=false"]
    args += ["--trainer.enable_progress_bar=false", "--trainer.enable_checkpointing=false"]
    args += ["--trainer.callbacks+=lightning_recipes.callbacks.RunManifest"]
    args += ["--trainer.callbacks.fingerprint_batches=1"]
    LightningCLI(_CLIModel, args=args)
    record = json.loads((tmp_path / "manifest.json").read_text())
    cli = record["cli_config"]
    assert (cli["model"]["hidden"], cli["model"]["lr"], cli["trainer"]["max_steps"]) == (8, 0.05, 2)
    assert cli["trainer"]["callbacks"][0]["class_path"] == "lightning_recipes.callbacks.RunManifest"
    assert record["hparams"]["hidden"] == 8


class _LionClassifier(TinyClassifier):
    def configure_optimizers(self) -> Any:
        from lightning_recipes.optim import Lion

        return Lion(self.parameters(), lr=1e-3, implementation="foreach")


def test_manifest_records_which_implementation_our_optimizer_ran(tmp_path: Path) -> None:
    """Issue #26: Lion's path is recorded once it stepped (also with no fingerprint); torch's get no key."""
    for batches in (0, 3):
        manifest = RunManifest(fingerprint_batches=batches)
        _fit(tmp_path / str(batches), manifest, model=_LionClassifier(), max_steps=2)
        record = json.loads((tmp_path / str(batches) / "manifest.json").read_text())
        assert record["optimizers"][0]["class"] == "Lion"
        assert record["optimizers"][0]["implementation_used"] == "foreach"
    _fit(tmp_path / "sgd", manifest := RunManifest(), max_steps=1)
    assert "implementation_used" not in manifest.manifest["optimizers"][0]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "config", "user.email", "t@example.com")
    _git(tmp_path, "config", "user.name", "t")
    (tmp_path / "train.py").write_text("print(1)\n")
    _git(tmp_path, "add", "train.py")
    _git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


def test_git_info_clean_dirty_and_outside_a_repository(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    commit = _git(repo, "rev-parse", "HEAD").strip()
    clean = {"commit": commit, "branch": "main", "dirty": False, "diff_sha256": None, "changed_files": []}
    assert git_info(str(repo)) == clean
    (repo / "train.py").write_text("print(2)\n")
    (repo / "untracked.py").write_text("")  # untracked files do not make the tree dirty
    diff = _git(repo, "diff", "HEAD")
    diff_sha256 = hashlib.sha256(diff.encode()).hexdigest()
    dirty = {"dirty": True, "diff_sha256": diff_sha256, "changed_files": ["train.py"]}
    assert git_info(str(repo)) == {**clean, **dirty}
    assert git_info(str(tmp_path_factory.mktemp("not_a_repo"))) is None


def test_library_versions_and_host_info() -> None:
    versions = library_versions()
    assert versions["python"] == platform.python_version()
    for name in ("torch", "lightning"):
        assert versions[name] == metadata.version(name)
    assert versions["cuda"] == torch.version.cuda
    host = host_info()
    expected = (platform.platform(), platform.machine(), os.cpu_count())
    assert (host["os"], host["machine"], host["cpu_count"]) == expected
    assert host["memory_bytes"] == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_seeds_read_lightnings_environment() -> None:
    torch.manual_seed(123)
    environment = {"PL_GLOBAL_SEED": "123", "PL_SEED_WORKERS": "1"}
    assert seeds(environment) == {**environment, "torch_initial_seed": 123}
    assert seeds({})["PL_GLOBAL_SEED"] is None


@dataclasses.dataclass
class _PlainRecipe:
    lr: float = 3e-4
    betas: tuple[float, float] = (0.9, 0.99)


def _fn() -> None:
    pass


def test_loggable_turns_lists_into_json_strings_at_any_depth() -> None:
    manifest = {"a": [1, "x"], "b": {"c": [], "d": {"e": [None]}, "f": 2.5}, "g": None}
    expected = {"a": '[1, "x"]', "b": {"c": "[]", "d": {"e": "[null]"}, "f": 2.5}, "g": None}
    assert loggable(manifest) == expected


def test_optimizer_record() -> None:
    model = torch.nn.Linear(4, 3)
    groups = [{"params": [model.weight], "weight_decay": 0.1}, {"params": [model.bias], "weight_decay": 0.0}]
    record = optimizer_record(torch.optim.AdamW(groups, lr=1e-3))
    assert record["class"] == "AdamW"
    got = [(g["lr"], g["weight_decay"], g["betas"], g["num_parameters"]) for g in record["param_groups"]]
    assert got == [(1e-3, 0.1, [0.9, 0.999], 12), (1e-3, 0.0, [0.9, 0.999], 3)]


def _digest(batch: Any) -> str:
    hasher = hashlib.sha256()
    hash_batch(hasher, batch)
    return hasher.hexdigest()


def test_hash_batch_reference() -> None:
    """The byte stream, written out from the rule in the docstring."""
    x = torch.tensor([[1.0, 2.0]])
    y = torch.tensor([3], dtype=torch.int64)
    stream = b"L2" + b"Ttorch.float32(1, 2)" + x.numpy().tobytes() + b"Ttorch.int64(1,)" + y.numpy().tobytes()
    assert _digest((x, y)) == hashlib.sha256(stream).hexdigest()
    stream = b"M" + b"a" + b"1" + b"b" + b"'s'"
    assert _digest({"b": "s", "a": 1}) == hashlib.sha256(stream).hexdigest()
    assert _digest(torch.zeros(0)) == hashlib.sha256(b"Ttorch.float32(0,)").hexdigest()


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (torch.zeros(2), torch.zeros(2, dtype=torch.float64)),  # dtype
        (torch.zeros(2), torch.zeros(1, 2)),  # shape
        (torch.zeros(2), torch.tensor([0.0, 1.0])),  # values
        ([torch.zeros(1), torch.ones(1)], [torch.ones(1), torch.zeros(1)]),  # order in a sequence
        ({"x": torch.zeros(1)}, {"y": torch.zeros(1)}),  # keys
    ],
)
def test_hash_batch_tells_batches_apart(a: Any, b: Any) -> None:
    assert _digest(a) != _digest(b)


def test_hash_batch_is_the_same_for_a_list_and_a_tuple_and_a_dataclass_and_its_dict() -> None:
    @dataclasses.dataclass
    class Batch:
        x: torch.Tensor
        y: int

    assert _digest([torch.ones(2), 1]) == _digest((torch.ones(2), 1))
    assert _digest(Batch(torch.ones(2), 1)) == _digest({"y": 1, "x": torch.ones(2)})


def test_combine_fingerprints() -> None:
    sha256 = hashlib.sha256(b"aabb").hexdigest()
    assert combine_fingerprints(("aa", "bb"), 3) == {"sha256": sha256, "per_rank": ["aa", "bb"], "batches": 3}


@pytest.mark.parametrize(
    ("value", "options", "expected"),
    [
        (_PlainRecipe(), {}, {"lr": 3e-4, "betas": [0.9, 0.99]}),
        (Namespace(a=1, b="x"), {}, {"a": 1, "b": "x"}),
        ({1: {2: (3,)}}, {}, {"1": {"2": [3]}}),
        (frozenset({1}), {}, [1]),
        (torch.arange(3), {}, [0, 1, 2]),
        (torch.zeros(17), {}, "Tensor(shape=[17], dtype=torch.float32)"),
        (None, {}, None),
        (True, {}, True),
        (torch.bfloat16, {}, "torch.bfloat16"),
        (torch.device("cpu"), {}, "cpu"),
        (Path("a/b"), {}, "a/b"),
        (torch.optim.SGD, {}, "torch.optim.sgd.SGD"),
        (_fn, {}, f"{__name__}._fn"),
        (ValueError("x"), {}, "ValueError('x')"),
        ({"x": float("nan")}, {}, {"x": math.nan}),  # the manifest's default keeps non-finite floats
        ({"x": float("nan")}, {"nonfinite_as_str": True}, {"x": "nan"}),
        (torch.zeros(17), {"max_tensor_elements": None}, [0.0] * 17),
        (torch.tensor([float("inf")]), {"nonfinite_as_str": True}, ["inf"]),
        (ValueError("x"), {"fallback": str}, "x"),
    ],
)
def test_jsonable_table(value: object, options: dict, expected: object) -> None:
    got = jsonable(value, **options)
    assert json.dumps(got) == json.dumps(expected) and type(got) is type(expected)  # NaN: "NaN" both sides
