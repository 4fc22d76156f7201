"""Run a configuration end to end, or resume a run directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from .atomicio import atomic_write_text
from .config import Config, config_from_dict
from .errors import ResumeError, RunError
from .methods import METHODS
from .rundir import RunDir


def resolve_config(config: Config) -> tuple[Config, type[Any]]:
    """``config`` with the method name made canonical, the method's own section validated by its ``Options``
    model and written out in full (defaults included), and paths made absolute; plus the method class.
    Raises before anything is written."""
    name = METHODS.canonical(config.method)
    cls = METHODS.get(name)
    options = cls.parse_options(config)
    d = config.with_absolute_paths().dump()
    d["method"] = name
    d[name] = options.model_dump(mode="json")
    return Config.model_validate(d), cls


def run_config(config: Config, *, out: str | os.PathLike[str] | None = None) -> Path:
    """Run ``config`` into a new run directory (``out`` or ``config.output``) and return its path."""
    config, cls = resolve_config(config)
    root = Path(out if out is not None else config.output)
    run = RunDir(root).create()
    atomic_write_text(run.config, config.to_yaml())
    run.log(f"privtext run: method={config.method} output={root}")
    return cls(config, run).execute()


def load_run_config(run_dir: str | os.PathLike[str]) -> Config:
    run = RunDir(run_dir).require()
    try:
        raw = yaml.safe_load(run.config.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise RunError(f"{run.config}: cannot read the resolved config ({e})") from None
    return config_from_dict(raw, source=str(run.config))


def resume_run(run_dir: str | os.PathLike[str]) -> Path:
    """Continue a run from its last complete iteration. Released noisy values are reused, never redrawn."""
    run = RunDir(run_dir).require()
    config = load_run_config(run_dir)
    if run.synthetic.exists() and run.privacy.exists():
        raise ResumeError(f"{run.root} is already complete ({run.synthetic.name} and {run.privacy.name} exist)")
    done = run.complete_iterations()
    run.log(f"privtext resume: {len(done)} complete iteration(s) of {config.evolution.iterations}")
    config, cls = resolve_config(config)
    return cls(config, run).execute()
