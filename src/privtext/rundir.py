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
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .atomicio import atomic_path, atomic_write_json, atomic_write_text
from .data.population import Population
from .errors import ResumeError, RunError

CONFIG = "config.yaml"
PRIVACY = "privacy.json"
PROMPTS = "prompts.jsonl"
SYNTHETIC = "synthetic.jsonl"
KEYPHRASES = "keyphrases.jsonl"  # DP-KPS: the sampled sequences (post-processing of its releases)
HELDOUT = "heldout.jsonl"
REPORT = "report.html"
EVALUATION = "evaluation.json"
PRIVATE = "private"
LEDGER = f"{PRIVATE}/ledger.jsonl"
CHECKPOINTS = f"{PRIVATE}/checkpoints"
METRICS = f"{PRIVATE}/metrics.json"
LOG = f"{PRIVATE}/log.txt"
#: the full resolved configuration (absolute paths): what resume reads; config.yaml is its shareable form
PRIVATE_CONFIG = f"{PRIVATE}/config.yaml"
DIAGNOSTICS = f"{PRIVATE}/diagnostics.json"
CACHE = f"{PRIVATE}/cache"
#: the prompt guard's salt and what the generators wrote, kept for a resume (privtext.guard._ProvenanceFile)
GUARD = f"{PRIVATE}/guard"
EMBED_CACHE = f"{CACHE}/embeddings"
#: written last when a run directory is created: how privtext recognises a folder it made (``--force``)
MARKER = f"{PRIVATE}/RUNDIR"
MARKER_TEXT = "privtext run directory\n"
#: the run's OS file lock (``RunDir.lock``)
LOCK = f"{PRIVATE}/lock"

