"""privtext from Python.

>>> import privtext
>>> run = privtext.run("yelp.yaml", evolution__iterations=2, privacy={"epsilon": 4.0, "delta": 1e-5})
>>> run.synthetic.head()            # pandas DataFrame: id, text, label columns
>>> run.statement.headline          # the guarantee, in words (privacy.json)
>>> [r.key for r in run.releases]   # every noisy release, from the ledger
>>> run.evaluate(real="heldout.csv")["fid"]

* :func:`run` — a configuration (a YAML path, a mapping or a :class:`~privtext.config.Config`) with keyword
  overrides: ``section__key=value`` sets one key (``evolution__iterations=2``), ``section={...}`` merges into a
  section, ``method="secpe"`` sets a top-level key. ``callbacks`` are called after every iteration with a
  :class:`~privtext.engine.loop.IterationResult` (iteration, summary, selected samples, released votes).
* :func:`resume` continues an interrupted run; :func:`load` opens a finished one.
* :class:`Run` — a run directory: the synthetic data (pandas, or a Hugging Face ``Dataset`` with ``to_dataset``),
  the statement, the releases, evaluation and report.

Composing parts yourself: the methods are classes (``privtext.methods.augpe.AugPE(config, run_dir,
callbacks=...)``), the engine takes a scorer (``privtext.engine.loop.Engine``), and every noisy value goes through
``privtext.privacy.ReleaseKeeper`` — see docs/architecture.md and docs/api.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import Config, config_from_dict, load_config
from .errors import ConfigError, optional_import
from .privacy.release import Release
from .privacy.statement import PrivacyStatement
from .rundir import RunDir

if TYPE_CHECKING:
    import pandas as pd

ConfigLike = Config | Mapping[str, Any] | str | os.PathLike[str]
Callback = Callable[[Any], None]


def _overrides(config: ConfigLike, overrides: Mapping[str, Any]) -> Config:
    if isinstance(config, Config):
        raw: dict[str, Any] = config.dump()
        source = "config"
    elif isinstance(config, Mapping):
        raw = json.loads(json.dumps(dict(config)))  # a deep copy of plain data
        source = "config"
    else:
        base = load_config(config)
        raw, source = base.dump(), str(config)
    for key, value in overrides.items():
        parts = key.split("__")
        if not all(parts):
            raise ConfigError(f"override {key!r}: use section__key=value (e.g. evolution__iterations=2)")
        cur: dict[str, Any] = raw
        for p in parts[:-1]:
            nxt = cur.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"override {key!r}: {p!r} is a value, not a section")
            cur = nxt
        last = parts[-1]
        if isinstance(value, Mapping) and isinstance(cur.get(last), dict) and last != "privacy":
            cur[last] = {**cur[last], **value}
        else:
            cur[last] = dict(value) if isinstance(value, Mapping) else value
    cfg = config_from_dict(raw, source=source)
    if not isinstance(config, (Config, Mapping)):
        cfg._source_path = base.source_path
    elif isinstance(config, Config):
        cfg._source_path = config.source_path
    return cfg


def run(config: ConfigLike, *, output: str | os.PathLike[str] | None = None, force: bool = False,
        callbacks: Sequence[Callback] = (), **overrides: Any) -> Run:
    """Run a configuration and return the :class:`Run` (see the module docstring for overrides)."""
    from .runner import run_config

    cfg = _overrides(config, overrides)
    return Run(run_config(cfg, out=output, force=force, callbacks=callbacks))


def resume(path: str | os.PathLike[str], *, callbacks: Sequence[Callback] = ()) -> Run:
    """Continue an interrupted run (released noisy values are read back, never redrawn)."""
    from .runner import resume_run

    return Run(resume_run(path, callbacks=callbacks))


def load(path: str | os.PathLike[str]) -> Run:
    """Open a run directory."""
    RunDir(path).require()
    return Run(Path(path))


@dataclass(frozen=True)
class Run:
    """A run directory, read through privtext's own readers."""

    path: Path

    @property
    def dir(self) -> RunDir:
        return RunDir(self.path)

    @property
    def config(self) -> Config:
        from .runner import load_run_config

        return load_run_config(self.path)

    @property
    def synthetic(self) -> pd.DataFrame:
        """The synthetic records as a pandas DataFrame (columns ``id``, ``text`` and the label columns)."""
        import pandas as pd

        rows = [json.loads(line) for line in self.dir.synthetic.read_text(encoding="utf-8").splitlines()
                if line.strip()]
        return pd.DataFrame(rows)

    def to_dataset(self) -> Any:
        """The synthetic records as a Hugging Face ``datasets.Dataset`` (extra ``[hf]``)."""
        datasets = optional_import("datasets", "hf", "Run.to_dataset")
        return datasets.Dataset.from_pandas(self.synthetic, preserve_index=False)

    @property
    def statement(self) -> PrivacyStatement:
        """``privacy.json``: the guarantee, parameters, released values and assumptions (shareable)."""
        return PrivacyStatement.from_dict(json.loads(self.dir.privacy.read_text(encoding="utf-8")))

    @property
    def releases(self) -> list[Release]:
        """Every noisy release recorded in the ledger (``private/ledger.jsonl``: a private diagnostic)."""
        return [Release.from_dict(json.loads(line)) for line in
                self.dir.ledger.read_text(encoding="utf-8").splitlines() if line.strip()]

    def evaluate(self, real: Any, **options: Any) -> dict[str, Any]:
        """:func:`privtext.evaluate.evaluate_run` on this run (writes ``evaluation.json``, the shareable part, and
        ``private/evaluation.json``, the whole; returns the whole)."""
        from .evaluate import evaluate_run

        return evaluate_run(self.path, real=real, **options)

    def report(self, **options: Any) -> Path:
        """:func:`privtext.report.build_report` on this run (``report.html``)."""
        from .report import build_report

        return build_report(self.path, **options)


__all__ = ["Run", "load", "resume", "run"]
