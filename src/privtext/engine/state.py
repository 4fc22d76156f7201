"""Population, checkpoints and released values.

Checkpoint layout (one folder per iteration; plain Parquet, ``.npy``/``.npz`` without pickle, and JSON)::

    checkpoints/iter_003/
      population.parquet   candidates before the vote: id, text, <labels>, group, origin, parent, generator
      embeddings.npy       float32 embeddings of the candidates (rows aligned)
      vote_embeddings.npy  (only with lookahead) the embeddings the vote used
      releases/*.npz       every noisy value released in this iteration, saved right after it was drawn
      histogram.npy        the released histogram used for selection (float64)
      candidates.parquet   population + votes + selected (written at the end of the iteration)
      state.json           iteration summary
      COMPLETE             written last: the iteration is finished

A released value is saved atomically before it is used. On resume it is read back, never redrawn.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..atomicio import atomic_path, atomic_write_json, atomic_write_text
from ..errors import PrivacyError, ResumeError
from ..rundir import RunDir


@dataclass
class Population:
    ids: list[str]
    texts: list[str]
    group: np.ndarray  # int64 label-group index per candidate
    origin: list[str]  # random | variation | survivor | lookahead
    parent: list[str | None]
    generator: list[str]
    emb: np.ndarray | None = None  # float32 (n, d)

    def __len__(self) -> int:
        return len(self.texts)

    @classmethod
    def empty(cls, dim: int | None = None) -> Population:
        return cls([], [], np.zeros(0, dtype=np.int64), [], [], [],
                   None if dim is None else np.zeros((0, dim), dtype=np.float32))

    def take(self, idx: Sequence[int] | np.ndarray) -> Population:
        idx = np.asarray(idx, dtype=np.int64)
        return Population(
            ids=[self.ids[i] for i in idx],
            texts=[self.texts[i] for i in idx],
            group=self.group[idx].copy(),
            origin=[self.origin[i] for i in idx],
            parent=[self.parent[i] for i in idx],
            generator=[self.generator[i] for i in idx],
            emb=None if self.emb is None else self.emb[idx].copy(),
        )

    @staticmethod
    def concat(parts: Sequence[Population]) -> Population:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Population.empty()
        embs = [p.emb for p in parts]
        return Population(
            ids=[x for p in parts for x in p.ids],
            texts=[x for p in parts for x in p.texts],
            group=np.concatenate([p.group for p in parts]),
            origin=[x for p in parts for x in p.origin],
            parent=[x for p in parts for x in p.parent],
            generator=[x for p in parts for x in p.generator],
            emb=None if any(e is None for e in embs) else np.concatenate(embs),  # type: ignore[arg-type]
        )

    def frame(self, label_values: Sequence[tuple[str, ...]], label_columns: Sequence[str]) -> Any:
        import pandas as pd

        d: dict[str, Any] = {"id": self.ids, "text": self.texts}
        for j, c in enumerate(label_columns):
            d[c] = [label_values[g][j] for g in self.group]
        d["group"] = self.group.astype(np.int64)
        d["origin"] = self.origin
        d["parent"] = self.parent
        d["generator"] = self.generator
        return pd.DataFrame(d)

    @classmethod
    def from_frame(cls, df: Any, emb: np.ndarray | None) -> Population:
        return cls(
            ids=[str(x) for x in df["id"]],
            texts=[str(x) for x in df["text"]],
            group=df["group"].to_numpy(dtype=np.int64),
            origin=[str(x) for x in df["origin"]],
            parent=[None if x is None or (isinstance(x, float) and np.isnan(x)) else str(x) for x in df["parent"]],
            generator=[str(x) for x in df["generator"]],
            emb=emb,
        )


def _write_parquet(df: Any, path: Path) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def _write_npy(arr: np.ndarray, path: Path) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.save(f, arr, allow_pickle=False)


def read_npy(path: Path) -> np.ndarray:
    return np.load(path, allow_pickle=False)


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class IterationStore:
    """Files of one iteration's checkpoint folder."""

    run: RunDir
    iteration: int
    label_values: Sequence[tuple[str, ...]]
    label_columns: Sequence[str]
    folder: Path = field(init=False)

    def __post_init__(self) -> None:
        self.folder = self.run.checkpoint(self.iteration)
        self.folder.mkdir(parents=True, exist_ok=True)

    # candidates before the vote
    def has_population(self) -> bool:
        return (self.folder / "population.parquet").exists() and (self.folder / "embeddings.npy").exists()

    def save_population(self, pop: Population, vote_emb: np.ndarray | None) -> None:
        assert pop.emb is not None
        _write_npy(pop.emb.astype(np.float32), self.folder / "embeddings.npy")
        if vote_emb is not None:
            _write_npy(vote_emb.astype(np.float32), self.folder / "vote_embeddings.npy")
        # written last: its presence means the embeddings are there too
        _write_parquet(pop.frame(self.label_values, self.label_columns), self.folder / "population.parquet")

    def load_population(self) -> tuple[Population, np.ndarray | None]:
        import pandas as pd

        df = pd.read_parquet(self.folder / "population.parquet")
        emb = read_npy(self.folder / "embeddings.npy")
        if len(emb) != len(df):
            raise ResumeError(f"{self.folder}: {len(emb)} embeddings for {len(df)} candidates")
        ve = self.folder / "vote_embeddings.npy"
        return Population.from_frame(df, emb), (read_npy(ve) if ve.exists() else None)

    # released values
    def release_path(self, key: str) -> Path:
        return self.folder / "releases" / (_SAFE.sub("_", key) + ".npz")

    def finish(self, pop: Population, histogram: np.ndarray, selected: np.ndarray, state: dict[str, Any]) -> None:
        votes = np.asarray(histogram, dtype=np.float64)
        sel = np.zeros(len(pop), dtype=bool)
        sel[np.unique(selected)] = True
        df = pop.frame(self.label_values, self.label_columns)
        df["votes"] = votes
        df["selected"] = sel
        counts = np.bincount(selected, minlength=len(pop))
        df["times_selected"] = counts.astype(np.int64)
        _write_npy(votes, self.folder / "histogram.npy")
        _write_npy(np.asarray(selected, dtype=np.int64), self.folder / "selected_index.npy")
        _write_parquet(df, self.folder / "candidates.parquet")
        atomic_write_json(self.folder / "state.json", state)
        atomic_write_text(self.folder / "COMPLETE", "ok\n")

    def is_complete(self) -> bool:
        return (self.folder / "COMPLETE").exists()

    def load_complete(self) -> tuple[Population, np.ndarray, np.ndarray, dict[str, Any]]:
        pop, _ = self.load_population()
        hist = read_npy(self.folder / "histogram.npy")
        selected = read_npy(self.folder / "selected_index.npy")
        state = json.loads((self.folder / "state.json").read_text(encoding="utf-8"))
        return pop, hist, selected, state


