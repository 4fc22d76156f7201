"""Run a configuration end to end, or resume a run directory."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .config import Config, config_from_dict
from .errors import ConfigError, DataError, ResumeError, RunError
from .methods import METHODS
from .rundir import RunDir

if TYPE_CHECKING:
    from .methods.base import Prepared


def resolve_config(config: Config) -> tuple[Config, type[Any]]:
    """``config`` with the method name made canonical, every method section checked against the registered
    methods (an unknown one is an error with a suggestion), the method's own section validated by its ``Options``
    model and written out in full (defaults included), a budget form its description cannot account for refused,
    and paths made absolute; plus the method class. Raises before anything is written."""
    name = METHODS.canonical(config.method)
    cls = METHODS.get(name)
    config.check_sections(method_sections())
    description = cls.description
    if config.privacy.kind == "pure" and description.guarantee != "pure":
        pure = [n for n in METHODS.names() if METHODS.get(n).description.guarantee == "pure"]
        raise ConfigError("privacy.epsilon needs privacy.delta (e.g. 1e-5): epsilon alone (pure ε-DP) is only for "
                          f"the methods whose guarantee is pure ε-DP ({', '.join(pure) or 'none is registered'}); "
                          f"method {name}'s guarantee is {description.guarantee} "
                          + ("(p, r)-secret protection" if description.guarantee == "secret" else "DP"))
    options = cls.parse_options(config)
    d = config.with_absolute_paths().dump()
    d["method"] = name
    d[description.section] = options.model_dump(mode="json")
    return Config.model_validate(d), cls


def method_sections() -> list[str]:
    """The configuration sections of the registered methods: every registered name (a method's description
    names its section, which is its registered name: tests/test_method_contract.py checks it), so checking a
    configuration imports no method module."""
    return METHODS.names()


def static_check(config: Config) -> None:
    """The checks of :func:`preflight` that read no data and load no model: the method exists, its options parse,
    and its configuration checks (``check_learning``, ``check_config``) pass. ``privtext compare`` runs them on
    every configuration before it starts the first run, so a bad seventh configuration fails at once instead of
    after six finished runs."""
    _method_checks(*resolve_config(config))


def _method_checks(config: Config, cls: type[Any]) -> None:
    """The method's own configuration checks: its options parse, ``check_learning``, then ``check_config``."""
    options = cls.parse_options(config)
    cls.check_learning(config, options)
    cls.check_config(config, options)


def preflight(config: Config, cls: type[Any]) -> tuple[Config, Prepared]:
    """Everything that can be checked before a run directory exists: the method's static checks, the corpora
    (readable, non-empty, the columns named), the label set-up (the label space, the label distribution, every
    private label inside a declared schema), the budget against the data (δ must be well below 1/N) and its
    strength, and the backends (options, and that a model loads here — offline, a model missing from the cache
    fails at once with the folder to fill). A configuration that fails here leaves nothing on disk.

    Returns ``config`` with ``synthesis.label_distribution.kind: auto`` replaced by the kind it stands for
    (:func:`privtext.methods.base.resolve_label_distribution`, the reason in ``picked``), so the run directory's
    configuration, its resume and its statement all name the kind that was used; and the corpora as read
    (:meth:`privtext.methods.base.MethodRun.prepare`, with the run's own streams), which the run takes
    (:meth:`~privtext.methods.base.MethodRun.execute`) instead of reading them again."""
    from .embed import check_embedder
    from .generate import check_generator
    from .methods.base import (
        MethodRun,
        label_space,
        private_groups,
        public_label_weights,
        resolve_label_distribution,
    )
    from .progress import say

    _method_checks(config, cls)
    prepared = cls.prepare(config)
    inputs = prepared.inputs
    if inputs.public is not None:
        _check_public_overlap(config, inputs)
    p = config.privacy
    if p.delta is not None and p.delta >= 1.0 / len(inputs.private):
        # N is private: the message does not print it
        raise ConfigError(
            f"privacy.delta={p.delta:g} is too large for this data: δ must be well below 1/N (N, the number of "
            "private records, is not printed here); with δ ≥ 1/N a mechanism that publishes one record in full "
            "meets the definition")
    level, why = p.strength()
    if level != "ok":
        from rich.markup import escape

        from .config import WEAK_EPSILON
        from .privacy.statement import _factor

        say(f"[bold yellow]warning:[/] the privacy budget {escape(why)} is "
            + ("too large to protect anything meaningful (accepted because privacy.allow_weak: true)"
               if level == "void" else
               f"weak: above ε = {WEAK_EPSILON:g} the chance of any conclusion about one record may change by a "
               f"factor above {_factor(WEAK_EPSILON)}")
            + "; privacy.json says so")
    kind, why_kind = resolve_label_distribution(config, inputs.public)
    if config.synthesis.label_distribution.kind == "auto":
        d = config.dump()
        d["synthesis"]["label_distribution"]["kind"] = kind
        d["synthesis"]["label_distribution"]["picked"] = why_kind
        source = config.source_path
        config = Config.model_validate(d)
        config._source_path = source
    # the label set-up as the run will build it; a method that moves private records to the public side
    # (SecPE's secret-free records) builds its label space after that split, so only its declared schema is
    # checked here when it has no public corpus of its own
    splits = getattr(cls, "split_data", MethodRun.split_data) is not MethodRun.split_data
    if config.data.label_columns and not (splits and inputs.public is None):
        space = label_space(config, inputs.public)
        private_groups(config, space, inputs.private)
        public_label_weights(config, space, inputs.public)
    elif config.data.label_values is not None:
        import itertools

        from .data.labels import LabelSpace

        columns = tuple(config.data.label_columns)
        declared = config.data.label_values
        private_groups(config, LabelSpace(columns, tuple(itertools.product(*(tuple(declared[c]) for c in columns)))),
                       inputs.private)
    gens = config.generators or [config.generator]
    for g in gens:
        check_generator(g)
    check_embedder(config.embedder)
    return config, prepared