#: files every finished run holds (relative to the run directory)
RUN_FILES = (CONFIG, PRIVACY, PROMPTS, SYNTHETIC, LEDGER, CHECKPOINTS, METRICS, LOG, DIAGNOSTICS)
#: the shareable part of a run
RELEASE_FILES = (CONFIG, SYNTHETIC, PRIVACY, PROMPTS, HELDOUT, REPORT, EVALUATION, KEYPHRASES)
#: what privtext writes in ``private/`` (the first part of each path); anything else there is not privtext's
PRIVATE_FILES = (LEDGER, CHECKPOINTS, METRICS, LOG, DIAGNOSTICS, CACHE, GUARD, MARKER, LOCK, PRIVATE_CONFIG,
                 f"{PRIVATE}/{REPORT}", f"{PRIVATE}/{EVALUATION}")


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
            """Add ``n`` to this stage's counter ``key`` (added to the stage's totals when the ``with`` block ends)."""
            self.counts[key] = self.counts.get(key, 0) + n

    @contextlib.contextmanager
    def stage(self, name: str, *, iteration: int | None = None) -> Iterator[StageMetrics._Stage]:
        """Time the ``with`` block as one call of stage ``name`` (in ``iteration`` too, when given) and record the
        counts the block adds with ``count``; the time is recorded even when the block raises."""
        st = StageMetrics._Stage(self, name, iteration)
        t0 = time.perf_counter()
        try:
            yield st
        finally:
            dt = time.perf_counter() - t0
            self.add(name, dt, iteration=iteration, **st.counts)

    def add(self, name: str, seconds: float, *, iteration: int | None = None, **counts: float) -> None:
        """Record one call of stage ``name`` that took ``seconds`` (wall) with ``counts``: summed into the run's totals
        for that stage and, with ``iteration``, into that iteration's."""
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
        """Add ``n`` to the run-wide counter ``key`` (e.g. ``synthetic_records``)."""
        self.counters[key] = self.counters.get(key, 0) + n

    def to_dict(self) -> dict[str, Any]:
        """The JSON form written to ``private/metrics.json``: stages, per-iteration stages and counters."""
        return {"stages": self.stages, "per_iteration": self.per_iteration, "counters": self.counters}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StageMetrics:
        """The metrics read back from :meth:`to_dict`'s form (copies; missing parts are empty), for a resume."""
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
        """``config.yaml``: the shareable resolved configuration (release)."""
        return self.root / CONFIG

    @property
    def private_config(self) -> Path:
        """``private/config.yaml``: the full resolved configuration with absolute paths, which resume reads."""
        return self.root / PRIVATE_CONFIG

    def resolved_config(self) -> Path:
        """The full configuration of the run: ``private/config.yaml`` (runs made before it existed: config.yaml)."""
        return self.private_config if self.private_config.exists() else self.config

    @property
    def ledger(self) -> Path:
        """``private/ledger.jsonl``: one privacy event per line, appended and fsync'd before its noisy value is used.
        """
        return self.root / LEDGER

    @property
    def privacy(self) -> Path:
        """``privacy.json``: the guarantee in words and numbers (release; its presence with synthetic.jsonl marks a
        finished run)."""
        return self.root / PRIVACY

    @property
    def checkpoints(self) -> Path:
        """``private/checkpoints``: one ``iter_NNN`` folder per iteration plus ``releases/`` for releases outside any
        iteration."""
        return self.root / CHECKPOINTS

    @property
    def prompts(self) -> Path:
        """``prompts.jsonl``: every prompt sent to a generator (release: public text and released values only)."""
        return self.root / PROMPTS

    @property
    def synthetic(self) -> Path:
        """``synthetic.jsonl``: the final synthetic records (release)."""
        return self.root / SYNTHETIC

    @property
    def keyphrases(self) -> Path:
        """``keyphrases.jsonl``: DP-KPS's sampled keyphrase sequences (release: post-processing of its releases)."""
        return self.root / KEYPHRASES

    @property
    def metrics(self) -> Path:
        """``private/metrics.json``: wall time and counts per stage (:class:`StageMetrics`)."""
        return self.root / METRICS

    @property
    def log_path(self) -> Path:
        """``private/log.txt``: the human-readable log (private: it holds exact counts)."""
        return self.root / LOG

    @property
    def embed_cache(self) -> Path:
        """``private/cache/embeddings``: the embedding cache, keyed by a salted hash of each text."""
        return self.root / EMBED_CACHE

    @property
    def cache(self) -> Path:
        """``private/cache``: caches of the run (private)."""
        return self.root / CACHE

    @property
    def private(self) -> Path:
        """``private/``: the private diagnostics folder (mode 0700), never to be shared."""
        return self.root / PRIVATE

    @property
    def guard_state(self) -> Path:
        """``private/guard``: the prompt guard's salt and the generators' outputs, kept for a resume."""
        return self.root / GUARD

    @property
    def diagnostics(self) -> Path:
        """``private/diagnostics.json``: exact statistics of the private data (counts, secrets, audit hits)."""
        return self.root / DIAGNOSTICS

    @property
    def heldout(self) -> Path:
        """``heldout.jsonl``: public records held out for evaluation (release; only with ``data.public_holdout``)."""
        return self.root / HELDOUT

    @property
    def report(self) -> Path:
        """``report.html``: the shareable report (no private diagnostics)."""
        return self.root / REPORT

    @property
    def diagnostic_report(self) -> Path:
        """``private/report.html``: the report with private diagnostics, kept inside ``private/``."""
        return self.private / REPORT

    @property
    def evaluation(self) -> Path:
        """``evaluation.json``: the results of ``privtext evaluate`` (release)."""
        return self.root / EVALUATION

    def checkpoint(self, iteration: int) -> Path:
        """The checkpoint folder of ``iteration``: ``private/checkpoints/iter_NNN`` (not created here)."""
        return self.checkpoints / f"iter_{iteration:03d}"

    def release_path(self, key: str, iteration: int | None) -> Path:
        """Where the value of release ``key`` is kept: in its iteration's folder, or ``checkpoints/releases``."""
        folder = self.checkpoint(iteration) if iteration is not None else self.checkpoints
        return folder / "releases" / (_SAFE.sub("_", key) + ".npz")

    def iteration(self, t: int, labels: Any = None) -> IterationStore:
        """The checkpoint folder of iteration ``t`` (``labels``: the run's LabelSpace, to name label columns when
        writing; readers pass nothing)."""
        if labels is None:
            return IterationStore(self, t)
        return IterationStore(self, t, labels.values, labels.columns)

    def create(self, *, config_text: str | None = None, force: bool = False,
               protect: Sequence[str | os.PathLike[str]] = (), private_config_text: str | None = None) -> RunDir:
        """Create the run directory: its skeleton (``private/`` mode 0700, the ledger, the prompt log, the log,
        ``config.yaml``) and, written last, the marker by which privtext recognises a folder it made
        (``private/RUNDIR``). A new folder is built in a temporary sibling and renamed into place, so it either
        has a complete start or does not exist; an existing EMPTY folder (a container's mount point, say) is
        written into, and whatever was created there is removed again when the start fails.

        A non-empty folder is refused (``privtext resume`` continues a run), unless ``force`` and every one of:
        it is a run directory privtext made (its marker), its ledger holds no release, it holds nothing privtext
        did not write (:meth:`strays`), it holds none of the ``protect`` paths (the inputs and the configuration
        file), and no other process holds its lock. Then only privtext's own entries are removed and the folder
        itself is kept. Callers check the configuration, the data and the backends BEFORE calling this: nothing
        is removed for a run that would fail its checks."""
        if self.root.exists() and not self.root.is_dir():
            raise RunError(f"cannot create the run directory {self.root}: a file of that name exists")
        if self.root.exists() and any(self.root.iterdir()):
            holder = self.lock_holder()
            if holder is not None:
                raise RunError(f"run directory {self.root} is in use by {_holder_words(holder)}: wait for it to "
                               "finish or stop it first, or choose another output (nothing was removed)")
            if not force:
                raise RunError(self._occupied_message())
            self._check_replaceable(protect)
            with self.lock(purpose="replacing a failed start (--force)"):
                self._remove_own_entries()
        if self.root.exists():
            self._create_in_place(config_text, private_config_text)
            return self
        try:
            self.root.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{self.root.name}.starting-", dir=self.root.parent))
        except OSError as e:
            raise RunError(f"cannot create the run directory {self.root}: {e.strerror or e}") from None
        try:
            os.chmod(tmp, 0o755)
            RunDir(tmp)._write_skeleton(config_text, private_config_text)
            try:
                os.rename(tmp, self.root)
            except OSError:
                if self.root.exists() and any(self.root.iterdir()):  # another process made it since the check above
                    raise RunError(self._occupied_message()) from None
                raise
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return self

    def _write_skeleton(self, config_text: str | None, private_config_text: str | None = None) -> list[Path]:
        """The skeleton's entries, in the order written (the marker last); returns them."""
        made: list[Path] = []
        self.private.mkdir(mode=0o700)
        made.append(self.private)
        os.chmod(self.private, 0o700)  # mkdir's mode is filtered by the umask
        self.checkpoints.mkdir(parents=True)
        for name in (LEDGER, PROMPTS, LOG):
            (self.root / name).touch(mode=0o600)
            made.append(self.root / name)
        if config_text is not None:
            atomic_write_text(self.config, config_text)
            made.append(self.config)
        if private_config_text is not None:
            atomic_write_text(self.private_config, private_config_text)
        atomic_write_text(self.marker, MARKER_TEXT)
        return made

    def _create_in_place(self, config_text: str | None, private_config_text: str | None = None) -> None:
        try:
            self._write_skeleton(config_text, private_config_text)
        except OSError as e:
            for name in (MARKER, CONFIG, PROMPTS, PRIVATE):
                p = self.root / name
                with contextlib.suppress(OSError):
                    shutil.rmtree(p) if p.is_dir() else p.unlink()
            raise RunError(f"cannot create the run directory {self.root}: {e.strerror or e}") from None

    @property
    def marker(self) -> Path:
        """``private/RUNDIR``: written last when privtext creates a run directory; how ``--force`` knows privtext made
        it."""
        return self.root / MARKER

    def is_privtext_run(self) -> bool:
        """Whether privtext made this folder (its marker holds privtext's text)."""
        try:
            return self.marker.read_text(encoding="utf-8") == MARKER_TEXT
        except (OSError, UnicodeDecodeError):
            return False

    def is_complete(self) -> bool:
        """Whether the run finished: synthetic.jsonl and privacy.json both exist."""
        return self.synthetic.exists() and self.privacy.exists()

    def _occupied_message(self) -> str:
        where = f"run directory {self.root} already exists and is not empty"
        holder = self.lock_holder()
        if holder is not None:  # a live process works in it: not a failed start, whatever its ledger holds
            return (f"run directory {self.root} is in use by {_holder_words(holder)}: wait for it to finish or "
                    "stop it first, or choose another output")
        if not self.is_privtext_run():
            return (f"{where}, and privtext did not make it: choose a new or empty folder for the run (privtext "
                    "never replaces a folder it did not make)")
        if self.is_complete():
            return f"{where}: it holds a finished run; choose another output"
        if self.has_releases():
            return f"{where}: it holds an unfinished run; `privtext resume {_quote(self.root)}` continues it"
        return f"{where}: it holds a run that released nothing (a failed start); pass --force to replace it"

    def strays(self) -> list[str]:
        """Entries privtext did not write: anything at the top other than the run's files, anything in
        ``private/`` other than its files (the checkpoints and cache folders are privtext's). Leftover temporary
        files of an atomic write (``.NAME.*.tmp``) count as privtext's."""
        out: list[str] = []

        def own_tmp(name: str, known: Sequence[str]) -> bool:
            return name.startswith(".") and name.endswith(".tmp") and any(
                name.startswith(f".{k}.") for k in known)

        top = {Path(f).name for f in (*RELEASE_FILES, PRIVATE)}
        for p in self.root.iterdir():
            if p.name in top or own_tmp(p.name, tuple(top)):
                continue
            out.append(p.name)
        if self.private.is_dir():
            known = {Path(f).relative_to(PRIVATE).parts[0] for f in PRIVATE_FILES}
            for p in self.private.iterdir():
                if p.name in known or own_tmp(p.name, tuple(known)):
                    continue
                out.append(f"{PRIVATE}/{p.name}")
        return sorted(out)

    def _check_replaceable(self, protect: Sequence[str | os.PathLike[str]]) -> None:
        if not self.is_privtext_run():
            raise RunError(f"--force replaces only a run directory privtext made; {self.root} is not one "
                           f"(no {MARKER}): nothing was removed. Choose a new or empty folder for the run")
        if self.has_releases():
            raise RunError(f"run directory {self.root} holds noisy releases (private/ledger.jsonl): --force only "
                           "replaces a run that never released anything; use `privtext resume` or another output")
        root = self.root.resolve()
        for p in protect:
            q = Path(p).resolve()
            if q == root or root in q.parents:
                raise RunError(f"--force would remove {p}, an input of this run, which lies in {self.root}: "
                               "nothing was removed; choose another output folder")
        if root == Path.cwd().resolve() or root in Path.cwd().resolve().parents:
            raise RunError(f"--force would empty {self.root}, which holds the working directory: nothing was "
                           "removed; choose another output folder")
        strays = self.strays()
        if strays:
            shown = ", ".join(strays[:5]) + (f" and {len(strays) - 5} more" if len(strays) > 5 else "")
            raise RunError(f"--force replaces only what privtext wrote, but {self.root} also holds {shown}: "
                           "nothing was removed; move those files or choose another output folder")

    def _remove_own_entries(self) -> None:
        """Remove privtext's entries (after :meth:`_check_replaceable`); the marker goes last and the folder
        itself stays (it may be a mount point or the parent of a shell's working directory)."""
        for p in sorted(self.root.iterdir(), key=lambda x: x.name == PRIVATE):
            if p.name == PRIVATE:
                continue
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        if self.private.is_dir():
            for p in self.private.iterdir():
                if p.name in (Path(MARKER).name, Path(LOCK).name):
                    continue
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            self.marker.unlink(missing_ok=True)
            shutil.rmtree(self.private)

    def lock_holder(self) -> dict[str, Any] | None:
        """Who holds the run directory's lock (pid, host, since, purpose; ``{}`` when it did not say), or None when
        no live process holds it. Reads only: takes the lock for an instant when it is free, creates nothing."""
        import fcntl

        path = self.root / LOCK
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                try:
                    return dict(json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}"))
                except (OSError, ValueError, TypeError):
                    return {}
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def lock(self, *, purpose: str = "a run") -> Iterator[None]:
        """Hold the run directory's lock (an OS file lock, ``fcntl.flock`` on ``private/lock``) for the block.
        A second process is refused at once with who holds the lock (pid, host, since when, what for). The lock
        goes with the process: a killed run leaves no stale lock."""
        import fcntl
        import socket

        self.private.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.root / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                try:
                    holder = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
                except (OSError, ValueError):
                    holder = {}
                raise RunError(f"run directory {self.root} is in use by {_holder_words(holder)}: wait for it to "
                               "finish or stop it first") from None
            info = {"pid": os.getpid(), "host": socket.gethostname(), "purpose": purpose,
                    "since": _dt.datetime.now().isoformat(timespec="seconds")}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode("utf-8"), 0)
            try:
                yield
            finally:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def has_releases(self) -> bool:
        """Whether the ledger holds at least one recorded release."""
        return self.ledger.exists() and any(line.strip() for line in self.ledger.read_text(encoding="utf-8")
                                             .splitlines())

    def require(self) -> RunDir:
        """This run directory, after checking that it holds config.yaml; raises :class:`~privtext.errors.RunError`
        otherwise."""
        if not self.config.exists():
            raise RunError(f"{self.root} is not a privtext run directory (no {CONFIG})")
        return self

    def log(self, message: str) -> None:
        """Append ``message`` with a local timestamp (seconds) as one line of ``private/log.txt``."""
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

