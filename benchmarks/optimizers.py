"""Optimizer step benchmark: our Lion / Lamb against torch AdamW and the public Lion / LAMB implementations.

For each layout (``transformer25M``: 25.2M params in 147 tensors; ``small200``: 2.06M params in 200 tensors)
every implementation steps the *same* parameter and gradient tensors. It measures:

- step time: median of clean rounds, all implementations timed round-robin (direction alternating) so that
  noise hits them alike; a round in which other processes used more than ``--foreign-frac`` of the CPUs
  (``/proc/stat`` minus our own ``/proc/self/stat`` ticks) is discarded - the machine is shared;
- first-step latency: the first ``step()`` of a fresh optimizer (state allocation, and for ``auto``/``native``
  the one-time kernel build, measured with an empty native-kernel cache unless ``--warm-cache``);
- optimizer-state bytes and transient peak bytes of one step (profiler memory events), over parameter bytes;
- tensor->host conversions per step (``aten::_local_scalar_dense``: a device sync each on CUDA);
- the memory-bandwidth floor: the least bytes a step must move (Lion 20 B/elem, AdamW/LAMB 28 B/elem in fp32)
  divided by the bandwidth ``a.add_(b)`` reaches on the same working-set size.

Run: ``python -m benchmarks.optimizers [--layouts transformer25M,small200] [--out results.json]``. Public
packages (``make bench`` installs them with ``--no-deps`` against the pinned torch): lion-pytorch,
pytorch-optimizer, timm (its optimizer files loaded through a package stub: timm's ``__init__`` imports
torchvision, which has no CPU wheel matching torch 2.13), torch-optimizer. Missing ones are skipped.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks._layouts import small200_shapes, transformer25m_shapes

__all__ = ["main"]

FLOAT_BYTES = 4


# ------------------------------------------------------------------------------------------------------------
# layouts
# ------------------------------------------------------------------------------------------------------------
def make_layout(name: str) -> list[Any]:
    """Parameters ~ N(0, 0.02^2) with gradients ~ N(0, 0.01^2), seeded; shapes of a GPT-like 25M model or
    200 small linear tensors."""
    import torch

    if name == "transformer25M":
        shapes = transformer25m_shapes()
    elif name == "small200":
        shapes = small200_shapes()
    else:
        raise ValueError(f"`layout` must be 'transformer25M' or 'small200', got {name!r}.")
    generator = torch.Generator().manual_seed(1234)
    params = []
    for shape in shapes:
        p = torch.nn.Parameter(torch.randn(shape, generator=generator) * 0.02)
        p.grad = torch.randn(shape, generator=generator) * 0.01
        params.append(p)
    return params


# ------------------------------------------------------------------------------------------------------------
# timing on a shared machine
# ------------------------------------------------------------------------------------------------------------
def _cpu_ticks() -> tuple[int, int]:
    """(busy ticks of the whole machine incl. steal, ticks used by this process)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    with open("/proc/self/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2 :].split()
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7], int(fields[11]) + int(fields[12])


def _foreign(t0: tuple[int, int], t1: tuple[int, int]) -> int:
    return (t1[0] - t0[0]) - (t1[1] - t0[1])


def _wait_quiet(foreign_frac: float, max_wait_s: float, window_s: float = 1.0) -> float:
    """Wait (up to ``max_wait_s``) for one window in which other processes use < ``foreign_frac`` of the
    CPUs."""
    ncpu = os.cpu_count() or 1
    start = time.time()
    while time.time() - start < max_wait_s:
        t0 = _cpu_ticks()
        time.sleep(window_s)
        if _foreign(t0, _cpu_ticks()) <= foreign_frac * window_s * 100 * ncpu:
            break
    return time.time() - start


