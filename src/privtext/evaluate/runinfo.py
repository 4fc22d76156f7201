"""Read-only view of a run directory (see :mod:`privtext.rundir` for the layout).

The rows that evaluation uses are the ones the methods define:

* the selected samples of iteration t: rows of ``checkpoints/iter_t/candidates.parquet`` with ``selected``;
* the final synthetic set: ``synthetic.jsonl`` (falls back to the selected samples of the last complete
  iteration while a run is unfinished);
* zero-shot generator output without private feedback: ``origin == "random"`` rows of ``iter_000``, of which
  N_syn are drawn at random with a seeded generator.
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..atomicio import read_jsonl
from ..data.corpus import Corpus
from ..errors import RunError
from ..rundir import RunDir


class RunView:
    """Lazy accessors over one run directory; nothing here writes."""

    def __init__(self, root: str | os.PathLike[str]):
        self.dir = RunDir(Path(root).resolve())
        self.root = self.dir.root
        if not self.root.is_dir():
            raise RunError(f"{self.root}: no such run directory")
        self.dir.require()

    # ------------------------------------------------------------------------------------------ files
    @cached_property
    def config(self) -> dict[str, Any]:
        """The run's resolved configuration as a mapping (``private/config.yaml``, else ``config.yaml``), read once;
        raises :class:`~privtext.errors.RunError` when it is not YAML or not a mapping."""
        import yaml

        path = self.dir.resolved_config()  # the full one where it is here (the run's owner evaluates it)
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise RunError(f"{path}: unreadable ({e})") from None
        if not isinstance(raw, dict):
            raise RunError(f"{path}: expected a mapping at the top level")
        return raw

    def _json(self, path: Path) -> dict[str, Any]:
        if not path.exists():
            return {}
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise RunError(f"{path}: corrupt JSON ({e.msg})") from None
        return obj if isinstance(obj, dict) else {}

    @cached_property
    def privacy(self) -> dict[str, Any]:
        """``privacy.json`` as a mapping (empty when absent), read once; raises :class:`~privtext.errors.RunError`
        when it is corrupt."""
        return self._json(self.dir.privacy)

    @cached_property
    def metrics(self) -> dict[str, Any]:
        """``private/metrics.json`` (time and counts per stage) as a mapping, empty when absent, read once."""
        return self._json(self.dir.metrics)

    @cached_property
    def diagnostics(self) -> dict[str, Any]:
        """``private/diagnostics.json``: exact private statistics (for diagnostic reports only)."""
        return self._json(self.dir.diagnostics)

    @property
    def evaluation_path(self) -> Path:
        """``evaluation.json``: the shareable evaluation (release)."""
        return self.dir.evaluation

    @property
    def private_evaluation_path(self) -> Path:
        """``private/evaluation.json``: the whole evaluation, private diagnostics included."""
        return self.dir.private / "evaluation.json"

    def evaluation(self) -> dict[str, Any]:
        """The shareable evaluation (``evaluation.json``)."""
        return self._json(self.evaluation_path)

    def private_evaluation(self) -> dict[str, Any]:
        """The whole evaluation (``private/evaluation.json``; falls back to ``evaluation.json``)."""
        return self._json(self.private_evaluation_path) or self.evaluation()

    # ------------------------------------------------------------------------------------------ config bits
    @property
    def name(self) -> str:
        """The configured run name, else the folder's name."""
        return str(self.config.get("name") or self.root.name)

    @property
    def method(self) -> str:
        """The method's registered name, from privacy.json (else the configuration; ``"?"`` when neither says)."""
        return str(self.privacy.get("method") or self.config.get("method") or "?")

    @property
    def seed(self) -> int:
        """The run's seed (0 when the configuration holds no non-negative integer)."""
        s = self.config.get("seed")
        return int(s) if isinstance(s, int) and s >= 0 else 0

    @property
    def data(self) -> dict[str, Any]:
        """The configuration's ``data`` section (empty when absent)."""
        d = self.config.get("data")
        return d if isinstance(d, dict) else {}

    @property
    def text_column(self) -> str:
        """The private corpus's text column (default ``text``)."""
        return str(self.data.get("text_column") or "text")

    @property
    def label_columns(self) -> list[str]:
        """The configured label columns (empty for unlabelled data)."""
        return [str(c) for c in (self.data.get("label_columns") or [])]

    @property
    def num_samples(self) -> int | None:
        """The configured number of synthetic samples (``synthesis.num_samples``; ``evolution.num_samples`` in a
        run made before it moved), or ``None`` when not set."""
        n = None
        for section in ("synthesis", "evolution"):
            sec = self.config.get(section)
            if n is None and isinstance(sec, dict):
                n = sec.get("num_samples")
        return int(n) if isinstance(n, int) else None

    @property
    def embedder_config(self) -> dict[str, Any] | None:
        """The configuration's ``embedder`` section, or ``None`` when absent."""
        e = self.config.get("embedder")
        return e if isinstance(e, dict) else None

    # ------------------------------------------------------------------------------------------ checkpoints
    def iterations(self) -> list[int]:
        """The iterations whose checkpoint is complete, in order."""
        return self.dir.complete_iterations()

    def _ckpt(self, t: int) -> Any:
        store = self.dir.iteration(t)
        if not store.is_complete():
            raise RunError(f"{store.folder}: checkpoint missing or incomplete (no COMPLETE marker)")
        return store

    def candidates(self, t: int) -> Any:
        """The candidates table of iteration ``t`` (pandas DataFrame)."""
        store = self._ckpt(t)
        df = store.candidates()
        missing = [c for c in ("text", "selected") if c not in df.columns]
        if missing:
            raise RunError(f"{store.folder}: candidates table lacks column(s) {missing}; has {list(df.columns)}")
        return df

    def state(self, t: int) -> dict[str, Any]:
        """The state.json summary of iteration ``t``; raises :class:`~privtext.errors.RunError` when its checkpoint
        is incomplete."""
        return dict(self._ckpt(t).state())

    def histogram(self, t: int) -> np.ndarray | None:
        """The released histogram iteration ``t`` selected with (``None`` when not saved); raises
        :class:`~privtext.errors.RunError` when the checkpoint is incomplete."""
        return self._ckpt(t).histogram()

    def _frame_corpus(self, df: Any, name: str) -> Corpus:
        labels = {c: [str(x) for x in df[c]] for c in self.label_columns if c in df.columns}
        ids = [str(x) for x in df["id"]] if "id" in df.columns else [str(i) for i in range(len(df))]
        return Corpus.from_texts([str(x) for x in df["text"]], labels, ids=ids, name=name)

    def selected(self, t: int) -> Corpus:
        """The selected samples of iteration ``t`` (what the method carries forward / releases)."""
        df = self.candidates(t)
        return self._frame_corpus(df[df["selected"].astype(bool)].reset_index(drop=True), f"{self.name}@{t}")

    def synthetic(self) -> Corpus:
        """The final synthetic set (``synthetic.jsonl``; else the selected samples of the last iteration)."""
        if self.dir.synthetic.exists():
            recs = read_jsonl(self.dir.synthetic)
            if recs:
                labels = {c: [str(r.get(c, "")) for r in recs] for c in self.label_columns if c in recs[0]}
                ids = [str(r.get("id", i)) for i, r in enumerate(recs)]
                return Corpus.from_texts([str(r["text"]) for r in recs], labels, ids=ids, name=self.name)
        its = self.iterations()
        if not its:
            raise RunError(f"{self.root}: no synthetic.jsonl and no complete checkpoint to read samples from")
        return self.selected(its[-1])

    def zero_shot(self, n: int | None, *, rng: np.random.Generator) -> Corpus | None:
        """``n`` zero-shot generator samples (origin == "random" in iteration 0), drawn with ``rng``."""
        if 0 not in self.iterations():
            return None
        df = self.candidates(0)
        if "origin" not in df.columns:
            return None
        df = df[df["origin"] == "random"].reset_index(drop=True)
        if len(df) == 0:
            return None
        if n is not None and n < len(df):
            df = df.iloc[np.sort(rng.choice(len(df), size=n, replace=False))].reset_index(drop=True)
        return self._frame_corpus(df, f"{self.name}:zero-shot")


__all__ = ["RunView"]
