"""RunManifest's Trainer-free collectors, tested by value (callbacks/run_manifest.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import subprocess
from argparse import Namespace
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import torch

from lightning_recipes._jsonable import jsonable
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
    assert git_info(str(repo)) == {
        "commit": commit,
        "branch": "main",
        "dirty": False,
        "diff_sha256": None,
        "changed_files": [],
    }
    (repo / "train.py").write_text("print(2)\n")
    (repo / "untracked.py").write_text("")  # untracked files do not make the tree dirty
    diff = _git(repo, "diff", "HEAD")
    assert git_info(str(repo)) == {
        "commit": commit,
        "branch": "main",
        "dirty": True,
        "diff_sha256": hashlib.sha256(diff.encode()).hexdigest(),
        "changed_files": ["train.py"],
    }
    assert git_info(str(tmp_path_factory.mktemp("not_a_repo"))) is None


def test_library_versions_and_host_info() -> None:
    versions = library_versions()
    assert versions["python"] == platform.python_version()
    for name in ("torch", "lightning"):
        assert versions[name] == metadata.version(name)
    assert versions["cuda"] == torch.version.cuda
    host = host_info()
    assert (host["os"], host["machine"], host["cpu_count"]) == (
        platform.platform(),
        platform.machine(),
        os.cpu_count(),
    )
    assert host["memory_bytes"] == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_seeds_read_lightnings_environment() -> None:
    torch.manual_seed(123)
    assert seeds({"PL_GLOBAL_SEED": "123", "PL_SEED_WORKERS": "1"}) == {
        "PL_GLOBAL_SEED": "123",
        "PL_SEED_WORKERS": "1",
        "torch_initial_seed": 123,
    }
    assert seeds({})["PL_GLOBAL_SEED"] is None


@dataclasses.dataclass
class _Recipe:
    lr: float = 3e-4
    betas: tuple[float, float] = (0.9, 0.99)


def _fn() -> None:
    pass


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (_Recipe(), {"lr": 3e-4, "betas": [0.9, 0.99]}),
        (Namespace(a=1, b="x"), {"a": 1, "b": "x"}),
        ({1: {2: (3,)}}, {"1": {"2": [3]}}),
        (frozenset({1}), [1]),
        (torch.arange(3), [0, 1, 2]),
        (torch.zeros(17), "Tensor(shape=[17], dtype=torch.float32)"),
        (None, None),
        (True, True),
        (torch.bfloat16, "torch.bfloat16"),
        (torch.device("cpu"), "cpu"),
        (Path("a/b"), "a/b"),
        (torch.optim.SGD, "torch.optim.sgd.SGD"),
        (_fn, f"{__name__}._fn"),
        (ValueError("x"), "ValueError('x')"),
    ],
)
def test_jsonable_table(value: Any, expected: Any) -> None:
    assert jsonable(value) == expected
    json.dumps(jsonable(value))


def test_loggable_turns_lists_into_json_strings_at_any_depth() -> None:
    manifest = {"a": [1, "x"], "b": {"c": [], "d": {"e": [None]}, "f": 2.5}, "g": None}
    assert loggable(manifest) == {
        "a": '[1, "x"]',
        "b": {"c": "[]", "d": {"e": "[null]"}, "f": 2.5},
        "g": None,
    }


def test_optimizer_record() -> None:
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.AdamW(
        [{"params": [model.weight], "weight_decay": 0.1}, {"params": [model.bias], "weight_decay": 0.0}],
        lr=1e-3,
    )
    record = optimizer_record(optimizer)
    assert record["class"] == "AdamW"
    assert [
        (g["lr"], g["weight_decay"], g["betas"], g["num_parameters"]) for g in record["param_groups"]
    ] == [
        (1e-3, 0.1, [0.9, 0.999], 12),
        (1e-3, 0.0, [0.9, 0.999], 3),
    ]


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
    record = combine_fingerprints(("aa", "bb"), 3)
    assert record == {
        "sha256": hashlib.sha256(b"aabb").hexdigest(),
        "per_rank": ["aa", "bb"],
        "batches": 3,
    }