def _stats(ts: list[float]) -> dict[str, float]:
    ts = sorted(ts)
    q = statistics.quantiles(ts, n=4) if len(ts) >= 4 else [ts[0], statistics.median(ts), ts[-1]]
    return {
        "median_ms": 1e3 * statistics.median(ts),
        "p25_ms": 1e3 * q[0],
        "p75_ms": 1e3 * q[2],
        "min_ms": 1e3 * ts[0],
        "samples": len(ts),
    }


def interleaved(
    cases: Sequence[tuple[str, Callable[[], Any]]],
    rounds: int,
    per_visit: int,
    foreign_frac: float,
    max_seconds: float,
) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Round-robin timing; rounds with foreign CPU use above ``foreign_frac`` of the machine are discarded."""
    ncpu = os.cpu_count() or 1
    waited = _wait_quiet(foreign_frac, max_wait_s=min(120.0, max_seconds / 4))
    per_round: list[tuple[bool, int, dict[str, list[float]]]] = []
    start = time.time()
    gc.collect()
    gc.disable()
    try:
        r = 0
        while (
            r < 6 * rounds and sum(c for c, _, _ in per_round) < rounds and time.time() - start < max_seconds
        ):
            got: dict[str, list[float]] = {k: [] for k, _ in cases}
            c0, w0 = _cpu_ticks(), time.perf_counter()
            for key, fn in cases if r % 2 == 0 else cases[::-1]:
                for _ in range(per_visit):
                    t0 = time.perf_counter()
                    fn()
                    got[key].append(time.perf_counter() - t0)
            foreign = _foreign(c0, _cpu_ticks())
            clean = foreign <= 1 + foreign_frac * (time.perf_counter() - w0) * 100 * ncpu
            per_round.append((clean, foreign, got))
            r += 1
    finally:
        gc.enable()
    use = [g for c, _, g in per_round if c]
    enough = len(use) >= 3
    if not enough:
        use = [g for _, _, g in per_round]
    out = {k: _stats([t for g in use for t in g[k]]) for k, _ in cases}
    meta: dict[str, Any] = {
        "rounds_total": len(per_round),
        "rounds_clean": sum(c for c, _, _ in per_round),
        "stats_from": "clean rounds" if enough else "ALL rounds (too few clean: machine busy)",
        "foreign_ticks_per_round": [f for _, f, _ in per_round],
        "waited_for_quiet_s": round(waited, 1),
        # per used round, each case's mean time: for ratios paired within a round (drift cancels)
        "round_means_ms": [{k: 1e3 * statistics.fmean(v) for k, v in g.items()} for g in use],
    }
    print(
        f"  [timing] {meta['rounds_clean']}/{meta['rounds_total']} clean rounds ({meta['stats_from']})",
        flush=True,
    )
    return out, meta


def _quartiles(values: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 4], ordered[(3 * len(ordered)) // 4]


def profile_step(step: Callable[[], Any]) -> tuple[int, int]:
    """(tensor->host conversions, transient peak bytes) of one call, from the profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    syncs = sum(e.count for e in prof.key_averages() if e.key == "aten::_local_scalar_dense")
    events = sorted(
        (e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"
    )
    current = peak = 0
    for _, nbytes in events:
        current += nbytes
        peak = max(peak, current)
    return syncs, peak


def _tensor_bytes(obj: Any) -> int:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(o) for o in obj)
    if isinstance(obj, dict):
        return sum(_tensor_bytes(o) for o in obj.values())
    return 0