# ------------------------------------------------------------------------------------------------ checkpoints
# Checkpoint layout (one folder per iteration; plain Parquet, ``.npy``/``.npz`` without pickle, and JSON)::
#
#     private/checkpoints/iter_003/
#       population.parquet   candidates before the vote: id, text, <labels>, group, origin, parent, generator
#       embeddings.npy       float32 embeddings of the candidates (rows aligned)
#       vote_embeddings.npy  (only with lookahead) the embeddings the vote used
#       lookahead.parquet    (only with lookahead) the variations made for the vote, reused as children
#       releases/*.npz       every noisy value released in this iteration, saved right after it was drawn
#       histogram.npy        the released histogram used for selection (float64)
#       candidates.parquet   population + votes + selected (written at the end of the iteration)
#       state.json           iteration summary
#       COMPLETE             written last: the iteration is finished
#     private/checkpoints/releases/*.npz   releases that belong to no iteration (the DP label histogram)


def _write_parquet(df: Any, path: Path) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def _write_npy(arr: np.ndarray, path: Path) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.save(f, arr, allow_pickle=False)


def _holder_words(holder: Mapping[str, Any]) -> str:
    """``process 123 on host since 2025-01-01T10:00:00 (privtext run)``, or "another process"."""
    if not holder:
        return "another process"
    return (f"process {holder.get('pid', '?')} on {holder.get('host', '?')} since {holder.get('since', '?')} "
            f"({holder.get('purpose', 'a run')})")


