"""Reading a LightningCLI training config (``python train.py fit --print_config``) in the ``preflight`` and
``tune`` commands: one reader, so both accept the same file.

Example:
    >>> import pathlib, tempfile, yaml
    >>> text = "trainer:\\n  precision: bf16-mixed\\n  max_epochs: 3\\nmodel:\\n  class_path: pkg.Net\\n"
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "config.yaml"
    >>> _ = path.write_text(text)
    >>> args = with_lightning_cli_config(["--config", str(path)], ("model",), trainer_keys=("precision",))
    >>> args[0], yaml.safe_load(args[1])
    ('--config', {'model': {'class_path': 'pkg.Net'}, 'precision': 'bf16-mixed'})
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lightning_recipes._cli_errors import UsageError

__all__ = ["with_lightning_cli_config"]


def with_lightning_cli_config(
    args: Sequence[str], own_keys: Sequence[str], trainer_keys: Sequence[str] = ()
) -> list[str]:
    """``args`` with each ``--config FILE`` replaced by the parts of it the command reads.

    A LightningCLI config (``--print_config``) holds ``trainer``, ``seed_everything``, ``optimizer``, ... next
    to ``model`` and ``data``: the command's ``own_keys`` are kept, and each of ``trainer_keys`` set in the
    ``trainer`` section (``precision``, ``gradient_clip_val``, ...) becomes the command's top-level key of
    that name (-1, Lightning's "unset", is dropped as null is); the rest is dropped. With a fixed model class
    (``LightningCLI(MyModel)``) the ``model`` section holds the init arguments only; the class then comes from
    ``--model`` (``--data`` likewise). A config written for the ``fit`` subcommand (``fit:`` at the top) is
    read inside it.

    Raises:
        UsageError: For a missing file, a file that is not a YAML mapping, or a section without
            ``class_path`` when the command line does not name the class (a ``ValueError``).
    """
    args = list(args)
    out: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--config" and index + 1 < len(args):
            path, index = args[index + 1], index + 2
        elif arg.startswith("--config="):
            path, index = arg.split("=", 1)[1], index + 1
        else:
            out.append(arg)
            index += 1
            continue
        out += ["--config", _own_sections(path, args, own_keys, trainer_keys)]
    return out


def _own_sections(path: str, args: list[str], own_keys: Sequence[str], trainer_keys: Sequence[str]) -> str:
    import yaml

    file = Path(path)
    if not file.is_file():
        if "\n" in path or ":" in path or path.lstrip().startswith("{"):
            return path  # a YAML string: jsonargparse reads it
        raise UsageError(f"--config {path}: no such file (give the path of a YAML config file)")
    try:
        data: Any = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        problem = getattr(err, "problem", None) or "not YAML"
        raise UsageError(f"--config {path} is not valid YAML{line}: {problem}; fix the file") from None
    if not isinstance(data, dict):
        raise UsageError(f"`--config` {path} must hold a YAML mapping, got {type(data).__name__}.")
    if set(data) == {"fit"} and isinstance(data["fit"], dict):  # a config written for the `fit` subcommand
        data = data["fit"]
    kept = {key: value for key, value in data.items() if key in own_keys and value is not None}
    trainer = data.get("trainer")
    if isinstance(trainer, dict) and "trainer" not in own_keys:
        # -1: Lightning's "unset" (max_steps) and "no limit" (max_epochs), as null
        kept.update({key: trainer[key] for key in trainer_keys if trainer.get(key) not in (None, -1)})
    for section in ("model", "data"):
        value = kept.get(section)
        if isinstance(value, dict) and "class_path" not in value:
            class_path = _flag_value(args, f"--{section}")
            if class_path is None:
                raise UsageError(
                    f"the `{section}` section of {path} has no `class_path` (LightningCLI with a fixed "
                    f"{section} class writes only its arguments): pass the class too, e.g. "
                    f"`--{section} my_pkg.MyClass`."
                )
            kept[section] = {"class_path": class_path, "init_args": value}
    return yaml.safe_dump(kept, sort_keys=False)


def _flag_value(args: list[str], flag: str) -> str | None:
    """The value of ``flag`` on the command line (``--flag v`` or ``--flag=v``), if given."""
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None
