"""The multi-tensor CPU kernels of ``_cpu_kernels.c``, built once on Linux with the system C compiler, cached
under ``$LIGHTNING_RECIPES_CACHE_DIR``; off without a compiler or with ``LIGHTNING_RECIPES_NATIVE=0``."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import torch
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor
from torch.autograd.graph import increment_version

from lightning_recipes._warn_once import warn_once

__all__ = [
    "NATIVE_DTYPES",
    "NativeKernels",
    "bump_versions",
    "native_available",
    "native_kernels",
    "warn_if_native_missing",
]

NATIVE_DTYPES: dict[torch.dtype, str] = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16"}
_SOURCE = Path(__file__).with_name("_cpu_kernels.c")
_Ts = Sequence[Tensor]
_ISA_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mfma"],
    "AVX2": ["-mavx2", "-mfma"],
}
# LAMB's batches of consecutive tensors (8 MiB of p, g, m, v in fp32): its second pass reads from cache.
LAMB_BATCH_NUMEL = 1 << 19

_lock = threading.Lock()
_state: dict[str, NativeKernels | None] = {}


class NativeKernels:
    """The loaded kernels; they trust callers to pass contiguous CPU tensors of one :data:`NATIVE_DTYPES`."""

    def __init__(self, library: ctypes.CDLL, path: str) -> None:
        self.path = path
        pointers = ctypes.c_void_p
        self._lion = {}
        self._lamb = {}
        for suffix in NATIVE_DTYPES.values():
            lion = getattr(library, f"lion_{suffix}")
            lion.restype = None
            lion.argtypes = [ctypes.c_int64, pointers, pointers, pointers, pointers]
            lion.argtypes += [ctypes.c_double] * 4 + [ctypes.c_int]
            self._lion[suffix] = lion
            lamb = getattr(library, f"lamb_{suffix}")
            lamb.restype = ctypes.c_int
            lamb.argtypes = [ctypes.c_int64] + [pointers] * 6 + [ctypes.c_double] * 5
            lamb.argtypes += [ctypes.c_int, ctypes.c_double, ctypes.c_int, ctypes.c_int64]
            self._lamb[suffix] = lamb

    def lion(
        self, params: _Ts, grads: _Ts, exp_avgs: _Ts, *,
        lr: float, beta1: float, beta2: float, weight_decay: float,
    ) -> None:  # fmt: skip
        """One Lion step over all tensors (see :func:`~lightning_recipes.optim.lion_update_`)."""
        self._lion[NATIVE_DTYPES[params[0].dtype]](
            len(params), _pointers(params), _pointers(grads), _pointers(exp_avgs), _numels(params),
            lr, 1.0 - lr * weight_decay, 1.0 - beta1, 1.0 - beta2, torch.get_num_threads(),
        )  # fmt: skip

    def lamb(
        self, params: _Ts, grads: _Ts, exp_avgs: _Ts, exp_avg_sqs: _Ts, steps: _Ts, *, lr: float,
        beta1: float, beta2: float, eps: float, weight_decay: float, layer_adaptation: bool,
        trust_clip: float | None,
    ) -> None:  # fmt: skip
        """One LAMB step over all tensors (see :func:`~lightning_recipes.optim.lamb_update_`)."""
        status = self._lamb[NATIVE_DTYPES[params[0].dtype]](
            len(params), _pointers(params), _pointers(grads), _pointers(exp_avgs), _pointers(exp_avg_sqs),
            _pointers(steps), _numels(params), lr, beta1, beta2, eps, weight_decay, int(layer_adaptation),
            float("inf") if trust_clip is None else trust_clip, torch.get_num_threads(), LAMB_BATCH_NUMEL,
        )  # fmt: skip
        if status != 0:
            raise MemoryError(
                "lightning_recipes: the native LAMB kernel could not allocate its scratch space."
            )


def bump_versions(tensors: Sequence[Tensor]) -> None:
    """Tell autograd that the kernels changed ``tensors`` in place, as an in-place torch op would."""
    try:
        increment_version(tensors)  # one call for the list (torch >= 2.6)
    except TypeError:  # older torch takes one tensor at a time
        for tensor in tensors:
            increment_version(tensor)


def _pointers(tensors: Sequence[Tensor]) -> ctypes.Array[ctypes.c_void_p]:
    return (ctypes.c_void_p * len(tensors))(*[t.data_ptr() for t in tensors])


def _numels(tensors: Sequence[Tensor]) -> ctypes.Array[ctypes.c_int64]:
    return (ctypes.c_int64 * len(tensors))(*[t.numel() for t in tensors])


def native_available() -> bool:
    """Whether the native kernels can be (or were) built here; builds them on the first call."""
    return native_kernels() is not None


def native_kernels() -> NativeKernels | None:
    """The process-wide kernels, built and loaded on first use; ``None`` where they cannot be."""
    if "kernels" in _state:
        return _state["kernels"]
    with _lock:
        if "kernels" not in _state:
            _state["kernels"] = _load()
    return _state["kernels"]


def warn_if_native_missing() -> None:
    """Warn once when ``implementation="native"`` was asked for and the kernels cannot be built here."""
    if native_kernels() is not None or _disabled():
        return
    if not sys.platform.startswith("linux"):
        reason, fix = f"they are built on Linux only (this is {sys.platform})", ""
    elif _compiler() is None:
        reason = "no C compiler was found ($CC, cc, gcc, clang, c++, g++ or clang++ on PATH)"
        fix = "install gcc or clang (e.g. `apt-get install gcc`) or set $CC to one, "
    elif _torch_openmp_runtime() is None:
        reason, fix = "this torch build has no GNU OpenMP runtime to share", ""
    else:
        return
    warn_once(
        "lightning_recipes: implementation='native' was asked for, but the native CPU kernels are "
        f"unavailable: {reason}. Lion and Lamb run their 'for_loop' path instead (correct, slower). "
        f"To fix: {fix}or set implementation='foreach' (or 'auto') to choose a torch path and silence "
        "this warning."
    )


def _disabled() -> bool:
    return os.environ.get("LIGHTNING_RECIPES_NATIVE", "1").strip().lower() in ("0", "false", "off", "no")


def _compiler() -> str | None:
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang", "c++", "g++", "clang++"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def _torch_openmp_runtime() -> str | None:
    """The GNU OpenMP runtime file this process loaded for torch (we link the same one)."""
    if not torch.backends.openmp.is_available():
        return None
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    loaded = {
        fields[-1]
        for fields in (line.split() for line in maps.splitlines())
        if fields and "/libgomp" in fields[-1] and ".so" in fields[-1] and os.path.exists(fields[-1])
    }
    # other wheels bundle their own copy (scikit-learn does): prefer the one inside torch's install
    torch_root = os.path.realpath(os.path.dirname(os.path.dirname(torch.__file__)))  # maps shows real paths
    ours = sorted(p for p in loaded if os.path.relpath(p, torch_root).startswith(("torch/", "torch.libs/")))
    if ours:
        return ours[0]
    return loaded.pop() if len(loaded) == 1 else None


def _cache_dir() -> Path:
    configured = os.environ.get("LIGHTNING_RECIPES_CACHE_DIR")
    if configured:
        return Path(configured) / "kernels"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lightning_recipes" / "kernels"


def _build_command(compiler: str, openmp: str, isa_flags: list[str], output: str) -> list[str]:
    # "-x c": the source is C even for a C++ driver; torch's own OpenMP file: one shared thread pool
    return [
        compiler, "-O3", "-std=gnu11", "-fno-math-errno", "-fopenmp", "-shared", "-fPIC", *isa_flags,
        "-x", "c", str(_SOURCE), "-x", "none", "-o", output, openmp,
        f"-Wl,-rpath,{os.path.dirname(openmp)}", "-lm",
    ]  # fmt: skip


def _load() -> NativeKernels | None:
    if _disabled() or not sys.platform.startswith("linux"):
        return None
    compiler, openmp = _compiler(), _torch_openmp_runtime()
    if compiler is None or openmp is None or not _SOURCE.exists():
        return None
    isa = torch.backends.cpu.get_cpu_capability()
    errors: list[str] = []
    for isa_flags in (_ISA_FLAGS.get(isa, []), []):
        try:
            path = _build(compiler, openmp, isa_flags)
            try:
                library = ctypes.CDLL(path)
            except OSError:  # a damaged cache entry: build it again, once
                Path(path).unlink(missing_ok=True)
                path = _build(compiler, openmp, isa_flags)
                library = ctypes.CDLL(path)
            return NativeKernels(library, path)
        except Exception as error:  # whatever goes wrong, the torch paths still work: warn and use them
            errors.append(f"{type(error).__name__}: {error}")
        if not isa_flags:
            break
    rank_zero_warn(
        "lightning_recipes: building the native CPU optimizer kernels failed, so Lion and Lamb use their "
        f"torch paths (correct, slower). Set LIGHTNING_RECIPES_NATIVE=0 to skip the attempt. Errors: {errors}"
    )
    return None


def _build(compiler: str, openmp: str, isa_flags: list[str]) -> str:
    version = subprocess.run(
        [compiler, "--version"], capture_output=True, text=True, errors="replace", timeout=60
    ).stdout
    key = hashlib.sha256(
        "\0".join([_SOURCE.read_text(), compiler, version, openmp, *isa_flags]).encode()
    ).hexdigest()[:20]
    for directory in (_cache_dir(), Path(tempfile.gettempdir()) / f"lightning_recipes-{os.getuid()}"):
        target = directory / f"cpu_kernels-{key}.so"
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            continue  # not writable: try the next one
        if not _private(directory):
            continue  # never load code from a directory that someone else can write to
        if target.exists():
            return str(target)
        partial = directory / f".cpu_kernels-{key}.{os.getpid()}.{threading.get_ident()}.so"
        try:
            result = subprocess.run(
                _build_command(compiler, openmp, isa_flags, str(partial)),
                capture_output=True,
                text=True,
                errors="replace",  # compilers print in the locale's encoding
                timeout=300,
            )
            if result.returncode != 0:
                raise subprocess.SubprocessError(result.stderr.strip()[-2000:])
            os.replace(partial, target)  # atomic: a rank building the same key at the same time is harmless
        finally:
            partial.unlink(missing_ok=True)
        return str(target)
    raise OSError("no private, writable cache directory for the native kernels")


def _private(directory: Path) -> bool:
    """Owned by this user and writable by no one else (shared temp directories are not)."""
    info = directory.stat()
    return info.st_uid == os.getuid() and not info.st_mode & 0o022