def _quote(path: Path | str) -> str:
    import shlex

    return shlex.quote(str(path))


def read_npy(path: Path) -> np.ndarray:
    """The array saved at ``path`` (``.npy``), read without pickle."""
    return np.load(path, allow_pickle=False)


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class IterationStore:
    """Files of one iteration's checkpoint folder: the one writer (the engine) and reader (evaluation, reports)
    of the checkpoint format. ``label_values``/``label_columns`` name the label columns of written tables;
    readers may leave them empty. Writers create the folder; readers never do."""

    run: RunDir
    iteration: int
    label_values: Sequence[tuple[str, ...]] = ()
    label_columns: Sequence[str] = ()
    folder: Path = field(init=False)

    def __post_init__(self) -> None:
        self.folder = self.run.checkpoint(self.iteration)

    def _mk(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)

    # candidates before the vote
    def has_population(self) -> bool:
        """Whether the candidates before the vote were saved (population.parquet and embeddings.npy)."""
        return (self.folder / "population.parquet").exists() and (self.folder / "embeddings.npy").exists()

    def save_population(self, pop: Population, vote_emb: np.ndarray | None) -> None:
        """Save the candidates before the vote: their float32 embeddings, the embeddings the vote used (lookahead only)
        and, last, population.parquet, whose presence means the rest is there."""
        assert pop.emb is not None
        self._mk()
        _write_npy(pop.emb.astype(np.float32), self.folder / "embeddings.npy")
        if vote_emb is not None:
            _write_npy(vote_emb.astype(np.float32), self.folder / "vote_embeddings.npy")
        # written last: its presence means the embeddings are there too
        _write_parquet(pop.frame(self.label_values, self.label_columns), self.folder / "population.parquet")

    def load_population(self) -> tuple[Population, np.ndarray | None]:
        """The saved candidates with their embeddings, and the vote's embeddings (``None`` without lookahead); raises
        :class:`~privtext.errors.ResumeError` when the embeddings and the table disagree in length."""
        import pandas as pd

        df = pd.read_parquet(self.folder / "population.parquet")
        emb = read_npy(self.folder / "embeddings.npy")
        if len(emb) != len(df):
            raise ResumeError(f"{self.folder}: {len(emb)} embeddings for {len(df)} candidates")
        ve = self.folder / "vote_embeddings.npy"
        return Population.from_frame(df, emb), (read_npy(ve) if ve.exists() else None)


    def finish(self, pop: Population, histogram: np.ndarray, selected: np.ndarray, state: dict[str, Any]) -> None:
        """Write the iteration's end: the released ``histogram`` (float64), the ``selected`` indices,
        candidates.parquet (population with votes, selected and times_selected), state.json and, last, the COMPLETE
        marker."""
        self._mk()
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
        """Whether this iteration's COMPLETE marker exists (everything of the iteration was written)."""
        return (self.folder / "COMPLETE").exists()

    def load_complete(self) -> tuple[Population, np.ndarray, np.ndarray, dict[str, Any]]:
        """(population, released histogram, selected indices, state) of a complete iteration, for a resume."""
        pop, _ = self.load_population()
        hist = read_npy(self.folder / "histogram.npy")
        selected = read_npy(self.folder / "selected_index.npy")
        state = json.loads((self.folder / "state.json").read_text(encoding="utf-8"))
        return pop, hist, selected, state

    def candidates(self) -> Any:
        """The candidates table of a complete iteration (pandas DataFrame with ``text``, ``selected``, ...)."""
        import pandas as pd

        p = self.folder / "candidates.parquet"
        try:
            return pd.read_parquet(p)
        except Exception as e:  # pyarrow errors
            raise RunError(f"{p}: unreadable ({e})") from None

    def histogram(self) -> np.ndarray | None:
        """The released histogram used for selection (float64), or ``None`` before the iteration finished."""
        p = self.folder / "histogram.npy"
        return read_npy(p) if p.exists() else None

    def state(self) -> dict[str, Any]:
        """The iteration summary (state.json)."""
        return json.loads((self.folder / "state.json").read_text(encoding="utf-8"))

    # lookahead variations, reused as children
    def save_lookahead(self, reuse: Mapping[str, tuple[list[str], np.ndarray]]) -> None:
        """Save the lookahead variations made for the vote (parent → texts and their embeddings) to reuse them as
        children after a resume; nothing when there are none."""
        if not reuse:
            return
        self._mk()
        import pandas as pd

        rows = [(p, x) for p, (tx, _) in reuse.items() for x in tx]
        embs = np.concatenate([e for _, e in reuse.values()])
        _write_npy(embs.astype(np.float32), self.folder / "lookahead_embeddings.npy")
        _write_parquet(pd.DataFrame({"parent": [r[0] for r in rows], "text": [r[1] for r in rows]}),
                       self.folder / "lookahead.parquet")

    def load_lookahead(self) -> dict[str, tuple[list[str], np.ndarray]]:
        """The saved lookahead variations, parent → (texts, float32 embeddings); empty when none were saved."""
        path = self.folder / "lookahead.parquet"
        if not path.exists():
            return {}
        import pandas as pd

        df = pd.read_parquet(path)
        emb = read_npy(self.folder / "lookahead_embeddings.npy")
        out: dict[str, tuple[list[str], list[np.ndarray]]] = {}
        for row, (p, x) in enumerate(zip(df["parent"], df["text"], strict=True)):
            out.setdefault(str(p), ([], []))
            out[str(p)][0].append(str(x))
            out[str(p)][1].append(emb[row])
        return {p: (tx, np.stack(e)) for p, (tx, e) in out.items()}


__all__ = ["RELEASE_FILES", "RUN_FILES", "IterationStore", "RunDir", "StageMetrics", "read_npy"]
