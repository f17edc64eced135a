"""The native multi-tensor CPU kernels."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch

from lightning_recipes.optim import Lamb, Lion, _native, lamb_update_, lion_update_
from lightning_recipes.optim._native import LAMB_BATCH_NUMEL
from lightning_recipes.testing import fast_trainer
from tests.helpers import optim_runs
from tests.optim._reference import grads_sequence, lamb_reference_step, lion_reference_step

pytestmark = optim_runs.NATIVE_BUILT

# Sizes that cross thread shares, vector widths and LAMB batches at awkward places (empty, 1, > a batch)
AWKWARD_SIZES = [1, 0, 63, 65, 4099, 70_001, 3, LAMB_BATCH_NUMEL + 37, 129, 200_003, 17]


def _tensors(sizes, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(n, generator=generator, dtype=torch.float64).to(dtype) for n in sizes]


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path) -> Path:
    """An empty kernel cache in ``tmp_path``, and nothing loaded yet in this process."""
    monkeypatch.setenv("LIGHTNING_RECIPES_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_native, "_state", {})
    return tmp_path


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_lion_native_matches_the_reference_across_thread_shares_float64(two_threads):
    params = _tensors(AWKWARD_SIZES, torch.float64, seed=1)
    exp_avgs = [torch.zeros_like(p) for p in params]
    ref_p, ref_m = [p.clone() for p in params], [m.clone() for m in exp_avgs]
    for grads in grads_sequence([(n,) for n in AWKWARD_SIZES], 4, seed=2):
        hyper = {"lr": 1e-2, "beta1": 0.9, "beta2": 0.99}
        lion_update_(params, grads, exp_avgs, **hyper, weight_decay=0.3, implementation="native")
        for i, g in enumerate(grads):
            ref_p[i], ref_m[i] = lion_reference_step(ref_p[i], g, ref_m[i], **hyper, wd=0.3)
    for p, r, m, rm in zip(params, ref_p, exp_avgs, ref_m):
        torch.testing.assert_close(p, r, rtol=0, atol=1e-12)
        torch.testing.assert_close(m, rm, rtol=0, atol=1e-12)


@pytest.mark.parametrize("trust_clip", [None, 0.7])
@pytest.mark.parametrize("layer_adaptation", [True, False])
def test_lamb_native_matches_the_reference_across_batches_and_shares_float64(
    two_threads, layer_adaptation, trust_clip
):
    params = _tensors(AWKWARD_SIZES, torch.float64, seed=3)
    params[3].zero_()  # a zero weight norm: trust ratio 1
    exp_avgs = [torch.zeros_like(p) for p in params]
    exp_avg_sqs = [torch.zeros_like(p) for p in params]
    steps = [torch.zeros((), dtype=torch.float32) for _ in params]
    ref = [(p.clone(), torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    hyper = {"lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-6}
    for t, grads in enumerate(grads_sequence([(n,) for n in AWKWARD_SIZES], 4, seed=4), start=1):
        lamb_update_(
            params, grads, exp_avgs, exp_avg_sqs, steps, **hyper, weight_decay=0.05,
            layer_adaptation=layer_adaptation, trust_clip=trust_clip, implementation="native",
        )  # fmt: skip
        options = {"wd": 0.05, "adapt": layer_adaptation, "trust_clip": trust_clip}
        ref = [lamb_reference_step(p, g, m, v, t, **hyper, **options) for (p, m, v), g in zip(ref, grads)]
    assert all(float(s) == 4 for s in steps)
    for p, m, v, (rp, rm, rv) in zip(params, exp_avgs, exp_avg_sqs, ref):
        torch.testing.assert_close(p, rp, rtol=0, atol=1e-10)
        torch.testing.assert_close(m, rm, rtol=0, atol=1e-12)
        torch.testing.assert_close(v, rv, rtol=0, atol=1e-12)


def _native_float32_step(optimizer: str, implementation: str, layer_adaptation: bool) -> list[torch.Tensor]:
    """One float32 step over AWKWARD_SIZES from fixed seeds; the updated tensors."""
    grads, params, exp_avgs = (_tensors(AWKWARD_SIZES, seed=seed) for seed in (20, 21, 22))
    if optimizer == "lion":
        lion_update_(
            params, grads, exp_avgs, lr=1e-3, beta1=0.9, beta2=0.99, weight_decay=0.1,
            implementation=implementation,
        )  # fmt: skip
        return params + exp_avgs
    exp_avg_sqs = [t.abs() for t in _tensors(AWKWARD_SIZES, seed=23)]
    steps = [torch.full((), 3.0) for _ in AWKWARD_SIZES]
    lamb_update_(
        params, grads, exp_avgs, exp_avg_sqs, steps, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-6,
        weight_decay=0.01, layer_adaptation=layer_adaptation, implementation=implementation,
    )  # fmt: skip
    return params + exp_avgs + exp_avg_sqs


@pytest.mark.parametrize(("optimizer", "layer_adaptation"), [("lion", True), ("lamb", True), ("lamb", False)])
def test_native_float32_is_bitwise_the_same_on_any_thread_count(optimizer, layer_adaptation):
    """Lion is elementwise, LAMB adds block sums in block order: no dependence on the thread count."""
    results = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            results.append(_native_float32_step(optimizer, "native", layer_adaptation))
    finally:
        torch.set_num_threads(before)
    for other in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], other))
    if optimizer == "lion":
        for x, y in zip(results[0], _native_float32_step(optimizer, "for_loop", layer_adaptation)):
            torch.testing.assert_close(x, y, rtol=1e-6, atol=1e-7)


def _three_ways(dtype: torch.dtype) -> list[tuple[str, torch.dtype, str]]:
    """(label, dtype, implementation): the kernel, the loop, and the loop in float64 as the reference."""
    return [("native", dtype, "native"), ("for_loop", dtype, "for_loop"), ("ref", torch.float64, "for_loop")]


def test_lamb_native_float32_is_closer_to_float64_than_the_loop(two_threads):
    sizes = [300_000, 1000, 7]
    params, grads = _tensors(sizes, seed=8), _tensors(sizes, seed=9)
    exp_avgs, exp_avg_sqs = _tensors(sizes, seed=10), [t.abs() for t in _tensors(sizes, seed=11)]
    results = {}
    for label, dtype, implementation in _three_ways(torch.float32):
        state = [[t.clone().to(dtype) for t in lst] for lst in (params, grads, exp_avgs, exp_avg_sqs)]
        steps = [torch.full((), 5.0) for _ in sizes]
        lamb_update_(*state, steps, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.01,
                     implementation=implementation)  # fmt: skip
        results[label] = state[0]
    for native, loop, ref, start in zip(results["native"], results["for_loop"], results["ref"], params):
        scale = float((ref - start.double()).abs().max())  # the size of the update
        native_error = float((native.double() - ref).abs().max()) / scale
        loop_error = float((loop.double() - ref).abs().max()) / scale
        assert native_error <= max(loop_error, 1e-4)


def test_lion_bfloat16_is_computed_in_float32_and_rounded_once(two_threads):
    sizes = [70_001, 5]
    exact = [torch.nn.Parameter(t.to(torch.bfloat16).float()) for t in _tensors(sizes, seed=12)]
    low = [torch.nn.Parameter(t.detach().to(torch.bfloat16)) for t in exact]  # the same values
    grads = _tensors(sizes, torch.bfloat16, seed=13)
    for ps in (exact, low):
        for p, g in zip(ps, grads):
            p.grad = g.to(p.dtype)
        Lion(ps, lr=1e-2, weight_decay=0.1, implementation="native").step()
    for e, lo in zip(exact, low):
        assert lo.dtype == torch.bfloat16
        rounded_once = e.detach().to(torch.bfloat16)  # the float32 result, rounded to nearest even
        mismatched = (lo.detach() != rounded_once).sum()
        # the float32 arithmetic may contract to fused multiply-adds: then a value close to a rounding tie
        # may round the other way, by one bf16 ulp at most
        assert int(mismatched) <= lo.numel() // 1000
        torch.testing.assert_close(lo.detach().float(), e.detach(), rtol=2**-8, atol=0)


def test_lamb_bfloat16_is_at_least_as_accurate_as_the_loop(two_threads):
    sizes = [70_001, 300, 5]
    start = [t.to(torch.bfloat16) for t in _tensors(sizes, seed=14)]
    grads = [_tensors(sizes, torch.bfloat16, seed=15 + k) for k in range(3)]
    results = {}
    for label, dtype, implementation in _three_ways(torch.bfloat16):
        params = [t.to(dtype) for t in start]
        exp_avgs, exp_avg_sqs = [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]
        steps = [torch.zeros(()) for _ in params]
        for step_grads in grads:
            lamb_update_(
                params, [g.to(dtype) for g in step_grads], exp_avgs, exp_avg_sqs, steps, lr=1e-2, beta1=0.9,
                beta2=0.999, eps=1e-6, weight_decay=0.1, implementation=implementation,
            )  # fmt: skip
        results[label] = params
    for native, loop, ref in zip(results["native"], results["for_loop"], results["ref"]):
        native_error = float((native.double() - ref).abs().mean())
        loop_error = float((loop.double() - ref).abs().mean())
        assert native_error <= loop_error


def test_tensors_the_kernels_cannot_take_use_the_loop_in_the_same_step():
    half = torch.nn.Parameter(torch.randn(6, 4, dtype=torch.float16))
    strided = torch.nn.Parameter(torch.randn(5, 7))
    plain = torch.nn.Parameter(torch.randn(9))
    params = [half, strided, plain]
    start = [p.detach().double().clone() for p in params]
    optimizer = Lion(params, lr=0.25, implementation="native")
    half.grad = torch.ones_like(half)
    strided.grad = torch.ones(7, 5).t()  # a non-contiguous gradient
    plain.grad = torch.ones_like(plain)
    optimizer.step()
    for p, s in zip(params, start):  # sign(c) = 1 everywhere: every parameter moves by exactly -lr
        torch.testing.assert_close(p.detach().double(), s - 0.25, atol=1e-3, rtol=0)


def test_lamb_counters_that_are_not_float32_use_the_loop():
    params, grads = _tensors([50, 60], torch.float64, seed=14), _tensors([50, 60], torch.float64, seed=15)
    exp_avgs = [torch.zeros_like(p) for p in params]
    exp_avg_sqs = [torch.zeros_like(p) for p in params]
    steps = [torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.float32)]
    ref = [lamb_reference_step(p, g, torch.zeros_like(p), torch.zeros_like(p), 1, lr=1e-2, beta1=0.9,
                               beta2=0.999, eps=1e-6, wd=0.01) for p, g in zip(params, grads)]  # fmt: skip
    lamb_update_(
        params, grads, exp_avgs, exp_avg_sqs, steps, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-6,
        weight_decay=0.01, implementation="native",
    )  # fmt: skip
    assert [float(s) for s in steps] == [1.0, 1.0]
    for p, (rp, _, _) in zip(params, ref):
        torch.testing.assert_close(p, rp, rtol=0, atol=1e-12)


@pytest.mark.parametrize("optimizer_class", [Lion, Lamb])
def test_step_bumps_autograd_version_counters(optimizer_class):
    """The kernels write through data pointers; a graph that saved the old weights must still raise."""
    weight = torch.nn.Parameter(torch.randn(4, 4))
    x = torch.randn(2, 4, requires_grad=True)
    loss = (x @ weight).square().sum()  # saves `weight` for the gradient of x
    weight.grad = torch.ones_like(weight)
    optimizer_class([weight], implementation="native").step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_auto_uses_the_native_kernels_on_cpu():
    from lightning_recipes.optim._common import resolve_device_implementation

    assert resolve_device_implementation("auto", torch.device("cpu")) == "native"
    assert resolve_device_implementation("native", torch.device("cuda")) == "foreach"
    assert resolve_device_implementation("native", torch.device("cpu")) == "native"


def test_disabled_native_kernels_fall_back_to_the_torch_paths(monkeypatch):
    from lightning_recipes.optim._common import resolve_device_implementation

    monkeypatch.setenv("LIGHTNING_RECIPES_NATIVE", "0")
    monkeypatch.setattr(_native, "_state", {})
    assert _native.native_kernels() is None
    assert resolve_device_implementation("auto", torch.device("cpu")) == "for_loop"
    assert optim_runs.lion_against_reference("native", steps=3) < 1e-12
    assert optim_runs.lamb_against_reference("native", steps=3) < 1e-10


@pytest.mark.parametrize(
    ("script", "match"),
    [("exit 1", "building the native CPU optimizer kernels failed"),  # a "compiler" that always fails
     ("printf 'cc: \\240 invalid byte\\n' >&2\nexit 1", "invalid byte")],  # undecodable output
)  # fmt: skip
def test_a_failing_build_warns_once_and_falls_back(monkeypatch, fresh_cache, script, match):
    compiler = fresh_cache / "broken-cc"
    compiler.write_text(f"#!/bin/sh\n{script}\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CC", str(compiler))
    with pytest.warns(UserWarning, match=match):
        assert _native.native_kernels() is None
    assert _native.native_kernels() is None  # remembered: no second attempt, no second warning
    assert optim_runs.lion_against_reference("native", steps=3) < 1e-12


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs the g++ driver")
def test_a_cpp_driver_builds_the_c_source(monkeypatch, fresh_cache):
    monkeypatch.setenv("CC", "g++")
    kernels = _native.native_kernels()
    assert kernels is not None and Path(kernels.path).parent == fresh_cache / "kernels"
    assert optim_runs.lion_against_reference("native", steps=3) < 1e-12
    assert optim_runs.lamb_against_reference("native", steps=3) < 1e-10


def test_a_cache_directory_others_can_write_to_is_not_used(fresh_cache):
    shared = fresh_cache
    (shared / "kernels").mkdir()
    (shared / "kernels").chmod(0o777)  # anyone could plant a library here
    kernels = _native.native_kernels()
    assert kernels is not None
    assert not kernels.path.startswith(str(shared))
    assert Path(kernels.path).parent.stat().st_mode & 0o077 == 0  # the private fallback directory


_BUILD_AND_REPORT = textwrap.dedent(
    """
    import ctypes, os, torch
    # scikit-learn's wheel brings a second copy of libgomp: the kernels must not use it
    import sklearn.datasets
    from lightning_recipes.optim import _native, Lion

    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                    ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]

    def openmp_file_of(library):  # the file that the library's GOMP_parallel resolves to
        address = ctypes.cast(ctypes.CDLL(library).GOMP_parallel, ctypes.c_void_p)
        info = DlInfo()
        assert ctypes.CDLL(None).dladdr(address, ctypes.byref(info))
        return os.path.realpath(info.fname.decode())

    def load_and_report():  # "<library> <1 if it shares torch's OpenMP runtime> <its mtime>"
        kernels = _native.native_kernels()
        assert kernels is not None
        p = torch.nn.Parameter(torch.ones(100_000)); p.grad = torch.ones_like(p)
        Lion([p], lr=0.5, implementation="native").step()
        assert torch.equal(p.detach(), torch.full_like(p, 0.5))
        torch_cpu = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
        shared = int(openmp_file_of(kernels.path) == openmp_file_of(torch_cpu))
        return f"{kernels.path} {shared} {os.stat(kernels.path).st_mtime_ns}"

    # two processes forked after the imports (one interpreter start, not three) build at the same time
    children = []
    for _ in range(2):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                line, status = load_and_report(), 0
            except BaseException as err:
                line, status = f"failed: {err!r}", 1
            os.write(write, f"{line}\\n".encode())
            os._exit(status)
        os.close(write)
        children.append((pid, read))
    for pid, read in children:
        with os.fdopen(read) as pipe:
            built = pipe.read()
        print(built, end="")
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, built
    print("cached", os.stat(built.split()[0]).st_mtime_ns)  # before the third process loads it
    assert "kernels" not in _native._state  # this process has not loaded them yet: now it loads the cache
    print(load_and_report(), flush=True)

    # then, in this interpreter that never ran a test: DDP ranks against one process (starting it is most of
    # the cost), with the thread counts Lightning gives its ranks when OMP_NUM_THREADS is unset
    del os.environ["OMP_NUM_THREADS"]
    from tests.optim.test_native import ddp_matches_one_process
    ddp_matches_one_process("lion")
    ddp_matches_one_process("lamb")
    print("ddp ranks match one process")
    """
)


@pytest.fixture(scope="module")
def native_processes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """One interpreter forks two kernel builders into an empty cache, loads it, runs the DDP comparison."""
    cache = tmp_path_factory.mktemp("native_cache")
    env = {**os.environ, "LIGHTNING_RECIPES_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "2"}
    env.pop("CC", None)
    done = subprocess.run(
        [sys.executable, "-c", _BUILD_AND_REPORT], env=env, capture_output=True, text=True, timeout=290,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    return cache, done


@pytest.mark.slow  # starts its own processes: over 20 s on a 2-core CPU
def test_concurrent_builds_share_one_cached_library_and_torchs_openmp_runtime(native_processes):
    """Two processes build into an empty cache at once: one library, reused by a third, on torch's OpenMP."""
    tmp_path, done = native_processes
    assert len(done.stdout.splitlines()) >= 4, done.stdout + done.stderr[-3000:]
    first, second, (_, built_at), third = (line.split() for line in done.stdout.splitlines()[:4])
    reports = [first, second, third]
    assert len({path for path, _, _ in reports}) == 1 and all(shared == "1" for _, shared, _ in reports)
    library = Path(first[0])
    assert library.parent == tmp_path / "kernels"
    assert [p.name for p in library.parent.iterdir()] == [library.name]  # no leftovers of the losing build
    assert third[2] == built_at == str(library.stat().st_mtime_ns)  # loaded by the third, not rebuilt


