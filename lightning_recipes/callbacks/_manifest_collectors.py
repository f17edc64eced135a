"""RunManifest's Trainer-free collectors: git state, versions, host, seeds, batch hashing."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import socket
import subprocess
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

import torch
from torch import Tensor

from lightning_recipes._jsonable import jsonable

__all__ = [
    "LIBRARIES",
    "combine_fingerprints",
    "git_info",
    "hash_batch",
    "host_info",
    "library_versions",
    "loggable",
    "optimizer_record",
    "run_git",
    "seeds",
    "total_memory",
]

#: Libraries whose versions the manifest records (when installed), by import name.
LIBRARIES = (
    "lightning_recipes",
    "torch",
    "lightning",
    "torchmetrics",
    "numpy",
    "wandb",
    "tensorboard",
    "deepspeed",
    "scikit-learn",
    "matplotlib",
)
_DISTRIBUTIONS = {"lightning_recipes": "lightning-recipes"}
_GIT_TIMEOUT_S = 10


def run_git(repo_dir: str, *args: str) -> str | None:
    """``git <args>`` in ``repo_dir``: its stdout, or ``None`` if git is missing, fails or times out."""
    try:
        result = subprocess.run(
            ["git", *args], cwd=repo_dir, capture_output=True, text=True, timeout=_GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def git_info(repo_dir: str) -> dict[str, Any] | None:
    """Commit, branch and dirty flag of the repository containing ``repo_dir``; ``None`` outside one.

    ``dirty`` counts tracked files only (untracked files are not code the run imported, as a rule);
    ``diff_sha256`` is the SHA-256 of ``git diff HEAD`` when dirty; ``changed_files`` lists at most 100.
    Cost: four ``git`` subprocess calls.

    Example:
        >>> import tempfile
        >>> git_info(tempfile.mkdtemp()) is None  # not a repository
        True
    """
    commit = run_git(repo_dir, "rev-parse", "HEAD")
    if commit is None:
        return None
    branch = run_git(repo_dir, "rev-parse", "--abbrev-ref", "HEAD")
    status = run_git(repo_dir, "status", "--porcelain", "--untracked-files=no") or ""
    changed = [line[3:] for line in status.splitlines() if line.strip()]
    diff = run_git(repo_dir, "diff", "HEAD") or ""
    return {
        "commit": commit.strip(),
        "branch": branch.strip() if branch else None,
        "dirty": bool(changed),
        "diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if changed else None,
        "changed_files": changed[:100],
    }


def library_versions() -> dict[str, Any]:
    """Python's version, each installed library of :data:`LIBRARIES`, and torch's CUDA / cuDNN builds.

    Example:
        >>> versions = library_versions()
        >>> versions["python"] == platform.python_version(), versions["torch"] == metadata.version("torch")
        (True, True)
    """
    versions: dict[str, Any] = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(_DISTRIBUTIONS.get(name, name))
        except metadata.PackageNotFoundError:
            continue
    versions["cuda"] = torch.version.cuda
    versions["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return versions


def total_memory() -> int | None:
    """Physical memory in bytes (``None`` where ``sysconf`` cannot tell)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def host_info() -> dict[str, Any]:
    """Host name, OS, CPU architecture and count, memory, and CUDA device names when CUDA is available.

    Example:
        >>> info = host_info()
        >>> info["cpu_count"] == os.cpu_count(), info["machine"] == platform.machine()
        (True, True)
    """
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": total_memory(),
    }
    if torch.cuda.is_available():
        info["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


def seeds(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The seeds Lightning's ``seed_everything`` leaves behind (``PL_GLOBAL_SEED``, ``PL_SEED_WORKERS``) and
    ``torch.initial_seed()``.

    Example:
        >>> seeds({"PL_GLOBAL_SEED": "7"})["PL_GLOBAL_SEED"], seeds({})["PL_SEED_WORKERS"]
        ('7', None)
    """
    environ = os.environ if environ is None else environ
    return {
        "PL_GLOBAL_SEED": environ.get("PL_GLOBAL_SEED"),
        "PL_SEED_WORKERS": environ.get("PL_SEED_WORKERS"),
        "torch_initial_seed": torch.initial_seed(),
    }


def optimizer_record(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Class and per-group settings of ``optimizer``, each group with its parameter count instead of params.

    Example:
        >>> model = torch.nn.Linear(3, 2)
        >>> groups = [{"params": [model.weight]}, {"params": [model.bias]}]
        >>> record = optimizer_record(torch.optim.SGD(groups, lr=0.1))
        >>> record["class"], [(g["lr"], g["num_parameters"]) for g in record["param_groups"]]
        ('SGD', [(0.1, 6), (0.1, 2)])
    """
    groups = []
    for group in optimizer.param_groups:
        settings = {key: jsonable(value) for key, value in group.items() if key != "params"}
        settings["num_parameters"] = sum(p.numel() for p in group["params"])
        groups.append(settings)
    record: dict[str, Any] = {"class": type(optimizer).__name__, "param_groups": groups}
    if hasattr(optimizer, "implementation_used"):  # ours: the path that ran (None before the first step)
        record["implementation_used"] = optimizer.implementation_used
    return record


def loggable(manifest: dict[str, Any]) -> dict[str, Any]:
    """Lists become JSON strings: TensorBoard's hparams accept only scalars, and wandb's config UI reads them.

    Example:
        >>> loggable({"git": {"changed_files": ["a.py"], "dirty": True}, "seed": 3})
        {'git': {'changed_files': '["a.py"]', 'dirty': True}, 'seed': 3}
    """
    out: dict[str, Any] = {}
    for key, value in manifest.items():
        if isinstance(value, dict):
            out[key] = loggable(value)
        elif isinstance(value, list):
            out[key] = json.dumps(value, default=str)
        else:
            out[key] = value
    return out


def hash_batch(hasher: Any, batch: Any) -> None:
    """Feed a batch (tensors in nested lists/tuples/dicts/dataclasses, numbers, strings) into ``hasher``.

    Each tensor contributes ``T<dtype><shape>`` and its bytes (copied to host memory: one sync per tensor on
    an accelerator); mappings ``M`` and their keys in sorted order; sequences ``L<length>``; other leaves
    their ``repr``.

    Example:
        >>> a, b = hashlib.sha256(), hashlib.sha256()
        >>> hash_batch(a, {"y": torch.tensor([1]), "x": [2.0, "s"]})
        >>> hash_batch(b, {"x": [2.0, "s"], "y": torch.tensor([1])})  # key order does not matter
        >>> a.hexdigest() == b.hexdigest()
        True
    """
    if isinstance(batch, Tensor):
        tensor = batch.detach().to("cpu").contiguous()
        hasher.update(f"T{tensor.dtype}{tuple(tensor.shape)}".encode())
        if tensor.numel():
            hasher.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(batch, Mapping):
        hasher.update(b"M")
        for key in sorted(batch, key=str):
            hasher.update(str(key).encode())
            hash_batch(hasher, batch[key])
    elif isinstance(batch, (list, tuple)):
        hasher.update(f"L{len(batch)}".encode())
        for item in batch:
            hash_batch(hasher, item)
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        hash_batch(hasher, {f.name: getattr(batch, f.name) for f in dataclasses.fields(batch)})
    else:
        hasher.update(repr(batch).encode())


def combine_fingerprints(per_rank: Sequence[str], batches: int) -> dict[str, Any]:
    """The manifest's ``data_fingerprint``: SHA-256 over the ranks' hex digests in rank order.

    Example:
        >>> record = combine_fingerprints(["ab", "cd"], batches=2)
        >>> record["sha256"] == hashlib.sha256(b"abcd").hexdigest(), record["per_rank"], record["batches"]
        (True, ['ab', 'cd'], 2)
    """
    combined = hashlib.sha256("".join(per_rank).encode()).hexdigest()
    return {"sha256": combined, "per_rank": list(per_rank), "batches": batches}
