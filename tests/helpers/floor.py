"""Which tests the second CI pass (``make test-floor``, the oldest supported Lightning) runs again: for each
place where our code meets Lightning's API (found, not remembered: every class overriding a Lightning hook
needs an entry in :data:`FLOOR_TESTS`, ``tests/test_suite_helpers.py``), one test through a real ``Trainer``.
An entry that matches no collected test fails collection; the selected tests carry the ``floor`` marker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # the repository, not the rootdir (pytester runs copy conftest)
FLOOR = "floor"

_CB = "tests/callbacks/"
# integration point -> the tests (node-id prefixes from the repository root) that drive it through Lightning
FLOOR_TESTS: dict[str, tuple[str, ...]] = {
    # callbacks: their hooks, state_dict and resume in a real Trainer
    "AdaptiveGradClip": (f"{_CB}test_adaptive_grad_clip.py::test_state_dict_round_trip_resume_and_pickle",),
    "EarlyStopping": (
        f"{_CB}test_early_stopping.py::test_state_dict_round_trip_and_resume_continues_the_count",
        f"{_CB}test_legacy_checkpoint.py::test_a_real_trainer_resumes_from_the_issue23_early_stopping_checkpoint",
    ),
    "FinetuneSchedule": (
        f"{_CB}test_finetune_schedule.py::test_kill_and_resume_across_the_unfreeze_point_is_bitwise",
    ),
    "GradNormMonitor": (f"{_CB}test_grad_norm_monitor.py::test_state_dict_round_trip_and_resume",),
    "HealthMonitor": (f"{_CB}test_health_monitor.py::test_state_dict_round_trip_and_resume_keeps_findings",),
    "InputPipelineMonitor": (
        f"{_CB}test_input_pipeline_monitor.py::test_resume_restores_totals_and_the_warned_flag",
    ),
    "RunManifest": (f"{_CB}test_run_manifest.py::test_state_dict_round_trip_and_resume",),
    "StabilityGuard": (
        f"{_CB}test_stability_guard.py::test_max_rollbacks_exceeded_writes_emergency_checkpoint_and_raises",
        f"{_CB}test_legacy_checkpoint.py::test_a_real_trainer_resumes_from_the_issue23_stability_guard_checkpoint",
    ),
    # the sanity checks: one base class holds their Lightning hooks; Preflight runs them in fit
    "SanityCheck": (
        "tests/checks/test_callbacks.py::test_check_alone_as_callback_raises_before_training",
        "tests/checks/test_callbacks.py::test_check_reads_datamodule_and_model_hook_loaders",
        "tests/checks/test_compat.py::test_checkpoint_written_before_the_move_restores_the_check_callbacks",
    ),
    "Preflight": (
        "tests/checks/test_callbacks.py::test_preflight_callback_runs_chosen_checks_and_prints",
        "tests/checks/test_preflight_callback.py::test_ddp_ranks_check_the_loader_with_the_trainers_distributed_sampler",
    ),
    "TrialRecorder": ("tests/harness/test_trial_fit.py",),
    # tuning callbacks
    "LRRangeTest": (
        "tests/tune/test_lr_range.py::test_callback_applies_the_peak_lr_to_every_group_and_its_schedule",
    ),
    "ApplySpeedOptions": (
        "tests/tune/test_apply_speed_options.py::test_the_callback_applies_the_module_options_inside_fit",
    ),
    "StepTimer": (
        "tests/tune/test_speed.py::test_faster_options_are_combined_and_their_kwargs_build_a_trainer",
    ),
    # data modules and the demo's module
    "CharLMDataModule": ("tests/data/test_datamodules.py",),
    "DigitsDataModule": ("tests/data/test_datamodules.py",),
    "RecipeDigitsCNN": (
        "tests/demos/test_training.py::test_demo_command_reaches_accuracy_and_prints_summary",
    ),
    # strategies
    "RecipesDDPStrategy": (
        "tests/strategies/test_ddp_presets.py::test_ddp_preset_trains_like_single_process_and_resumes_exactly",
    ),
    "RecipesFSDPStrategy": (
        "tests/strategies/test_presets.py::test_fsdp1_on_cpu_is_refused_at_setup_before_any_work",
    ),
    "RecipesFSDP2Strategy": (
        "tests/strategies/test_fsdp2.py::test_fsdp2_trains_like_single_process_and_resumes_exactly",
    ),
    "RecipesDeepSpeedStrategy": (
        "tests/strategies/test_deepspeed.py::test_reconciled_config_passes_deepspeeds_own_validation",
    ),
    # the points that are not a subclass
    "RecipeMixin (configure_optimizers, schedule across resume)": (
        "tests/test_mixins.py::test_fit_then_resume_continues_the_schedule_exactly",
    ),
    "MixingMixin (training batches, resume)": (
        "tests/test_mixing_trainer.py::test_resume_continues_the_same_mixing_stream_bitwise",
    ),
    "LightningCLI": (
        "tests/test_lightning_cli_callbacks.py",
        "tests/test_mixing_trainer.py::test_lightning_cli_yaml_builds_the_mixer",
        "tests/tune/test_lr_find_recipe.py::test_lightning_cli_yaml_lr_find",
    ),
    "lr_find through the Trainer": (
        "tests/tune/test_lr_find_recipe.py::test_the_run_trains_at_find_lr_pick_on_the_same_model_data_and_seed",
    ),
    "Fabric": ("tests/test_fabric_scope.py",),
    "loggers (CSV, TensorBoard, wandb)": (
        "tests/test_logger_compat.py::test_every_callback_logs_documented_keys",
    ),
    "checkpoints written by earlier releases": (f"{_CB}test_legacy_checkpoint.py",),
}


def _matches(nodeid: str, entry: str) -> bool:
    return nodeid == entry or nodeid.startswith((entry + "::", entry + "["))


def _nodeid(item: pytest.Item) -> str:
    """The item's node id from the repository root (the rootdir may differ)."""
    _, sep, rest = item.nodeid.partition("::")
    return Path(str(item.path)).relative_to(ROOT).as_posix() + sep + rest