class _RegressionNet(pl.LightningModule):
    """66K parameters (above the kernels' one-thread limit), a full-batch-equivalent DDP setup."""

    def __init__(self, optimizer_name: str) -> None:
        super().__init__()
        self.optimizer_name = optimizer_name
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.Tanh(), torch.nn.Linear(512, 64))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        if self.optimizer_name == "lion":
            return Lion(self.parameters(), lr=1e-3, weight_decay=0.1, implementation="native")
        return Lamb(self.parameters(), lr=1e-2, weight_decay=0.01, implementation="native")


class _RanksAgree(pl.Callback):
    def on_train_end(self, trainer, pl_module):
        flat = torch.cat([p.detach().reshape(-1) for p in pl_module.parameters()])
        gathered = trainer.strategy.all_gather(flat)
        assert torch.equal(gathered[0], gathered[1]), "the ranks' weights diverged"
        assert torch.isfinite(flat).all()


def _regression_data() -> torch.utils.data.TensorDataset:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(128, 64, generator=generator)
    return torch.utils.data.TensorDataset(x, torch.tanh(x @ torch.randn(64, 64, generator=generator) / 8))


def _fit(optimizer_name: str, devices: int, strategy: str = "auto") -> pl.LightningModule:
    torch.manual_seed(0)
    model = _RegressionNet(optimizer_name)
    loader = torch.utils.data.DataLoader(_regression_data(), batch_size=16, shuffle=False)
    callbacks = [_RanksAgree()] if devices > 1 else []
    trainer = fast_trainer(
        max_epochs=3, devices=devices, strategy=strategy, callbacks=callbacks, use_distributed_sampler=False
    )
    trainer.fit(model, loader)
    return model


