"""Lion and Lamb on FSDP2's sharded parameters (DTensors), and the inputs the native kernel must never see."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from lightning_recipes.optim import Lamb, Lion, _native, lamb_update_, lion_update_
from lightning_recipes.optim._common import split_for_native

_REPO = Path(__file__).resolve().parents[2]


def _run_script(source: str, tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(source)
    path = os.pathsep.join(filter(None, [str(_REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    command = [sys.executable, str(script), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


_TWO_RANKS = textwrap.dedent(
    """
    import socket, sys
    import torch, torch.distributed as dist
    import torch.multiprocessing as mp
    from torch.distributed.fsdp import fully_shard
    sys.path.insert(0, sys.argv[2])
    from tests.optim.test_fsdp2_routing import build_model, make_optimizer, train

    def worker(rank, port, out):
        torch.set_num_threads(1)
        dist.init_process_group("gloo", rank=rank, world_size=2, init_method=f"tcp://127.0.0.1:{port}")
        full = {}
        for name in ("lion", "lamb"):  # both in one pair of processes: starting them is most of the cost
            model = build_model()
            for layer in model:
                fully_shard(layer)
            fully_shard(model)
            train(model, make_optimizer(name, model))  # the same batches on both ranks: equal gradients
            full[name] = [p.full_tensor() for p in model.parameters()]
        if rank == 0:
            torch.save(full, out)
        # both ranks' sends done before either tears down: a group destroyed mid-send aborts the process
        dist.barrier()
        dist.destroy_process_group()

    if __name__ == "__main__":
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        # fork: the ranks inherit this interpreter's imports instead of starting two more
        mp.start_processes(worker, args=(port, sys.argv[1]), nprocs=2, start_method="fork")
    """
)


def build_model() -> torch.nn.Module:
    # 7 and 5 rows: uneven shards over 2 ranks (FSDP2 pads them); float64 so that sums in another order agree
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 7), torch.nn.Tanh(), torch.nn.Linear(7, 5)).double()


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 6, generator=generator, dtype=torch.float64),
             torch.randn(8, 5, generator=generator, dtype=torch.float64)) for _ in range(4)]  # fmt: skip


def train(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    for x, y in batches():
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


def make_optimizer(name: str, model: torch.nn.Module) -> torch.optim.Optimizer:
    # lr large enough that a shard-local trust ratio (||p_shard|| / ||u_shard||) would visibly differ
    if name == "lion":
        return Lion(model.parameters(), lr=0.01, weight_decay=0.1)
    return Lamb(model.parameters(), lr=0.05, weight_decay=0.1)


@pytest.mark.slow  # starts its own processes: over 20 s on a 2-core CPU
def test_two_rank_fsdp2_matches_one_unsharded_process(tmp_path):
    """2 gloo ranks, every layer ``fully_shard``ed == one plain process (Lamb's norms all-reduced)."""
    out = tmp_path / "full.pt"
    result = _run_script(_TWO_RANKS, tmp_path, str(out), str(_REPO), timeout=300)
    assert result.returncode == 0, _failure(result)
    sharded = torch.load(out)
    assert sorted(sharded) == ["lamb", "lion"]
    for name, got_parameters in sharded.items():
        model = build_model()
        start = [p.detach().clone() for p in model.parameters()]
        train(model, make_optimizer(name, model))
        for before, expected, got in zip(start, model.parameters(), got_parameters):
            assert not torch.equal(before, expected), name
            torch.testing.assert_close(got, expected.detach(), rtol=0, atol=1e-12)


# ---- what the routing hands to the native kernel ---------------------------------------------------------


class _Tagged(torch.Tensor):
    """A trivial tensor subclass (as quantisation or tracing libraries define)."""


def _exotic_cases() -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    base = torch.randn(4, 6, dtype=torch.float64)
    grad = torch.randn(4, 6, dtype=torch.float64)
    conv = torch.randn(2, 3, 4, 4, dtype=torch.float64)
    return {
        "transposed": (base.t(), grad.t(), torch.zeros(6, 4, dtype=torch.float64).t().t()),
        "channels_last": (
            conv.to(memory_format=torch.channels_last),
            torch.randn_like(conv).to(memory_format=torch.channels_last),
            torch.zeros_like(conv).to(memory_format=torch.channels_last),
        ),
        "expanded_grad": (
            base.clone(), torch.randn(1, 6, dtype=torch.float64).expand(4, 6), torch.zeros(4, 6).double()
        ),
        "strided_slice": (base[:, ::2], grad[:, ::2], torch.zeros(4, 3, dtype=torch.float64)),
        "subclass": (base.clone().as_subclass(_Tagged), grad.clone(), torch.zeros(4, 6, dtype=torch.float64)),
        "meta": tuple(torch.empty(4, 6, device="meta") for _ in range(3)),
        "complex": (torch.randn(5, dtype=torch.complex64), torch.randn(5, dtype=torch.complex64),
                    torch.zeros(5, dtype=torch.complex64)),
        "mixed_dtypes": (base.clone(), grad.float(), torch.zeros(4, 6, dtype=torch.float64)),
    }  # fmt: skip


@pytest.mark.parametrize("case", sorted(_exotic_cases()))
def test_the_native_routing_refuses_exotic_tensors(case):
    p, g, m = _exotic_cases()[case]
    taken, others = split_for_native([p], [g], [m])
    assert (taken, others) == ([], [0])


def test_plain_contiguous_tensors_and_disjoint_views_of_one_storage_are_taken():
    flat = torch.zeros(20)
    views = [flat[:8], flat[8:20].view(3, 4)]  # DDP's gradient buckets look like this
    taken, _ = split_for_native(views, views, [torch.zeros(8), torch.zeros(3, 4)])
    assert taken == [0, 1]
    assert split_for_native([torch.nn.Parameter(torch.zeros(3))], [torch.zeros(3)])[0] == [0]


# Both single-process probes in one interpreter (starting one is most of their cost)
_ONE_PROCESS = textwrap.dedent(
    """
    import socket, sys
    import torch, torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    sys.path.insert(0, sys.argv[1])
    from tests.optim.test_fsdp2_routing import _exotic_cases
    from lightning_recipes.optim import Lamb, Lion, _native, lamb_update_, lion_update_

    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{port}")
    for name, implementation in [(n, i) for n in ("lion", "lamb") for i in ("auto", "native", "foreach")]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 4))
        fully_shard(model)
        optimizer = (Lion if name == "lion" else Lamb)(model.parameters(), implementation=implementation)
        before = [p.full_tensor().clone() for p in model.parameters()]
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
        moved = all(not torch.equal(b, p.full_tensor()) for b, p in zip(before, model.parameters()))
        print(name, implementation, "stepped" if moved else "did not move", flush=True)
    dist.destroy_process_group()

    for case, (p, g, m) in sorted(_exotic_cases().items()) if _native.native_available() else ():
        if case == "mixed_dtypes":
            continue  # not a valid optimizer input (torch's own optimizers refuse it too)
        p, g, m = p.clone() if case != "meta" else p, g, m.clone() if case != "meta" else m
        lion_update_([p], [g], [m], lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.1, implementation="native")
        v, t = torch.zeros_like(m), torch.zeros(())
        lamb_update_([p], [g], [m], [v], [t], lr=0.1, beta1=0.9, beta2=0.99, eps=1e-6, weight_decay=0.1,
                     implementation="native")
        print(case, "ok", flush=True)
    """
)


@pytest.fixture(scope="module")
def one_process_run(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess:
    return _run_script(_ONE_PROCESS, tmp_path_factory.mktemp("one_process"), str(_REPO))


def _failure(result: subprocess.CompletedProcess) -> str:
    return f"exit code {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"


def test_fully_sharded_parameters_step_without_crashing(one_process_run):
    """The issue's reproduction: a ``fully_shard``ed module on a 1-rank gloo group, one step (segfaulted)."""
    lines = one_process_run.stdout.split("\n")
    for name in ("lion", "lamb"):
        for implementation in ("auto", "native", "foreach"):
            assert f"{name} {implementation} stepped" in lines, _failure(one_process_run)


@pytest.mark.skipif(not _native.native_available(), reason="the native kernels did not build here")
def test_exotic_tensors_step_on_the_native_route_without_crashing(one_process_run):
    assert one_process_run.returncode == 0, _failure(one_process_run)
    assert one_process_run.stdout.count(" ok") == len(_exotic_cases()) - 1


@pytest.mark.parametrize("layout", ["transposed", "channels_last", "strided_slice", "subclass"])
def test_exotic_tensors_get_the_reference_result_on_every_route(layout):
    cases = _exotic_cases()
    for implementation in ("native", "auto", "foreach", "for_loop"):
        p, g, m = (t.clone() if t.device.type != "meta" else t for t in cases[layout])
        ref_p, ref_g, ref_m = (t.as_subclass(torch.Tensor).contiguous().clone() for t in (p, g, m))
        hyper = {"lr": 0.1, "beta1": 0.9, "beta2": 0.99, "weight_decay": 0.1}
        lion_update_([p], [g], [m], **hyper, implementation=implementation)
        lion_update_([ref_p], [ref_g], [ref_m], **hyper)
        torch.testing.assert_close(p.as_subclass(torch.Tensor), ref_p, rtol=0, atol=1e-14)
        v, t = torch.zeros_like(m), torch.zeros(())
        ref_v, ref_t = torch.zeros_like(ref_m), torch.zeros(())
        lamb_update_([p], [g], [m], [v], [t], lr=0.1, beta1=0.9, beta2=0.99, eps=1e-6, weight_decay=0.1,
                     implementation=implementation)  # fmt: skip
        lamb_update_([ref_p], [ref_g], [ref_m], [ref_v], [ref_t], lr=0.1, beta1=0.9, beta2=0.99, eps=1e-6,
                     weight_decay=0.1)  # fmt: skip
        torch.testing.assert_close(p.as_subclass(torch.Tensor), ref_p, rtol=0, atol=1e-14)
