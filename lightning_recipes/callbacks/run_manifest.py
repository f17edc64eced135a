"""A record of everything needed to understand and reproduce a training run, written at fit start."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from lightning.pytorch.utilities.rank_zero import rank_zero_warn
from torch import Tensor
from typing_extensions import override

from lightning_recipes._collectives import gather_rows
from lightning_recipes._jsonable import jsonable
from lightning_recipes._validation import check_bool, check_int
from lightning_recipes.harness.loaders import loader_batch_size

__all__ = ["RunManifest"]


class RunManifest(Callback):
    """Records what another engineer needs to understand and reproduce the run, and logs it everywhere.

    At train start: the code version (git commit, branch, dirty flag, diff hash, from ``repo_dir``), hyper-
    parameters and any ``recipe``, optimizers, schedulers, seeds, library versions, hardware, strategy,
    precision, world size and effective batch size, then a SHA-256 of the first ``fingerprint_batches``
    training batches on every rank. Written as ``filename`` in ``dirpath`` (default: the first logger's run
    directory, as ``ModelCheckpoint`` finds it, else ``default_root_dir``) on rank zero, logged once to every
    logger under ``manifest`` (``log_to_loggers``), kept as :attr:`manifest`; ``extra`` is stored under
    ``extra``; a resumed run names the run it resumed from (``resumed_from``).

    Example:
        >>> import json, tempfile
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> root = tempfile.mkdtemp()
        >>> trainer = fast_trainer(max_steps=3, callbacks=[RunManifest()], default_root_dir=root)
        >>> trainer.fit(TinyClassifier(), random_classification_loader())
        >>> record = json.load(open(f"{root}/manifest.json"))
        >>> record["trainer"]["effective_batch_size"], record["data_fingerprint"]["batches"]
        (32, 2)
    """

    def __init__(
        self,
        dirpath: str | os.PathLike[str] | None = None,
        filename: str = "manifest.json",
        fingerprint_batches: int = 2,
        repo_dir: str | os.PathLike[str] | None = None,
        extra: Mapping[str, Any] | None = None,
        log_to_loggers: bool = True,
    ) -> None:
        super().__init__()
        check_int("fingerprint_batches", fingerprint_batches, minimum=0)
        if (
            not isinstance(filename, str)
            or not filename
            or any(s and s in filename for s in (os.sep, os.altsep))
        ):
            raise ValueError(f"`filename` must be a plain file name, got {filename!r}.")
        for name, path in (("dirpath", dirpath), ("repo_dir", repo_dir)):
            if path is not None and not isinstance(path, (str, os.PathLike)):
                raise TypeError(f"`{name}` must be a path (str or os.PathLike) or None, got {path!r}.")
        if extra is not None and not isinstance(extra, Mapping):
            raise TypeError(f"`extra` must be a mapping or None, got {type(extra).__name__}.")
        check_bool("log_to_loggers", log_to_loggers)
        self.dirpath = None if dirpath is None else os.fspath(dirpath)
        self.filename = filename
        self.fingerprint_batches = fingerprint_batches
        self.repo_dir = None if repo_dir is None else os.fspath(repo_dir)
        self.extra = dict(extra) if extra is not None else {}
        self.log_to_loggers = log_to_loggers
        self.manifest: dict[str, Any] = {}
        self.path: Path | None = None
        self._hasher: Any = None
        self._hashed = 0
        self._logged = False
        self._previous: dict[str, Any] | None = None
        self._implementations_pending = False

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        dirpath = self.dirpath if self.dirpath is not None else _run_dir(trainer)  # collective: all ranks
        self.manifest = self._collect(trainer, pl_module)
        self._implementations_pending = _implementations_pending(self.manifest)
        self.path = Path(dirpath or trainer.default_root_dir) / self.filename
        self._hasher = hashlib.sha256()
        self._hashed = 0
        self._logged = False
        if self.fingerprint_batches == 0:
            self.manifest["data_fingerprint"] = None
            self._finish(trainer)
        else:
            self.manifest["data_fingerprint"] = {"status": "pending"}
            self._write(trainer)

    @override
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self._logged or self._hasher is None or self._hashed >= self.fingerprint_batches:
            return
        hash_batch(self._hasher, batch)  # sync: copies this batch to host memory, first batches only
        self._hashed += 1
        if self._hashed == self.fingerprint_batches:
            self._finish(trainer)

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._implementations_pending:  # known after the first optimizer step: record it, write once
            self._implementations_pending = _record_implementations(trainer, self.manifest)
            if not self._implementations_pending:
                self._write(trainer)

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self._logged and self._hasher is not None:
            self._finish(trainer)  # the run had fewer batches than `fingerprint_batches`

    @override
    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        if self.manifest and not self._logged:
            # No collective here: other ranks may be gone. Record the local state of the fingerprint.
            if self._hasher is not None and self._hashed:
                self.manifest["data_fingerprint"] = {
                    "status": "incomplete",
                    "batches": self._hashed,
                    "rank_sha256": self._hasher.hexdigest(),
                }
            self.manifest["exception"] = f"{type(exception).__name__}: {exception}"
            self._write(trainer)

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"manifest": self.manifest}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        previous = state_dict.get("manifest") or {}
        if previous:
            fingerprint = previous.get("data_fingerprint") or {}
            self._previous = {
                "created_at": previous.get("created_at"),
                "git_commit": (previous.get("git") or {}).get("commit"),
                "data_fingerprint": fingerprint.get("sha256") if isinstance(fingerprint, dict) else None,
            }

    def add_record(self, trainer: pl.Trainer, section: str, record: Mapping[str, Any]) -> None:
        """Append ``record`` to the manifest's list ``section`` (another callback's action during the run,
        e.g. ``HealthMonitor``'s repairs) and rewrite the file on rank zero.

        Example:
            >>> from lightning_recipes.testing import fast_trainer
            >>> manifest = RunManifest()
            >>> manifest.add_record(fast_trainer(), "health_repairs", {"step": 40, "action": "raise_lr"})
            >>> manifest.manifest["health_repairs"]
            [{'step': 40, 'action': 'raise_lr'}]
        """
        self.manifest.setdefault(section, []).append(jsonable(dict(record)))
        self._write(trainer)

    def _finish(self, trainer: pl.Trainer) -> None:
        if self.fingerprint_batches:
            self.manifest["data_fingerprint"] = _gather_fingerprint(trainer, self._hasher, self._hashed)
        self._hasher = None
        self._logged = True
        self._write(trainer)
        if self.log_to_loggers and trainer.is_global_zero:
            for logger in trainer.loggers:
                logger.log_hyperparams({"manifest": loggable(self.manifest)})

    def _write(self, trainer: pl.Trainer) -> None:
        if not trainer.is_global_zero or self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.manifest, indent=2, sort_keys=False, default=str) + "\n")
        os.replace(tmp, self.path)

    def _collect(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        manifest: dict[str, Any] = {
            "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "command": {"argv": list(sys.argv), "cwd": os.getcwd()},
            "git": git_info(self.repo_dir or os.getcwd()),
            "hparams": jsonable(dict(pl_module.hparams)),
        }
        datamodule = getattr(trainer, "datamodule", None)
        if datamodule is not None and getattr(datamodule, "hparams", None):
            manifest["datamodule_hparams"] = jsonable(dict(datamodule.hparams))
        recipe = getattr(pl_module, "recipe", None)
        if recipe is not None:
            manifest["recipe"] = jsonable(recipe)
        cli_config = _cli_config(trainer)
        if cli_config is not None:
            manifest["cli_config"] = cli_config
        manifest["optimizers"] = _optimizers(trainer)
        manifest["seeds"] = seeds()
        manifest["versions"] = library_versions()
        manifest["hardware"] = _hardware(trainer)
        manifest["trainer"] = _trainer_info(trainer)
        manifest["model"] = {
            "class": f"{type(pl_module).__module__}.{type(pl_module).__qualname__}",
            "parameters": sum(p.numel() for p in pl_module.parameters()),
            "trainable_parameters": sum(p.numel() for p in pl_module.parameters() if p.requires_grad),
        }
        if self._previous:
            manifest["resumed_from"] = self._previous
        if self.extra:
            manifest["extra"] = jsonable(self.extra)
        return manifest


def _run_dir(trainer: pl.Trainer) -> str | None:
    """``trainer.log_dir``, but for loggers other than TensorBoard/CSV (whose ``log_dir`` is their shared
    ``save_dir``) the run's own ``save_dir/name/version`` folder, as Lightning's ``ModelCheckpoint`` uses."""
    log_dir = trainer.log_dir  # a broadcast: every rank must call it
    logger = trainer.loggers[0] if trainer.loggers else None
    if logger is None or isinstance(logger, (CSVLogger, TensorBoardLogger)) or not trainer.is_global_zero:
        return log_dir
    save_dir, name, version = logger.save_dir, logger.name, logger.version
    if save_dir is None or name is None or version is None:
        return log_dir
    return os.path.join(save_dir, str(name), version if isinstance(version, str) else f"version_{version}")


def _cli_config(trainer: pl.Trainer) -> dict[str, Any] | None:
    """The full LightningCLI configuration (YAML, CLI flags and defaults), when the run was started by one."""
    from lightning.pytorch.cli import SaveConfigCallback

    for callback in getattr(trainer, "callbacks", []):
        if isinstance(callback, SaveConfigCallback):
            try:
                import yaml

                dumped = callback.parser.dump(callback.config, skip_none=False)
                return jsonable(yaml.safe_load(dumped))
            except Exception as err:  # a config that cannot be dumped must not stop training
                return {"error": f"could not dump the LightningCLI config: {type(err).__name__}: {err}"}
    return None


def _hardware(trainer: pl.Trainer) -> dict[str, Any]:
    info = host_info()
    cuda_devices = info.pop("cuda_devices", None)
    info.update(accelerator=type(trainer.accelerator).__name__, root_device=str(trainer.strategy.root_device))
    if cuda_devices is not None:  # the key order of manifests written before the collectors moved
        info["cuda_devices"] = cuda_devices
    return info


def _per_device_batch_size(trainer: pl.Trainer) -> int | None:
    loader = trainer.train_dataloader
    if isinstance(loader, Mapping):
        loader = list(loader.values())
    sizes = [loader_batch_size(item) for item in (loader if isinstance(loader, (list, tuple)) else [loader])]
    known = [size for size in sizes if size is not None]
    return (sum(known) or None) if len(known) == len(sizes) else None


def _trainer_info(trainer: pl.Trainer) -> dict[str, Any]:
    per_device = _per_device_batch_size(trainer)
    accumulation = trainer.accumulate_grad_batches
    stepping = trainer.estimated_stepping_batches
    return {
        "strategy": type(trainer.strategy).__name__,
        "strategy_preset": getattr(trainer.strategy, "preset_name", None),
        "precision": str(trainer.precision),
        "world_size": trainer.world_size,
        "num_nodes": trainer.num_nodes,
        "num_devices": trainer.num_devices,
        "accumulate_grad_batches": accumulation,
        "per_device_batch_size": per_device,
        "effective_batch_size": None
        if per_device is None
        else per_device * trainer.world_size * accumulation,
        "max_steps": trainer.max_steps,
        "max_epochs": trainer.max_epochs,
        "estimated_stepping_batches": None if math.isinf(stepping) else int(stepping),
        "gradient_clip_val": trainer.gradient_clip_val,
        "gradient_clip_algorithm": trainer.gradient_clip_algorithm,
        "log_every_n_steps": getattr(trainer, "log_every_n_steps", None),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "callbacks": [type(callback).__name__ for callback in getattr(trainer, "callbacks", [])],
        "loggers": [type(logger).__name__ for logger in trainer.loggers],
        "ckpt_path": None if trainer.ckpt_path is None else str(trainer.ckpt_path),
    }


def _optimizers(trainer: pl.Trainer) -> list[dict[str, Any]]:
    records = [optimizer_record(optimizer) for optimizer in trainer.optimizers]
    schedulers = [
        {"class": type(config.scheduler).__name__, "interval": config.interval, "frequency": config.frequency}
        for config in trainer.lr_scheduler_configs
    ]
    if schedulers and records:
        records[0]["lr_schedulers"] = schedulers
    return records


def _implementations_pending(manifest: dict[str, Any]) -> bool:
    return any(r.get("implementation_used", "") is None for r in manifest.get("optimizers", []))


def _record_implementations(trainer: pl.Trainer, manifest: dict[str, Any]) -> bool:
    """Fill in each of our optimizers' ``implementation_used`` once it has stepped; whether any is pending."""
    for record, optimizer in zip(manifest.get("optimizers", []), trainer.optimizers):
        if record.get("implementation_used", "") is None:
            record["implementation_used"] = getattr(optimizer, "implementation_used", None)
    return _implementations_pending(manifest)