@pytest.mark.slow
def test_ddp_ranks_step_identically_and_match_one_process(native_processes):
    """Two DDP ranks on the native kernels equal one process bitwise (run in the build test's interpreter)."""
    _, done = native_processes
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "ddp ranks match one process"


def ddp_matches_one_process(optimizer_name: str) -> None:
    """After the parent used the kernels, forked DDP ranks on the same batches equal one process bitwise."""
    torch.set_num_threads(2)
    warm = torch.randn(1 << 20)
    lion_update_([warm], [torch.ones_like(warm)], [torch.zeros_like(warm)], lr=0.1, beta1=0.9, beta2=0.99,
                 weight_decay=0.0, implementation="native")  # fmt: skip
    torch.manual_seed(0)
    start = _RegressionNet(optimizer_name)
    single = _fit(optimizer_name, devices=1)
    # fork, not spawn: a spawn worker can abort in gloo's interpreter teardown after `fit` has finished
    distributed = _fit(optimizer_name, devices=2, strategy="ddp_fork")
    for before, a, b in zip(start.parameters(), single.parameters(), distributed.parameters()):
        assert not torch.equal(before, a)  # it trained
        differences = (a - b).abs()
        assert torch.equal(a, b), (
            f"max difference {float(differences.max()):.3g} in {int((differences > 0).sum())} of "
            f"{a.numel()} elements; threads now {torch.get_num_threads()}"
        )


def test_a_damaged_cached_library_is_rebuilt(monkeypatch, tmp_path):
    # the file name is the cache key: plant a damaged one in a fresh cache (never damage a mapped library)
    loaded = _native.native_kernels()
    assert loaded is not None
    path = tmp_path / "kernels" / Path(loaded.path).name
    path.parent.mkdir(mode=0o700)
    path.write_bytes(b"not a shared library")  # e.g. a disk that filled up during an earlier copy
    monkeypatch.setenv("LIGHTNING_RECIPES_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_native, "_state", {})
    kernels = _native.native_kernels()
    assert kernels is not None and Path(kernels.path) == path and path.read_bytes()[:4] == b"\x7fELF"
    assert optim_runs.lion_against_reference("native", steps=3) < 1e-12
