"""Every tutorial notebook runs top to bottom (``LIGHTNING_RECIPES_SMOKE=1``, a fresh ``python3`` kernel, a
temporary working directory) and its executed cells' outputs show what it claims to show."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat", reason="notebook tests need the `notebooks` group (nbformat)")
nbclient = pytest.importorskip("nbclient", reason="notebook tests need the `notebooks` group (nbclient)")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

# notebook -> (minimum number of inline images, patterns that must appear in its text output)
EXPECTED: dict[str, tuple[int, list[str]]] = {
    "01_quickstart": (
        1,
        [
            r"SMOKE=True",
            r"final val_acc=0\.\d+",
            r"grad_norm/total\s+\d+",
            r"grad_clip/threshold\s+\d+",
            r"input_pipeline/wait_fraction\s+\d+",
            r"trainer\.effective_batch_size = 64",
            r"data fingerprint: [0-9a-f]{16}",
            r"wandb config has the manifest: True",
            r"logged figure to WandbLogger: plots/quickstart",
            r"best val_loss=(\d\.\d+)  model now=\1",
        ],
    ),
    "02_optimizers": (
        2,
        [
            r"lion\s+1e-04\s+0\.5",
            r"digits adamw\s+val_acc=0\.\d+",
            r"char-LM lamb\s+val_loss=\d\.\d+",
            r"parameter groups: decay: \d+ tensors",
            r"digits\s+adamw\s+[\d.]+\s+[\d.]+\s+2\.00",
            r"digits\s+lion\s+[\d.]+\s+[\d.]+\s+1\.00",
            r"char-LM\s+lamb\s+[\d.]+\s+[\d.]+\s+2\.00",
        ],
    ),
    "03_sanity_checks": (
        1,
        [
            r"every planted bug was flagged by the check meant for it; the healthy model passed",
            r"\[clamped loss\] overfit_batch FAIL",
            r"DigitsCNN \(BatchNorm \+ Dropout\): OK",
            r"trained after a clean preflight",
        ],
    ),
    "04_stability": (
        4,
        [
            r"per-group keys: \['grad_norm/blocks\.0', 'grad_norm/blocks\.1'\]",
            r"without guard: weights finite = False",
            r"with guard:    weights finite = True; rollbacks = 2",
            r"\s30 nonfinite_loss\s",
            r"\s45 loss_spike\s",
            r"restored_best_weights=True",
            r"before: \[\('dead_units', \d+\)\]",
            r"after:  \[\]",
            r"finding: \[\('lr_too_high', 'lr_too_high', 10\)\]",  # the first steps threw the loss up
            r"repair: \[\('rollback_lower_lr', 10\)\]",
            r"rolled back to the healthy snapshot of step 0",
        ],
    ),
    "05_scaling": (
        2,
        [
            r"recipes_fsdp_full_shard",
            r"7B under DDP: 16\.0 bytes/parameter",
            r"7B\s+-> recipes_fsdp_shard_grad_op",
            r"DDP manifest: strategy=DDPStrategy world_size=2 per_device_batch=16 effective_batch=32",
            r"val_loss after 12 steps: 2 processes \d\.\d+",
        ],
    ),
    "06_finetuning": (
        2,
        [
            r"SMOKE=True",
            r"block_0/decay\s+0\.4219",
            r"head/decay\s+1\.0000",
            r"embed/token_embedding/no_decay\s+0\.1582",
            r"DigitsCNN blocks: \['features\.0', 'features\.3'\] \| depth of head\.weight: 3",
            r"unfrozen at step 2\d",
            r"recipe\s+0\.\d+",
        ],
    ),
    "07_tuning": (
        2,
        [
            r"SMOKE=True",
            r"adamw\s+suggestion=[\d.]+e-0\d peak_lr=[\d.]+e-0\d rule=min_div_10 stopped=\w+ optimizer=AdamW"
            r" verdict=ok",
            r"lion\s+suggestion=[\d.]+e-0\d peak_lr=[\d.]+e-0\d rule=min_div_10 stopped=\w+ optimizer=Lion"
            r" verdict=ok",
            r"Lion's peak LR is \d+\.\dx below AdamW's \(as expected\)",
            r"model:\n  init_args:\n    recipe:\n      lr: 0\.0\d+\n",
            r"skipped here: fused_optimizer \(no torch Adam/AdamW/SGD without fused=True",
            r"skipped here: tf32 \(TF32 applies on CUDA only",
            r"skipped here: pin_memory \(pin_memory applies on CUDA only",
            r"best: (\[.+\]|the default Trainer)  speed-up x\d\.\d\d\ntrainer:",
            r"activation checkpointing on the char LM: activations [\d.]+ -> [\d.]+ MiB \(-[4-9]\d%\), "
            r"step peak [\d.]+ -> [\d.]+ MiB, speed x\d\.\d\d, loss deviation 0\.0e\+00",
            r"tuned for 6\d steps \(the Trainer's max_steps / max_epochs\): projected x\d\.\d\d",
            r"default\s+1\.0e-03\s+0\.\d{3}\s+\d+\.\d\d\s+1\.00\s+\d+\.\d  \[\]",
            r"found LR\s+\d\.\de-03\s+0\.\d{3}\s+\d+\.\d\d\s+\d+\.\d\d\s+\d+\.\d  \[\]",
            r"found LR \+ speed\s+\d\.\de-03\s+0\.\d{3}\s+\d+\.\d\d\s+\d+\.\d\d\s+\d+\.\d  \[",
            r"the default run used: \{.precision.: .32-true., .num_workers.: 0, .channels_last.: False\}",
            r"the tuned run used speed_tune's choice: True",
            r"side by side, 3 interleaved rounds: speed-up x\d\.\d\d \(rounds: [\d., ]+; speed_tune said "
            r"x\d\.\d\d per step\); whole 1-epoch fit x\d\.\d\d",
        ],
    ),
}


def _outputs(notebook: Any) -> tuple[str, int, list[str]]:
    text, images, errors = [], 0, []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                text.append(output.text)
            elif output.output_type in ("display_data", "execute_result"):
                images += "image/png" in output.data
                text.append(output.data.get("text/plain", ""))
            elif output.output_type == "error":
                errors.append(f"{output.ename}: {output.evalue}")
    return "".join(text), images, errors


def test_every_notebook_is_tested() -> None:
    assert sorted(path.stem for path in NOTEBOOKS.glob("*.ipynb")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_committed_without_outputs(name: str) -> None:
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{name}: commit it with outputs cleared"
            )
    source = "\n".join(cell.source for cell in notebook.cells)
    assert "LIGHTNING_RECIPES_SMOKE" in source and "%matplotlib inline" in source


def _executed_by_docs_build(notebook: Any) -> Any:
    """The notebook as the docs build ran it (same code cells, smoke size, its own temporary folder, a failing
    cell failing that build), when ``LR_DOCS_HTML`` names a build whose notebook cache holds it; else ``None``
    and the test runs it. ``make test`` clears that cache before the build (outputs of this checkout)."""
    html = os.environ.get("LR_DOCS_HTML")
    cache_dir = Path(html).parent / ".jupyter_smoke1" if html else None
    if cache_dir is None or not cache_dir.is_dir():
        return None
    from jupyter_cache import get_cache

    try:
        _, merged = get_cache(str(cache_dir)).merge_match_into_notebook(notebook)
    except KeyError:  # no run of these exact code cells
        return None
    return merged


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIGHTNING_RECIPES_SMOKE", "1")
    # one intra-op thread: tiny models, and two OpenMP threads per process thrash on a shared CPU
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    executed = _executed_by_docs_build(notebook)
    if executed is not None:
        notebook = executed
    else:
        # what an earlier run left in notebooks/ is not this run's doing: this run must add or change nothing
        before = _tree(NOTEBOOKS)
        client = nbclient.NotebookClient(
            notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        )
        client.execute()
        changed = sorted(set(_tree(NOTEBOOKS).items()) ^ set(before.items()))
        assert not changed, f"{name} wrote into the repository instead of its cwd: {changed[:5]}"
    text, images, errors = _outputs(notebook)
    assert not errors, errors
    min_images, patterns = EXPECTED[name]
    assert images >= min_images, f"{name}: {images} inline plots, expected at least {min_images}"
    missing = [pattern for pattern in patterns if not re.search(pattern, text)]
    assert not missing, f"{name}: output lacks {missing}\n--- output ---\n{text[-4000:]}"


def _tree(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` (bar editor checkpoints) and its modification time."""
    return {
        path.relative_to(folder).as_posix(): path.stat().st_mtime_ns
        for path in folder.rglob("*")
        if path.is_file() and ".ipynb_checkpoints" not in path.parts
    }