class ReleaseKeeper:
    """Runs each noisy release exactly once per run, and records it before its value exists.

    ``release(key, make_release, compute, path)``:

    1. if the value was saved before (``path`` exists), it is loaded and returned — no noise is drawn and
       nothing is written to the ledger (the ledger must already hold ``key``, else the run is inconsistent);
    2. otherwise the event is appended to the ledger (fsync'd; an over-budget release is refused here, before
       any private data is read) unless the ledger already holds ``key`` — that happens only when a previous
       process died after recording the event and before the value reached disk: such a value was never saved,
       used or shown, and the step is redrawn under its single ledger entry;
    3. ``compute()`` reads private data and draws the noise; its arrays are saved atomically, then returned.
       ``compute`` may return ``(arrays, event)``: the event the mechanism itself says it spent. It must equal the
       recorded release's event (canonical JSON), or the value is refused (:class:`PrivacyError`) before it is
       saved or used — the ledger cannot drift from what the code drew.
    """

    def __init__(self, ledger: Any, log: Callable[[str], None]):
        self.ledger = ledger
        self.log = log

    def release(
        self,
        key: str,
        make_release: Callable[[], Any],
        compute: Callable[[], dict[str, np.ndarray] | tuple[dict[str, np.ndarray], Any]],
        path: Path,
    ) -> dict[str, np.ndarray]:
        if path.exists():
            if not self.ledger.has(key):
                raise ResumeError(f"released value {path} exists but the ledger has no event {key!r}")
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        if self.ledger.has(key):
            self.log(f"release {key}: event already in the ledger; its value never reached disk, drawing it now")
        else:
            self.ledger.record(make_release())
        _fault(f"after_record:{key}")
        out = compute()
        if isinstance(out, tuple):
            values, spent = out
            check_spent(self.ledger.get(key).release, spent)
        else:
            values = out
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, **values)
        _fault(f"after_save:{key}")
        return values


def check_spent(release: Any, event: Any) -> None:
    """Refuse a value whose mechanism reports a different event than the one recorded for it."""
    from ..privacy.events import event_key

    if event_key(event) != event_key(release.event):
        raise PrivacyError(
            f"release {release.key!r}: the mechanism spent {event_key(event)} but the ledger recorded "
            f"{event_key(release.event)}; the value is discarded"
        )


def _fault(point: str) -> None:
    """Test hook: ``PRIVTEXT_FAULT=after_record:votes/iter_002`` kills the process (SIGKILL) at that point, to
    prove that a crash between recording an event and saving its value neither loses nor duplicates anything."""
    if os.environ.get("PRIVTEXT_FAULT") == point:
        os.kill(os.getpid(), signal.SIGKILL)