def mark_floor(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``floor`` every collected test that a :data:`FLOOR_TESTS` entry names; fail on a stale entry (one
    that matches no test of a file collected whole: no ``path::test`` argument)."""
    entries = sorted({entry for tests in FLOOR_TESTS.values() for entry in tests})
    gone = [entry for entry in entries if not (ROOT / entry.split("::")[0]).exists()]
    ids = {item: _nodeid(item) for item in items if ROOT in Path(str(item.path)).parents}
    whole_files = not any("::" in arg for arg in config.args)
    collected_files = {nodeid.split("::")[0] for nodeid in ids.values()} if whole_files else set()
    unmatched = [
        entry
        for entry in entries
        if entry.split("::")[0] in collected_files
        and not any(_matches(nodeid, entry) for nodeid in ids.values())
    ]
    if gone or unmatched:
        raise pytest.UsageError(
            f"tests/helpers/floor.py: FLOOR_TESTS names tests that do not exist: {gone + unmatched}. "
            "Name the test that now drives that integration point through Lightning."
        )
    marker = getattr(pytest.mark, FLOOR)
    for item, nodeid in ids.items():
        if any(_matches(nodeid, entry) for entry in entries):
            item.add_marker(marker)


def integration_points() -> list[str]:
    """The public classes of ``lightning_recipes`` (not its test tools) that override a Lightning method."""
    import importlib
    import inspect
    import pkgutil

    import lightning.pytorch as pl
    from lightning.pytorch.cli import LightningCLI
    from lightning.pytorch.loggers import Logger
    from lightning.pytorch.strategies import Strategy

    import lightning_recipes

    bases = (pl.Callback, Strategy, pl.LightningModule, pl.LightningDataModule, Logger, LightningCLI)
    found = []
    for info in pkgutil.walk_packages(lightning_recipes.__path__, "lightning_recipes."):
        if info.name.startswith("lightning_recipes.testing") or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, cls in vars(module).items():
            public = not name.startswith("_")
            if not (
                public and inspect.isclass(cls) and cls.__module__ == info.name and issubclass(cls, bases)
            ):
                continue
            base = next(b for b in bases if issubclass(cls, b))
            own = {
                attribute
                for klass in cls.__mro__
                if klass.__module__.startswith("lightning_recipes")
                and (klass is cls or not issubclass(klass, base))
                for attribute in vars(klass)
                if hasattr(base, attribute) and not attribute.startswith("_")
            }
            if own:
                found.append(name)
    return sorted(found)