# ------------------------------------------------------------------------------------------------------------
# implementations
# ------------------------------------------------------------------------------------------------------------
def import_timm_optim() -> tuple[Any, Any, str]:
    """timm's Lion and Lamb; through a package stub that skips ``timm/__init__`` (it imports torchvision)."""
    try:
        if importlib.util.find_spec("torchvision") is not None:
            import timm.optim as timm_optim

            return timm_optim.Lion, timm_optim.Lamb, "import timm.optim"
    except Exception:  # a torchvision that cannot load beside this torch
        pass
    for key in [k for k in sys.modules if k == "timm" or k.startswith("timm.")]:
        del sys.modules[key]
    spec = importlib.util.find_spec("timm")
    if spec is None or spec.origin is None:
        raise ImportError("timm is not installed")
    root = os.path.dirname(spec.origin)
    for name, path in (("timm", root), ("timm.optim", os.path.join(root, "optim"))):
        module = types.ModuleType(name)
        module.__path__ = [path]
        sys.modules[name] = module
    lion = importlib.import_module("timm.optim.lion").Lion
    lamb = importlib.import_module("timm.optim.lamb").Lamb
    return lion, lamb, "timm.optim.{lion,lamb} loaded via a package stub (timm/__init__ imports torchvision)"


def _factory(cls: Any, **kwargs: Any) -> Callable[[list[Any]], Any]:
    return lambda ps: cls(ps, **kwargs)


def implementations(notes: list[str]) -> list[tuple[str, str, int, Callable[[list[Any]], Any]]]:
    """(name, family, minimum bytes per element of a step, factory). Same hyper-parameters as
    optimizer-baselines.md: AdamW lr 1e-3 wd 0.01; Lion lr 1e-4 wd 0.01; LAMB lr 1e-3 wd 0.01."""
    import torch

    from lightning_recipes.optim import Lamb, Lion

    wd = 0.01
    out: list[tuple[str, str, int, Callable[[list[Any]], Any]]] = [
        (
            "torch AdamW for-loop (CPU default)",
            "adamw",
            28,
            lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=wd, foreach=False),
        ),
        (
            "torch AdamW foreach",
            "adamw",
            28,
            lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=wd, foreach=True),
        ),
        (
            "torch AdamW fused (AdamWRecipe)",
            "adamw",
            28,
            lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=wd, fused=True),
        ),
    ]
    for family, cls, bpe, lr in (("lion", Lion, 20, 1e-4), ("lamb", Lamb, 28, 1e-3)):
        for impl in ("auto", "for_loop", "foreach", "native"):
            factory = _factory(cls, lr=lr, weight_decay=wd, implementation=impl)
            out.append((f"ours {cls.__name__} {impl}", family, bpe, factory))
    try:
        import lion_pytorch
        import lion_pytorch.foreach

        out += [
            ("lion-pytorch Lion", "lion", 20, lambda ps: lion_pytorch.Lion(ps, lr=1e-4, weight_decay=wd)),
            (
                "lion-pytorch foreach.Lion",
                "lion",
                20,
                lambda ps: lion_pytorch.foreach.Lion(ps, lr=1e-4, weight_decay=wd),
            ),
        ]
    except ImportError as err:
        notes.append(f"lion-pytorch skipped: {err}")
    try:
        import pytorch_optimizer

        out += [
            (
                "pytorch_optimizer Lion (default foreach)",
                "lion",
                20,
                lambda ps: pytorch_optimizer.Lion(ps, lr=1e-4, weight_decay=wd),
            ),
            (
                "pytorch_optimizer Lion foreach=False",
                "lion",
                20,
                lambda ps: pytorch_optimizer.Lion(ps, lr=1e-4, weight_decay=wd, foreach=False),
            ),
            (
                "pytorch_optimizer Lamb (default foreach)",
                "lamb",
                28,
                lambda ps: pytorch_optimizer.Lamb(ps, lr=1e-3, weight_decay=wd),
            ),
            (
                "pytorch_optimizer Lamb foreach=False",
                "lamb",
                28,
                lambda ps: pytorch_optimizer.Lamb(ps, lr=1e-3, weight_decay=wd, foreach=False),
            ),
        ]
    except ImportError as err:
        notes.append(f"pytorch_optimizer skipped: {err}")
    try:
        timm_lion, timm_lamb, note = import_timm_optim()
        notes.append(note)
        out += [
            (
                "timm Lion (default: per-tensor on CPU)",
                "lion",
                20,
                lambda ps: timm_lion(ps, lr=1e-4, weight_decay=wd),
            ),
            (
                "timm Lion foreach",
                "lion",
                20,
                lambda ps: timm_lion(ps, lr=1e-4, weight_decay=wd, foreach=True),
            ),
            ("timm Lamb (default: clip 1.0)", "lamb", 28, lambda ps: timm_lamb(ps, lr=1e-3, weight_decay=wd)),
            (
                "timm Lamb max_grad_norm=None",
                "lamb",
                28,
                lambda ps: timm_lamb(ps, lr=1e-3, weight_decay=wd, max_grad_norm=None),
            ),
            (
                "timm Lamb foreach max_grad_norm=None",
                "lamb",
                28,
                lambda ps: timm_lamb(ps, lr=1e-3, weight_decay=wd, foreach=True, max_grad_norm=None),
            ),
        ]
    except ImportError as err:
        notes.append(f"timm skipped: {err}")
    try:
        import torch_optimizer

        out.append(
            (
                "torch-optimizer Lamb",
                "lamb",
                28,
                lambda ps: torch_optimizer.Lamb(ps, lr=1e-3, weight_decay=wd),
            )
        )
    except ImportError as err:
        notes.append(f"torch-optimizer skipped: {err}")
    return out


