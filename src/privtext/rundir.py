"""The run directory: the contract every later tool reads. This module is its only owner (file names live here).

A run's outputs are of two kinds (docs/privacy.md, "What a run releases"):

::

    RUN/                       the RELEASE: may be shared
      config.yaml              resolved configuration (written once at start)
      synthetic.jsonl          final records: text plus labels
      privacy.json             the guarantee in words and numbers (parameters, released values, assumptions)
      prompts.jsonl            every prompt sent to any generator (public text and released values only)
      heldout.jsonl            public records held out for evaluation (when data.public_holdout)
      report.html              the report (no private diagnostics unless asked for)
      private/                 PRIVATE DIAGNOSTICS, mode 0700: computed from private data, never shared
        ledger.jsonl           one privacy event per line, appended and fsync'd before the noisy value is used
        checkpoints/           iter_000/, ... plain Parquet + JSON, no pickle, raw noisy draws included; a folder
                               is complete when its COMPLETE marker exists (written last, atomically)
        diagnostics.json       exact statistics of the private data (counts, secrets, audit hits)
        metrics.json           counts and wall time per stage
        log.txt                human-readable log (holds exact private counts)
        cache/embeddings/      embedding cache keyed by a salted hash of each text

All whole-file writes are atomic (temporary file in the same folder, fsync, ``os.replace``, fsync of the folder),
so an interrupted run never leaves a half-written file under a final name.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import RunError

CONFIG = "config.yaml"
PRIVACY = "privacy.json"
PROMPTS = "prompts.jsonl"
SYNTHETIC = "synthetic.jsonl"
HELDOUT = "heldout.jsonl"
REPORT = "report.html"
EVALUATION = "evaluation.json"
PRIVATE = "private"
LEDGER = f"{PRIVATE}/ledger.jsonl"
CHECKPOINTS = f"{PRIVATE}/checkpoints"
METRICS = f"{PRIVATE}/metrics.json"
LOG = f"{PRIVATE}/log.txt"
DIAGNOSTICS = f"{PRIVATE}/diagnostics.json"
CACHE = f"{PRIVATE}/cache"
EMBED_CACHE = f"{CACHE}/embeddings"

#: files every finished run holds (relative to the run directory)
RUN_FILES = (CONFIG, PRIVACY, PROMPTS, SYNTHETIC, LEDGER, CHECKPOINTS, METRICS, LOG, DIAGNOSTICS)
#: the shareable part of a run
RELEASE_FILES = (CONFIG, SYNTHETIC, PRIVACY, PROMPTS, HELDOUT, REPORT, EVALUATION)


@dataclass
class StageMetrics:
    """Wall time and counts per stage (generation, embedding, voting, selection, ...).

    ``with metrics.stage("embedding", iteration=1) as s: ...; s.count("texts", 500)``.
    """

    stages: dict[str, dict[str, float]] = field(default_factory=dict)
    per_iteration: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)

    class _Stage:
        def __init__(self, parent: StageMetrics, name: str, iteration: int | None):
            self.parent, self.name, self.iteration = parent, name, iteration
            self.counts: dict[str, float] = {}

        def count(self, key: str, n: float) -> None:
            self.counts[key] = self.counts.get(key, 0) + n

    @contextlib.contextmanager
    def stage(self, name: str, *, iteration: int | None = None) -> Iterator[StageMetrics._Stage]:
        st = StageMetrics._Stage(self, name, iteration)
        t0 = time.perf_counter()
        try:
            yield st
        finally:
            dt = time.perf_counter() - t0
            self.add(name, dt, iteration=iteration, **st.counts)

    def add(self, name: str, seconds: float, *, iteration: int | None = None, **counts: float) -> None:
        agg = self.stages.setdefault(name, {"seconds": 0.0, "calls": 0})
        agg["seconds"] += seconds
        agg["calls"] += 1
        for k, v in counts.items():
            agg[k] = agg.get(k, 0) + v
        if iteration is not None:
            it = self.per_iteration.setdefault(str(iteration), {}).setdefault(name, {"seconds": 0.0})
            it["seconds"] += seconds
            for k, v in counts.items():
                it[k] = it.get(k, 0) + v

    def bump(self, key: str, n: float = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    def to_dict(self) -> dict[str, Any]:
        return {"stages": self.stages, "per_iteration": self.per_iteration, "counters": self.counters}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StageMetrics:
        return cls(
            stages={k: dict(v) for k, v in d.get("stages", {}).items()},
            per_iteration={k: {s: dict(x) for s, x in v.items()} for k, v in d.get("per_iteration", {}).items()},
            counters=dict(d.get("counters", {})),
        )


class RunDir:
    """Paths and writers of one run directory."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    # paths
    @property
    def config(self) -> Path:
        return self.root / CONFIG

    @property
    def ledger(self) -> Path:
        return self.root / LEDGER

    @property
    def privacy(self) -> Path:
        return self.root / PRIVACY

    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS

    @property
    def prompts(self) -> Path:
        return self.root / PROMPTS

    @property
    def synthetic(self) -> Path:
        return self.root / SYNTHETIC

    @property
    def metrics(self) -> Path:
        return self.root / METRICS

    @property
    def log_path(self) -> Path:
        return self.root / LOG

    @property
    def embed_cache(self) -> Path:
        return self.root / EMBED_CACHE

    @property
    def cache(self) -> Path:
        return self.root / CACHE

    @property
    def private(self) -> Path:
        return self.root / PRIVATE

    @property
    def diagnostics(self) -> Path:
        return self.root / DIAGNOSTICS

    @property
    def heldout(self) -> Path:
        return self.root / HELDOUT

    @property
    def report(self) -> Path:
        return self.root / REPORT

    @property
    def diagnostic_report(self) -> Path:
        return self.private / REPORT

    @property
    def evaluation(self) -> Path:
        return self.root / EVALUATION

    def checkpoint(self, iteration: int) -> Path:
        return self.checkpoints / f"iter_{iteration:03d}"

    def create(self, *, exist_ok: bool = False) -> RunDir:
        if self.root.exists() and any(self.root.iterdir()) and not exist_ok:
            raise RunError(
                f"run directory {self.root} already exists and is not empty; "
                f"use `privtext resume {self.root}` or choose another output"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        self.private.mkdir(mode=0o700, exist_ok=True)
        os.chmod(self.private, 0o700)  # mkdir's mode is filtered by the umask
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        for name in (LEDGER, PROMPTS, LOG):
            (self.root / name).touch(mode=0o600, exist_ok=True)
        return self

    def require(self) -> RunDir:
        if not self.config.exists():
            raise RunError(f"{self.root} is not a privtext run directory (no {CONFIG})")
        return self

    def log(self, message: str) -> None:
        stamp = _dt.datetime.now().isoformat(timespec="seconds")
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(f"{stamp} {message}\n")

    def complete_iterations(self) -> list[int]:
        """Iterations whose checkpoint folder carries its COMPLETE marker, in order."""
        out = []
        if not self.checkpoints.exists():
            return out
        for p in sorted(self.checkpoints.glob("iter_*")):
            if (p / "COMPLETE").exists():
                out.append(int(p.name.split("_")[1]))
        return out