#: the share of private records the public corpus may hold word for word before a run is refused as misconfigured
PUBLIC_OVERLAP_REFUSED = 0.5


def _check_public_overlap(config: Config, inputs: Any) -> None:
    """A pre-release configuration check whose result reaches only whoever runs privtext (the data owner), before
    anything is written: the public corpus must not BE the private one. The same file named twice, or a public
    corpus holding more than half of the private records word for word, is refused as a mistake. A few private
    records that public text happens to hold ("thank you!") are public by the run's stated assumption (a text the
    public corpus holds is public: privacy.json), and the run goes on; whether it does says nothing released."""
    d = config.data
    same = False
    try:
        same = bool(d.public and not str(d.public).startswith("hf:")
                    and Path(d.public).resolve() == Path(d.private).resolve())
    except OSError:
        pass
    if same:
        raise DataError(f"data.public and data.private name the same file ({d.public}): the public corpus holds "
                        "the private records; give text that may be published as data.public")
    public = {_norm(t) for t in inputs.public.texts}
    held = sum(1 for t in inputs.private.texts if _norm(t) in public)
    if held > PUBLIC_OVERLAP_REFUSED * len(inputs.private):
        # the count and N are private: the message gives neither
        raise DataError(
            f"the public corpus {d.public} holds more than half of the private records word for word: it looks "
            "like the private data (or a copy of it); give public text for data.public (a text the public corpus "
            "holds is treated as public, so these records would get no protection)")


def _norm(text: str) -> str:
    """A text as a record comparison sees it: lower-case words (the guard's whole-record rule)."""
    import re

    return " ".join(re.findall(r"\w+", text.lower()))


def run_config(config: Config, *, out: str | os.PathLike[str] | None = None, force: bool = False,
               callbacks: Sequence[Callable[[Any], None]] = ()) -> Path:
    """Run ``config`` into a new run directory (``out`` or ``config.output``) and return its path.

    The configuration, the method's options, the data and the budget are checked first; the run directory is then
    created atomically. ``force`` replaces an existing run directory that never released anything. A
    configuration or data error the method raises after the directory exists, before any noisy release, removes
    the directory again (or, for a folder that existed empty, what privtext wrote in it), so the rerun needs no
    ``--force``."""
    from .progress import quiet_libraries

    with quiet_libraries():
        return _run_config(config, out=out, force=force, callbacks=callbacks)


def _run_config(config: Config, *, out: str | os.PathLike[str] | None, force: bool,
                callbacks: Sequence[Callable[[Any], None]]) -> Path:
    source = config.source_path
    config, cls = resolve_config(config)
    config, prepared = preflight(config, cls)
    root = Path(out if out is not None else config.output)
    existed = root.exists()
    protect = input_paths(config) + ([Path(source)] if source else [])
    run = RunDir(root).create(config_text=config.shareable_yaml(), private_config_text=config.to_yaml(), force=force,
                              protect=protect)
    try:
        with run.lock(purpose="privtext run"):
            run.log(f"privtext run: method={config.method} output={root}")
            ld = config.synthesis.label_distribution
            if ld.picked:
                run.log(f"synthesis.label_distribution: {ld.kind} ({ld.picked})")
            return cls(config, run, callbacks=callbacks).execute(prepared)
    except (ConfigError, DataError):
        _undo_start(run, existed=existed)
        raise


def _undo_start(run: RunDir, *, existed: bool) -> None:
    """After a configuration or data error: remove the run directory this call made when nothing was released
    and it holds only privtext's files (else leave it as it is: ``privtext resume`` or ``--force`` decide)."""
    import shutil

    try:
        if run.has_releases() or run.strays() or not run.is_privtext_run():
            return
        if existed:
            run._remove_own_entries()
        else:
            shutil.rmtree(run.root)
    except OSError:
        pass


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
    from .progress import quiet_libraries

    with run.lock(purpose="privtext resume"), quiet_libraries():
        done = run.complete_iterations()
        run.log(f"privtext resume: {len(done)} complete iteration(s) of {config.evolution.iterations}")
        config, cls = resolve_config(config)
        return cls(config, run, callbacks=callbacks).execute()