def auto_choice(params: list[Any], family: str) -> str:
    """What ``implementation="auto"`` runs for these CPU tensors."""
    from lightning_recipes.optim._native import native_kernels

    kernels = native_kernels()
    if kernels is not None:
        return (
            f"native: one multi-tensor C kernel for all {len(params)} tensors "
            f"({os.path.basename(kernels.path)})"
        )
    return f"for_loop for all {len(params)} tensors (no native kernels)"


# ------------------------------------------------------------------------------------------------------------
# bandwidth floor
# ------------------------------------------------------------------------------------------------------------
def _add_pair(numel: int) -> tuple[Any, Any]:
    """Two tensors for ``a.add_(b)`` (12 B/elem: read a, read b, write a), the bandwidth reference."""
    import torch

    return torch.randn(numel), torch.randn(numel)


def _add_step(a: Any, b: Any) -> Callable[[], Any]:
    return lambda: a.add_(b)


# ------------------------------------------------------------------------------------------------------------
# main
# ------------------------------------------------------------------------------------------------------------
def bench_layout(layout: str, args: argparse.Namespace, notes: list[str]) -> dict[str, Any]:
    import torch

    params = make_layout(layout)
    n_el = sum(p.numel() for p in params)
    p_bytes = n_el * FLOAT_BYTES
    big = layout == "transformer25M"
    rounds, per_visit = (args.rounds_big, 1) if big else (args.rounds_small, 5)
    only = [s for s in args.only.split(",") if s]
    entries: list[tuple[str, str, int, Any, float]] = []
    rows: list[dict[str, Any]] = []
    for name, family, bpe, factory in implementations(notes):
        if only and not any(o in name for o in only):
            continue
        try:
            optimizer = factory(params)
            t0 = time.perf_counter()
            optimizer.step()  # allocates state (and builds the native kernels, for auto/native)
            first_ms = 1e3 * (time.perf_counter() - t0)
        except Exception as err:
            rows.append({"impl": name, "family": family, "error": f"{type(err).__name__}: {err}"})
            print(f"[{layout}] {name}: ERROR {err}", flush=True)
            continue
        for _ in range(2 if big else 5):  # warm-up
            optimizer.step()
        entries.append((name, family, bpe, optimizer, first_ms))
        print(f"[{layout}] {name}: first step {first_ms:.1f} ms", flush=True)
    # floors: add_ bandwidth on the working set of a step (Lion p,g,m = 3 x params; AdamW/LAMB p,g,m,v = 4x),
    # timed in the same interleaved rounds as the optimizers, so that both see the same machine
    floor_pairs = {20: _add_pair(max(1, 3 * n_el // 2)), 28: _add_pair(max(1, 2 * n_el))}
    floor_entries = [(f"add_ floor {bpe}", _add_step(a, b)) for bpe, (a, b) in floor_pairs.items()]
    timings, meta = interleaved(
        [(n, o.step) for n, _, _, o, _ in entries] + floor_entries,
        rounds,
        per_visit,
        args.foreign_frac,
        args.max_seconds,
    )
    bw = {
        bpe: 12 * a.numel() / (timings[f"add_ floor {bpe}"]["median_ms"] * 1e-3) / 1e9
        for bpe, (a, _) in floor_pairs.items()
    }
    del floor_pairs, floor_entries
    for name, family, bpe, optimizer, first_ms in entries:
        state_b = sum(_tensor_bytes(s) for s in optimizer.state.values())
        syncs, peak = profile_step(optimizer.step)
        floor_ms = bpe * n_el / (bw[bpe] * 1e9) * 1e3
        row: dict[str, Any] = dict(timings[name])
        row.update(
            {
                "impl": name,
                "family": family,
                "first_step_ms": first_ms,
                "state_ratio": state_b / p_bytes,
                "transient_ratio": peak / p_bytes,
                "syncs_per_step": syncs,
                "min_bytes_per_elem": bpe,
                "floor_ms": floor_ms,
                "x_floor": row["median_ms"] / floor_ms,
                "GBps": bpe * n_el / (row["median_ms"] * 1e-3) / 1e9,
            }
        )
        rows.append(row)
    finite = all(bool(torch.isfinite(p).all()) for p in params)
    fused = next((r for r in rows if r["impl"].startswith("torch AdamW fused") and "median_ms" in r), None)
    for row in rows:
        if fused and "median_ms" in row:
            row["x_fused_adamw"] = row["median_ms"] / fused["median_ms"]
            paired = [r[row["impl"]] / r[fused["impl"]] for r in meta["round_means_ms"]]
            row["x_fused_adamw_paired"] = statistics.median(paired)
            row["x_fused_adamw_paired_iqr"] = _quartiles(paired)
    public_lamb = [
        r["median_ms"]
        for r in rows
        if r["family"] == "lamb" and not r["impl"].startswith("ours") and "median_ms" in r
    ]
    public_lion = [
        r["median_ms"]
        for r in rows
        if r["family"] == "lion" and not r["impl"].startswith("ours") and "median_ms" in r
    ]
    for row in rows:
        if "median_ms" not in row:
            continue
        pool = public_lamb if row["family"] == "lamb" else public_lion if row["family"] == "lion" else []
        if pool:
            row["x_fastest_public"] = row["median_ms"] / min(pool)
        print(
            f"[{layout}] {row['impl']:44s} {row['median_ms']:8.2f} ms  "
            f"x{row.get('x_fused_adamw', float('nan')):.2f} fusedAdamW  x{row['x_floor']:.2f} floor  first "
            f"{row['first_step_ms']:.0f} ms  state {row['state_ratio']:.2f}  transient "
            f"{row['transient_ratio']:.2f}  syncs {row['syncs_per_step']}",
            flush=True,
        )
    return {
        "layout": layout,
        "n_params": n_el,
        "n_tensors": len(params),
        "rounds": rounds,
        "per_visit": per_visit,
        "timing": meta,
        "add_GBps": {str(k): v for k, v in bw.items()},
        "auto_choice": f"Lion: {auto_choice(params, 'lion')}; Lamb: {auto_choice(params, 'lamb')}",
        "all_finite": finite,
        "rows": rows,
    }


def machine() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpus": os.cpu_count(),
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }
    from importlib.metadata import PackageNotFoundError, version

    for pkg in ("lion-pytorch", "pytorch_optimizer", "timm", "torch-optimizer", "lightning"):
        try:
            info[pkg] = version(pkg)
        except PackageNotFoundError:
            info[pkg] = None
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu_model"] = next(
                line.split(":", 1)[1].strip() for line in f if line.startswith("model name")
            )
        with open("/proc/meminfo") as f:
            info["mem_total"] = f.readline().split(":", 1)[1].strip()
    except (OSError, StopIteration):
        pass
    return info


def markdown(result: dict[str, Any]) -> str:
    lines = []
    for lay in result["layouts"]:
        t = lay["timing"]
        lines.append(
            f"Layout `{lay['layout']}`: {lay['n_params'] / 1e6:.2f}M params in {lay['n_tensors']} tensors; "
            f"{t['rounds_clean']} clean of {t['rounds_total']} rounds ({t['stats_from']}), "
            f"{lay['per_visit']} step(s) per visit; `add_` bandwidth on the step's working set: "
            f"{lay['add_GBps']['20']:.1f} GB/s (Lion), {lay['add_GBps']['28']:.1f} GB/s (AdamW/LAMB). `auto` "
            f"chose: {lay['auto_choice']}.\n"
        )
        lines.append(
            "| implementation | median ms | p25-p75 | x fused AdamW | x fused AdamW, paired per round "
            "(p25-p75) | x fastest public (same family) | floor ms | x floor | first step ms | state / "
            "params | transient peak / params | syncs / step |"
        )
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in lay["rows"]:
            if "median_ms" not in r:
                lines.append(f"| {r['impl']} | error: {r['error']} |||||||||")
                continue
            xp = f"{r['x_fastest_public']:.2f}" if "x_fastest_public" in r else ""
            q = r.get("x_fused_adamw_paired_iqr", (float("nan"), float("nan")))
            paired = f"{r.get('x_fused_adamw_paired', float('nan')):.2f} ({q[0]:.2f}-{q[1]:.2f})"
            name = f"**{r['impl']}**" if r["impl"].startswith("ours") else r["impl"]
            lines.append(
                f"| {name} | {r['median_ms']:.2f} | {r['p25_ms']:.2f}-{r['p75_ms']:.2f} | "
                f"{r.get('x_fused_adamw', float('nan')):.2f} | {paired} | {xp} | {r['floor_ms']:.2f} | "
                f"{r['x_floor']:.2f} | {r['first_step_ms']:.0f} | {r['state_ratio']:.2f} | "
                f"{r['transient_ratio']:.2f} | {r['syncs_per_step']} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; prints a markdown table per layout and writes JSON to ``--out``. Returns 0."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.optimizers", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--layouts", default="transformer25M,small200")
    parser.add_argument("--only", default="", help="comma-separated substrings of implementation names")
    parser.add_argument(
        "--rounds-big", type=int, default=15, help="clean rounds on transformer25M (1 step each)"
    )
    parser.add_argument(
        "--rounds-small", type=int, default=12, help="clean rounds on small200 (5 steps each)"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--foreign-frac", type=float, default=0.05, help="discard rounds where others used more of the CPUs"
    )
    parser.add_argument(
        "--max-seconds", type=float, default=600.0, help="time limit of the timing loop per layout"
    )
    parser.add_argument(
        "--warm-cache",
        action="store_true",
        help=("keep the native kernels' disk cache (first-step times then show a cached build)"),
    )
    parser.add_argument("--out", default=None, help="also write every measurement as JSON here")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if not args.warm_cache:
        os.environ["LIGHTNING_RECIPES_CACHE_DIR"] = tempfile.mkdtemp(prefix="native_cold_")
    import torch

    torch.set_num_threads(args.threads)
    notes: list[str] = []
    result: dict[str, Any] = {"machine": machine(), "notes": notes, "layouts": []}
    print(json.dumps(result["machine"]), flush=True)
    for layout in args.layouts.split(","):
        result["layouts"].append(bench_layout(layout, args, notes))
        gc.collect()
    result["notes"] = sorted(set(notes))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    print("\n" + markdown(result))
    print(f"notes: {result['notes']}" + (f"\nwrote {args.out}" if args.out else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
