"""Optimizer step time on a CUDA device: Lion and Lamb against fused AdamW and the public implementations.

Same implementations and hyper-parameters as ``benchmarks/optimizers.py`` (its :func:`implementations`), with
parameters and gradients on the GPU. Each step is timed with CUDA events, the variants interleaved
round-robin; the floor of a step is the bytes it must move (its minimum bytes per element times the element
count) over the bandwidth of ``a.add_(b)`` on the same number of elements, measured in the same run.
Host syncs per step: counted with ``torch.cuda.set_sync_debug_mode("warn")``.

Run on a machine with CUDA: ``python -m benchmarks.optimizers_gpu [--layouts transformer25M,gpt350M]
[--rounds 20] [--only Lion,Lamb,AdamW] [--out r.json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks._layouts import small200_shapes, transformer25m_shapes
from benchmarks.optimizers import implementations

__all__ = ["main"]


def gpt350m_shapes() -> list[tuple[int, ...]]:
    """A GPT-2-medium-like layout: a 50304x1024 embedding, 24 blocks of d=1024 (355M parameters)."""
    d, ff, vocab = 1024, 4096, 50304
    shapes: list[tuple[int, ...]] = [(vocab, d), (1024, d)]
    for _ in range(24):
        shapes += [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (ff, d), (ff,), (d, ff), (d,)]
    return [*shapes, (d,), (d,)]


LAYOUTS: dict[str, Callable[[], list[tuple[int, ...]]]] = {
    "transformer25M": transformer25m_shapes,
    "gpt350M": gpt350m_shapes,
    "small200": small200_shapes,
}


def make_params(shapes: Sequence[tuple[int, ...]], grads: Sequence[Any]) -> list[Any]:
    """Fresh parameters ~ N(0, 0.02^2) whose gradients are ``grads`` (shared by every variant: no optimizer
    here writes its gradients, and sharing halves the memory of a layout)."""
    import torch

    generator = torch.Generator(device="cuda").manual_seed(0)
    params = []
    for shape, grad in zip(shapes, grads):
        p = torch.nn.Parameter(torch.randn(shape, device="cuda", generator=generator) * 0.02)
        p.grad = grad
        params.append(p)
    return params


def time_ms(step: Callable[[], Any], repeats: int) -> float:
    """Median milliseconds of ``repeats`` single calls, each between two CUDA events."""
    import torch

    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def count_syncs(step: Callable[[], Any]) -> int:
    """Sync warnings of ``set_sync_debug_mode("warn")`` in one call (0: the step never waits on the GPU)."""
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message).lower() for w in caught)


def bench_layout(layout: str, args: argparse.Namespace, notes: list[str]) -> dict[str, Any]:
    import torch

    shapes = LAYOUTS[layout]()
    numel = sum(int(torch.Size(s).numel()) for s in shapes)
    a, b = torch.randn(numel, device="cuda"), torch.randn(numel, device="cuda")
    generator = torch.Generator(device="cuda").manual_seed(1)
    grads = [torch.randn(s, device="cuda", generator=generator) * 0.01 for s in shapes]
    chosen = [
        impl
        for impl in implementations(notes)
        if not args.only or any(key.lower() in impl[0].lower() for key in args.only.split(","))
    ]
    variants = []
    for name, family, bytes_per_elem, factory in chosen:
        params = make_params(shapes, grads)
        try:
            optimizer = factory(params)
            first = time_ms(optimizer.step, 1)  # state allocation
            time_ms(optimizer.step, 2)
            syncs = count_syncs(optimizer.step)
        except Exception as err:  # a public optimizer that does not run here is reported, not fatal
            notes.append(f"{name}: {type(err).__name__}: {str(err)[:120]}")
            continue
        variants.append(
            {"name": name, "family": family, "bytes": bytes_per_elem, "opt": optimizer, "first_ms": first,
             "syncs": syncs, "times": []}
        )  # fmt: skip
    add_times = []
    for r in range(args.rounds):
        add_times.append(time_ms(lambda: a.add_(b), 3))
        for v in variants if r % 2 == 0 else variants[::-1]:
            v["times"].append(time_ms(v["opt"].step, 3))
    add_ms = statistics.median(add_times)
    bandwidth = 12 * numel / (add_ms * 1e-3)  # read a, read b, write a
    fused = next((v for v in variants if "fused" in v["name"]), None)
    fused_ms = statistics.median(fused["times"]) if fused else float("nan")
    rows = []
    for v in variants:
        ms = statistics.median(v["times"])
        floor_ms = v["bytes"] * numel / bandwidth * 1e3
        rows.append(
            {"name": v["name"], "family": v["family"], "median_ms": ms, "vs_fused_adamw": ms / fused_ms,
             "floor_ms": floor_ms, "vs_floor": ms / floor_ms, "first_step_ms": v["first_ms"],
             "syncs_per_step": v["syncs"]}
        )  # fmt: skip
        del v["opt"]
    torch.cuda.empty_cache()
    return {
        "layout": layout, "tensors": len(shapes), "numel": numel, "add_bandwidth_GBps": bandwidth / 1e9,
        "rows": rows,
    }  # fmt: skip


def machine() -> dict[str, Any]:
    import platform

    import lightning
    import torch

    props = torch.cuda.get_device_properties(0)
    return {
        "device": torch.cuda.get_device_name(0),
        "memory_GiB": round(props.total_memory / 2**30, 1),
        "sm_count": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "lightning": lightning.__version__,
        "python": platform.python_version(),
    }


def markdown(result: dict[str, Any]) -> str:
    lines = []
    for lay in result["layouts"]:
        lines += [
            f"\n### {lay['layout']}: {lay['numel'] / 1e6:.1f}M parameters in {lay['tensors']} tensors "
            f"(`a.add_(b)`: {lay['add_bandwidth_GBps']:.0f} GB/s)\n",
            "| implementation | median step ms | vs fused AdamW | floor ms | vs floor | first step ms | "
            "syncs/step |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in sorted(lay["rows"], key=lambda r: (r["family"], r["median_ms"])):
            lines.append(
                f"| {row['name']} | {row['median_ms']:.3f} | {row['vs_fused_adamw']:.2f}x "
                f"| {row['floor_ms']:.3f} | {row['vs_floor']:.2f}x "
                f"| {row['first_step_ms']:.1f} | {row['syncs_per_step']} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print a markdown table per layout (and JSON to ``--out``); returns 0, or 1 without a CUDA device."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.optimizers_gpu", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--layouts", default="transformer25M,gpt350M")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--only", default="", help="comma-separated substrings of implementation names")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(list(argv) if argv is not None else None)
    import torch

    if not torch.cuda.is_available():
        print("benchmarks.optimizers_gpu: no CUDA device; nothing measured")
        return 1
    notes: list[str] = []
    result: dict[str, Any] = {"machine": machine(), "layouts": []}
    print(json.dumps(result["machine"]), flush=True)
    for layout in args.layouts.split(","):
        result["layouts"].append(bench_layout(layout, args, notes))
        print(markdown({"layouts": result["layouts"][-1:]}), flush=True)
    result["notes"] = sorted(set(notes))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    print(f"notes: {result['notes']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