def _gather_fingerprint(trainer: pl.Trainer, hasher: Any, batches: int) -> dict[str, Any]:
    """Combine every rank's batch hash (one ``all_gather`` when there are several processes)."""
    rows = gather_rows(trainer, list(bytes.fromhex(hasher.hexdigest())))  # the digest's bytes; sync: once
    per_rank = [bytes(int(b) for b in row).hex() for row in rows]
    if batches == 0:
        rank_zero_warn("RunManifest saw no training batch: the data fingerprint hashes nothing.")
    return combine_fingerprints(per_rank, batches)


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
    """Commit, branch, dirty flag (tracked files), ``diff_sha256`` and at most 100 ``changed_files`` of the
    repository containing ``repo_dir``; ``None`` outside one."""
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
    """Python's version, each installed library of :data:`LIBRARIES`, and torch's CUDA / cuDNN builds."""
    versions: dict[str, Any] = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(_DISTRIBUTIONS.get(name, name))
        except metadata.PackageNotFoundError:
            continue
    versions["cuda"] = torch.version.cuda
    versions["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return versions


def host_info() -> dict[str, Any]:
    """Host name, OS, CPU architecture and count, memory, and CUDA device names when CUDA is available."""
    try:
        memory: int | None = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):  # sysconf cannot tell
        memory = None
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": memory,
    }
    if torch.cuda.is_available():
        info["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


def seeds(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The seeds Lightning's ``seed_everything`` leaves behind (``PL_GLOBAL_SEED``, ``PL_SEED_WORKERS``) and
    ``torch.initial_seed()``."""
    environ = os.environ if environ is None else environ
    return {
        "PL_GLOBAL_SEED": environ.get("PL_GLOBAL_SEED"),
        "PL_SEED_WORKERS": environ.get("PL_SEED_WORKERS"),
        "torch_initial_seed": torch.initial_seed(),
    }


def optimizer_record(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Class and per-group settings of ``optimizer``, a parameter count in place of each group's params."""
    groups = [
        {key: jsonable(value) for key, value in group.items() if key != "params"}
        | {"num_parameters": sum(p.numel() for p in group["params"])}
        for group in optimizer.param_groups
    ]
    record: dict[str, Any] = {"class": type(optimizer).__name__, "param_groups": groups}
    if hasattr(optimizer, "implementation_used"):  # ours: the path that ran (None before the first step)
        record["implementation_used"] = optimizer.implementation_used
    return record


def loggable(manifest: dict[str, Any]) -> dict[str, Any]:
    """Lists become JSON strings: TensorBoard's hparams take only scalars; wandb's config UI reads them."""
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
    """Feed a batch (nested tensors, numbers, strings) into ``hasher``: tensors as dtype, shape and bytes,
    mappings in sorted key order, other leaves by ``repr``."""
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
    """The manifest's ``data_fingerprint``: SHA-256 over the ranks' hex digests in rank order."""
    combined = hashlib.sha256("".join(per_rank).encode()).hexdigest()
    return {"sha256": combined, "per_rank": list(per_rank), "batches": batches}
