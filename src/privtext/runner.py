"""Run a configuration end to end, or resume a run directory."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from .config import Config, config_from_dict
from .errors import ConfigError, DataError, ResumeError, RunError
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


def preflight(config: Config, cls: type[Any]) -> None:
    """Everything that can be checked before a run directory exists: the method's static checks, the corpora
    (readable, non-empty, the columns named), every private label inside a declared schema, the budget against
    the data (δ must be well below 1/N), and the backends (options, and that a model loads here — offline, a
    model missing from the cache fails at once with the folder to fill). A configuration that fails here leaves
    nothing on disk."""
    from .embed import check_embedder
    from .generate import check_generator
    from .methods.base import private_groups, read_inputs
    from .rng import derive

    cls.check_config(config, cls.parse_options(config))
    inputs = read_inputs(config, subsample_rng=lambda: derive(0, "preflight"),
                         public_rng=lambda: derive(0, "preflight"))
    if inputs.public is not None:
        from .guard import PrivateGuard

        guard = PrivateGuard(inputs.private.texts)
        if any(guard.is_private_record(t) for t in inputs.public.texts):
            raise DataError(
                f"the public corpus {config.data.public} contains records equal to private records: a generator must "
                "never be trained on private text; remove them from the public corpus")
    p = config.privacy
    if p.delta is not None and p.delta >= 1.0 / len(inputs.private):
        # N is private: the message does not print it
        raise ConfigError(
            f"privacy.delta={p.delta:g} is too large for this data: δ must be well below 1/N (N, the number of "
            "private records, is not printed here); with δ ≥ 1/N a mechanism that publishes one record in full "
            "meets the definition")
    declared = config.data.label_values
    if declared is not None:  # a private label outside the declared schema is refused now, not mid-run
        import itertools

        from .data.labels import LabelSpace

        columns = tuple(config.data.label_columns)
        private_groups(config, LabelSpace(columns, tuple(itertools.product(*(tuple(declared[c]) for c in columns)))),
                       inputs.private)
    gens = config.generators or [config.generator]
    for g in gens:
        check_generator(g)
    check_embedder(config.embedder)


def run_config(config: Config, *, out: str | os.PathLike[str] | None = None, force: bool = False,
               callbacks: Sequence[Callable[[Any], None]] = ()) -> Path:
    """Run ``config`` into a new run directory (``out`` or ``config.output``) and return its path.

    The configuration, the method's options, the data and the budget are checked first; the run directory is then
    created atomically. ``force`` replaces an existing run directory that never released anything."""
    source = config.source_path
    config, cls = resolve_config(config)
    preflight(config, cls)
    root = Path(out if out is not None else config.output)
    protect = input_paths(config) + ([Path(source)] if source else [])
    run = RunDir(root).create(config_text=config.shareable_yaml(), private_config_text=config.to_yaml(), force=force,
                              protect=protect)
    with run.lock(purpose="privtext run"):
        run.log(f"privtext run: method={config.method} output={root}")
        return cls(config, run, callbacks=callbacks).execute()


def input_paths(config: Config) -> list[Path]:
    """Every existing file or folder the (resolved) configuration names: the corpora, detector and glossary files,
    local models, the configuration file itself. ``--force`` never removes a folder that holds one of them."""
    out: list[Path] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, str) and x and ("/" in x or os.sep in x) and "\n" not in x:
            try:
                p = Path(x)
                if p.exists():
                    out.append(p)
            except (OSError, ValueError):
                pass

    d = config.dump()
    d.pop("output", None)  # the run directory itself
    walk(d)
    return out


def load_run_config(run_dir: str | os.PathLike[str]) -> Config:
    run = RunDir(run_dir).require()
    path = run.resolved_config()
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise RunError(f"{path}: cannot read the resolved config ({e})") from None
    return config_from_dict(raw, source=str(path))


def resume_run(run_dir: str | os.PathLike[str], *, callbacks: Sequence[Callable[[Any], None]] = ()) -> Path:
    """Continue a run from its last complete iteration. Released noisy values are reused, never redrawn."""
    run = RunDir(run_dir).require()
    config = load_run_config(run_dir)
    if run.is_complete():
        raise ResumeError(f"{run.root} is already complete ({run.synthetic.name} and {run.privacy.name} exist): "
                          "nothing to resume")
    with run.lock(purpose="privtext resume"):
        done = run.complete_iterations()
        run.log(f"privtext resume: {len(done)} complete iteration(s) of {config.evolution.iterations}")
        config, cls = resolve_config(config)
        return cls(config, run, callbacks=callbacks).execute()
