"""Scan a run's release — every file outside ``private/`` — for what must not leave the private folder.

A run directory has two parts (:mod:`privtext.rundir`): the release, which may be shared, and ``private/``.
Nothing in the release may hold a value computed from private data without noise, a raw noisy double, a timing
of the private work, a time stamp or a local path. :func:`scan_release` reads every file of the release (whatever
its name, so a file added later is covered too) and reports a :class:`Finding` for each of

* ``unrounded_noisy_value`` — a number equal (to 1e-9, relative) to a raw noisy value the run keeps in
  ``private/checkpoints`` (every ``releases/*.npz`` array and the ``histogram.npy`` each iteration selected with)
  that carries more significant digits than a release keeps (:data:`privtext.rng.RELEASE_DIGITS`): the low bits
  of a raw noisy double leak (Mironov 2012), which is why every released number is rounded first;
* ``unrounded_number`` — in a JSON/JSONL/YAML file, a float with more significant digits than a release keeps,
  outside the places that hold only configured parameters (``config.yaml``; in ``privacy.json`` everything but
  ``released``, which the statement test checks by running on two private corpora). A sum or mean of raw noisy
  votes is caught here: it equals no kept value;
* ``timing`` — a key that names a duration (``seconds``, ``runtime``, ``elapsed``, ``*_seconds``, ``stages``…),
  or a report table header that does;
* ``timestamp`` — a key that names a time (``created``, ``timestamp``, ``t`` with a Unix time…) or an ISO date
  and time anywhere outside the records' own text;
* ``absolute_path`` — the run's own absolute path, the home or working folder, an input file's absolute path
  (from ``config.yaml``), or any absolute POSIX path whose first folder exists on this machine or is a usual root
  (``/home``, ``/tmp``, ``/Users``…), or a Windows drive path;
* ``private_count`` — an integer (≥ ``min_count``) equal to an exact private count (the number of private
  records — read from the private file ``config.yaml`` names, else ``private/diagnostics.json`` —, the secret
  counts of the diagnostics, and with ``label_counts=True`` the records per private label) that no configured
  parameter or public size explains, under a key that is not a public size by construction (``n_candidates``,
  ``n_selected``, ``n_train``…) (integers of JSON/YAML files, and integers in a page's text). This is a
  heuristic: a public size that happens to equal a private count is reported too, so a test should give its
  private corpus sizes no public size has (per-label counts are small and collide with lengths and candidate
  counts, hence opt-in);
* ``unreadable`` — a file that is not UTF-8 text (a binary file has no business in the release: nothing checks
  it).

``config.yaml`` holds the input files' absolute paths today; those findings stand until the runner writes them
relative to the run (the scan does not excuse them).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..rng import RELEASE_DIGITS, round_release

KINDS = ("unrounded_noisy_value", "unrounded_number", "timing", "timestamp", "absolute_path", "private_count",
         "unreadable")

#: keys whose value is a duration
_TIMING_KEYS = {"seconds", "secs", "elapsed", "duration", "runtime", "timing", "timings", "wall", "wall_time",
                "wall_seconds", "stages", "per_stage", "time_s"}
_TIMING_SUFFIXES = ("_seconds", "_secs", "_ms", "_elapsed", "_duration", "_runtime")
#: keys whose value is a point in time
_TIME_KEYS = {"created", "written", "timestamp", "time", "datetime", "date", "started", "finished", "start_time",
              "end_time", "mtime", "ctime", "atime", "when", "updated", "generated_at", "created_at"}
#: keys that hold record or prompt text (data, not statistics): no ISO-date or generic-path check inside them
_CONTENT_KEYS = {"text", "prompt", "content", "keyphrases", "completion", "output", "examples"}
#: released mappings whose keys are data (vocabulary terms, label values), not names: "time" there is a word
_DATA_MAPS = {"dp_vocabulary", "label_histogram"}
#: keys whose integers are public sizes by construction (candidates, selections, rounds, training-set sizes)
_PUBLIC_COUNT_KEYS = {"n_candidates", "n_selected", "candidates", "selected", "n", "n_train", "iteration", "round",
                      "n_per_generator", "sorted_votes_step", "k", "dim", "n_synthetic", "n_real", "num_samples",
                      "iterations", "releases", "target_words"}
_USUAL_ROOTS = {"home", "Users", "tmp", "var", "mnt", "media", "opt", "srv", "root", "data", "work", "scratch",
                "private", "Volumes", "usr", "etc", "nfs", "gpfs", "lustre"}

_ISO = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?")
_POSIX = re.compile(r"(?<![\w./:~\\-])(/(?:[A-Za-z0-9_.@+-]+/)+[A-Za-z0-9_.@+-]*)")
_WINDOWS = re.compile(r"(?<![\w])([A-Za-z]:\\[^\s\"'<>|]+)")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")
_INTEGER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w])|(?<![\w.,])\d+(?![\w.,])")
_TH = re.compile(r"<th[^>]*>(.*?)</th>", re.S | re.I)
_STYLE = re.compile(r"<style\b.*?</style>", re.S | re.I)
_DATA_URI = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+")
_TAG = re.compile(r"<[^>]+>")
_TIMING_WORDS = re.compile(r"\b(seconds|runtime|run time|wall time|elapsed|duration)\b", re.I)


@dataclass(frozen=True)
class Finding:
    """One thing in the release that must not be there."""

    file: str  # relative to the run directory
    kind: str  # one of KINDS
    where: str  # JSON path, line number, or "text"
    value: str  # the offending value (shortened)
    why: str

    def line(self) -> str:
        """The finding as one report line: ``file [where] kind: value — why``."""
        return f"{self.file} [{self.where}] {self.kind}: {self.value} — {self.why}"


# ------------------------------------------------------------------------------------------- what is private


def release_files(root: str | os.PathLike[str]) -> list[Path]:
    """Every file of the run outside ``private/`` (any name, any depth), sorted."""
    root = Path(root)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == root:
            dirnames[:] = [d for d in dirnames if d != "private"]
        out += [here / f for f in filenames]
    return sorted(out)


#: arrays a release keeps beside its noisy values that are public parameters, not draws: the noise std of a
#: parties' sum (σ·√(|S|/t)), the survivors, the random Fourier features, the kept terms' indices
PUBLIC_ARRAYS = frozenset({"sum_noise_std", "survivors", "weights", "offsets", "indices"})


def kept_values(root: str | os.PathLike[str]) -> np.ndarray:
    """Sorted unique finite raw noisy values the run keeps in ``private/checkpoints`` (float arrays of every
    ``releases/*.npz`` but the public ones, :data:`PUBLIC_ARRAYS`, and every ``histogram.npy``)."""
    ck = Path(root) / "private" / "checkpoints"
    vals: list[np.ndarray] = []
    if ck.exists():
        for p in sorted(ck.rglob("*.npz")):
            try:
                with np.load(p, allow_pickle=False) as z:
                    for k in z.files:
                        a = np.asarray(z[k])
                        if a.dtype.kind == "f" and k not in PUBLIC_ARRAYS:
                            vals.append(a.astype(np.float64).ravel())
            except (OSError, ValueError):
                continue
        for p in sorted(ck.rglob("histogram.npy")):
            try:
                a = np.load(p, allow_pickle=False)
            except (OSError, ValueError):
                continue
            if a.dtype.kind == "f":
                vals.append(a.astype(np.float64).ravel())
    if not vals:
        return np.zeros(0)
    v = np.concatenate(vals)
    return np.unique(v[np.isfinite(v)])


def _yaml(path: Path) -> Any:
    import yaml

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def _json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def _leaves(obj: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """(path, last key, value) of every leaf of a nested JSON/YAML value."""
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            p = f"{path}.{k}" if path else str(k)
            if isinstance(v, (Mapping, list, tuple)):
                yield p, str(k), v  # the container itself (so a key like "stages" is seen)
                yield from _leaves(v, p)
            else:
                yield p, str(k), v
    elif isinstance(obj, (list, tuple)):
        last = path.rsplit(".", 1)[-1].split("[", 1)[0]
        for i, v in enumerate(obj):
            p = f"{path}[{i}]"
            if isinstance(v, (Mapping, list, tuple)):
                yield from _leaves(v, p)
            else:
                yield p, last, v


def _ints(obj: Any) -> set[int]:
    out: set[int] = set()
    for _, _, v in _leaves(obj):
        if isinstance(v, bool):
            continue
        if isinstance(v, int):
            out.add(v)
        elif isinstance(v, float) and math.isfinite(v) and v.is_integer():
            out.add(int(v))
    return out


def private_counts(root: str | os.PathLike[str], *, label_counts: bool = False) -> dict[int, str]:
    """Exact private counts of the run: integer → what it counts (see the module docstring)."""
    root = Path(root)
    out: dict[int, str] = {}
    cfg = _yaml(root / "config.yaml")
    data = cfg.get("data") if isinstance(cfg, Mapping) else None
    p = data.get("private") if isinstance(data, Mapping) else None
    if isinstance(p, str) and not p.startswith("hf:") and Path(p).is_file():
        from ..data import load_corpus
        from ..errors import PrivtextError

        cols = [str(c) for c in data.get("label_columns") or []]
        try:
            corpus = load_corpus(p, text_column=str(data.get("text_column") or "text"), label_columns=cols,
                                 id_column=data.get("id_column"))
        except PrivtextError:
            corpus = None
        if corpus is not None:
            out.setdefault(len(corpus), "the number of private records")
            if label_counts and cols:
                from collections import Counter

                for key, n in Counter(corpus.label_tuples(cols)).items():
                    out.setdefault(n, f"private records labelled {' | '.join(key)}")
    diag = _json_file(root / "private" / "diagnostics.json")
    if isinstance(diag, Mapping):
        n = (diag.get("records") or {}).get("private") if isinstance(diag.get("records"), Mapping) else None
        if isinstance(n, int):
            out.setdefault(n, "the number of private records")
        for path, _, v in _leaves(diag.get("secrets") or {}):
            if isinstance(v, int) and not isinstance(v, bool) and "public" not in path:
                out.setdefault(v, f"diagnostics secrets.{path} (exact, private)")
    return out


def _public_sizes(root: Path) -> set[int]:
    """Integers a release may hold for public reasons: every configured number, the privacy statement's
    parameters and budget, and the sizes of the release's own record files."""
    out: set[int] = set()
    cfg = _yaml(root / "config.yaml")
    if cfg is not None:
        out |= _ints(cfg)
    st = _json_file(root / "privacy.json")
    if isinstance(st, Mapping):
        for key in ("parameters", "guarantee"):
            out |= _ints(st.get(key) or {})
        out.add(len(st.get("releases") or []))
    for name in ("synthetic.jsonl", "heldout.jsonl", "keyphrases.jsonl", "prompts.jsonl"):
        p = root / name
        if p.exists():
            with open(p, encoding="utf-8", errors="replace") as f:
                out.add(sum(1 for line in f if line.strip()))
    ev = _json_file(root / "evaluation.json")
    if isinstance(ev, Mapping):
        for key in ("real", "synthetic", "train_sets"):
            out |= _ints(ev.get(key) or {})
    return out


# ---------------------------------------------------------------------------------------------- the scan


class _Scanner:
    def __init__(self, root: Path, *, min_count: int, label_counts: bool):
        self.root = root
        self.kept = kept_values(root)
        counts = private_counts(root, label_counts=label_counts)
        public = _public_sizes(root)
        self.counts = {n: why for n, why in counts.items() if n >= min_count and n not in public}
        self.local = sorted({s for s in self._local_paths() if len(s) > 1}, key=len, reverse=True)
        self.findings: list[Finding] = []

    def _local_paths(self) -> list[str]:
        out = [str(self.root.resolve()), str(self.root.absolute()), str(Path.home()), os.getcwd()]
        cfg = _yaml(self.root / "config.yaml")
        if isinstance(cfg, Mapping):
            for _, _, v in _leaves(cfg):
                if isinstance(v, str) and os.path.isabs(v):
                    out.append(v)
        return [p for p in out if p not in ("/", "")]

    def add(self, file: str, kind: str, where: str, value: Any, why: str) -> None:
        """Record a finding; the offending value is shortened to 120 characters."""
        text = str(value)
        self.findings.append(Finding(file, kind, where, text if len(text) <= 120 else text[:117] + "…", why))

    # numbers
    def _kept_match(self, x: float) -> bool:
        if self.kept.size == 0 or not math.isfinite(x) or x == 0:
            return False
        i = int(np.searchsorted(self.kept, x))
        for j in (i - 1, i):
            if 0 <= j < self.kept.size and abs(self.kept[j] - x) <= 1e-9 * abs(self.kept[j]):
                return True
        return False

    @staticmethod
    def _unrounded(x: float) -> bool:
        return math.isfinite(x) and x != 0 and round_release(x) != x

    def number(self, file: str, where: str, x: float, *, precision_rule: bool) -> None:
        """Flag a number that is a raw noisy value kept in private/checkpoints and not rounded to ``RELEASE_DIGITS``
        significant digits; with ``precision_rule``, any number with more digits than that."""
        if self._unrounded(x) and self._kept_match(x):
            self.add(file, "unrounded_noisy_value", where, repr(x),
                     f"a raw noisy value kept in private/checkpoints, not rounded to {RELEASE_DIGITS} significant "
                     "digits")
        elif precision_rule and self._unrounded(x):
            self.add(file, "unrounded_number", where, repr(x),
                     f"more than {RELEASE_DIGITS} significant digits in a shareable file, outside the configured "
                     "parameters")

    def count(self, file: str, where: str, n: int) -> None:
        """Flag an integer equal to an exact private count (of at least ``min_count``) that no public size explains."""
        why = self.counts.get(n)
        if why is not None:
            self.add(file, "private_count", where, n, f"equals {why}, which no public size explains")

    def numbers_in_text(self, file: str, where: str, s: str) -> None:
        """Flag numbers written in text with more than ``RELEASE_DIGITS`` significant digits that equal a raw noisy
        value kept in private/checkpoints."""
        for m in _NUMBER.finditer(s):
            tok = m.group(0)
            digits = len(re.sub(r"[^0-9]", "", tok.split("e")[0].split("E")[0]).lstrip("0"))
            if digits > RELEASE_DIGITS:
                try:
                    x = float(tok)
                except ValueError:
                    continue
                if self._kept_match(x):
                    self.add(file, "unrounded_noisy_value", where, tok,
                             "a raw noisy value kept in private/checkpoints, written out in full")

    def paths_in_text(self, file: str, where: str, s: str, *, generic: bool) -> None:
        """Flag the first local absolute path in ``s`` (the run's, an input's, the home or working folder); with
        ``generic``, also any POSIX path under a usual or existing root folder, or a Windows path."""
        for p in self.local:
            if p in s:
                self.add(file, "absolute_path", where, p, "a local absolute path (the run's, an input's, the home "
                         "or working folder)")
                return
        if not generic:
            return
        for m in _POSIX.finditer(s):
            path = m.group(1)
            first = path.strip("/").split("/", 1)[0]
            if first in _USUAL_ROOTS or os.path.isdir("/" + first):
                self.add(file, "absolute_path", where, path, "an absolute path (write paths relative to the run, "
                         "or the file name only)")
                return
        m = _WINDOWS.search(s)
        if m:
            self.add(file, "absolute_path", where, m.group(1), "an absolute Windows path")

    # structured files
    def tree(self, file: str, obj: Any, *, precision_rule_at: Any, prefix: str = "") -> None:
        """Check every leaf of a parsed JSON/YAML object: timings and timestamps by key, numbers (the precision rule
        where ``precision_rule_at(path)`` says so), private counts (except keys that are public sizes), and paths
        and long numbers in strings."""
        for path, key, v in _leaves(obj):
            rule = precision_rule_at(path)
            path = prefix + path
            low = key.lower()
            content = any(part.split("[", 1)[0].lower() in _CONTENT_KEYS for part in path.split("."))
            if any(part.split("[", 1)[0] in _DATA_MAPS for part in path.split(".")[:-1]):
                low = ""  # a term or a label value as the key: only its value is checked
            if isinstance(v, (Mapping, list, tuple)):
                if low in _TIMING_KEYS or low.endswith(_TIMING_SUFFIXES):
                    self.add(file, "timing", path, f"{key}: …", "a timing of the run's private work")
                continue
            if low in _TIMING_KEYS or low.endswith(_TIMING_SUFFIXES):
                self.add(file, "timing", path, v, "a timing of the run's private work")
                continue
            if low in _TIME_KEYS and v is not None:
                self.add(file, "timestamp", path, v, "a point in time (when the run or its parts ran)")
                continue
            if isinstance(v, bool) or v is None:
                continue
            if isinstance(v, (int, float)):
                x = float(v)
                if low == "t" and 1e9 <= x <= 1e10:
                    self.add(file, "timestamp", path, v, "a Unix time")
                    continue
                if isinstance(v, float):
                    self.number(file, path, v, precision_rule=rule)
                if isinstance(v, int) and low not in _PUBLIC_COUNT_KEYS:  # floats are statistics, not counts
                    self.count(file, path, v)
            elif isinstance(v, str):
                if not content and _ISO.search(v):
                    self.add(file, "timestamp", path, v, "an ISO date and time")
                self.paths_in_text(file, path, v, generic=not content)
                self.numbers_in_text(file, path, v)

    def html(self, file: str, text: str) -> None:
        """Check an HTML file: timing columns in table headers, absolute paths, the first ISO timestamp, noisy
        values and private counts in its visible text (styles and data URIs removed)."""
        text = _DATA_URI.sub("data:", _STYLE.sub("", text))
        for m in _TH.finditer(text):
            label = _TAG.sub("", m.group(1))
            if _TIMING_WORDS.search(label):
                self.add(file, "timing", "table header", label, "a timing of the run's private work")
        self.paths_in_text(file, "text", text, generic=True)
        visible = _TAG.sub(" ", text)
        for m in _ISO.finditer(visible):
            self.add(file, "timestamp", "text", m.group(0), "an ISO date and time")
            break
        self.numbers_in_text(file, "text", visible)
        for m in _INTEGER.finditer(visible):
            self.count(file, "text", int(m.group(0).replace(",", "")))

    def plain(self, file: str, text: str) -> None:
        """Check a text file line by line for ISO timestamps, absolute paths and unrounded noisy values."""
        for i, line in enumerate(text.splitlines(), 1):
            if _ISO.search(line):
                self.add(file, "timestamp", f"line {i}", _ISO.search(line).group(0), "an ISO date and time")  # type: ignore[union-attr]
            self.paths_in_text(file, f"line {i}", line, generic=True)
            self.numbers_in_text(file, f"line {i}", line)

    def file(self, path: Path) -> None:
        """Check one release file by its kind: config.yaml (without the precision rule: its numbers are
        parameters), privacy.json (the precision rule on ``released`` only), other JSON, JSONL (per line), YAML,
        HTML, else plain text; a file that is not UTF-8 is itself a finding."""
        rel = path.relative_to(self.root).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError) as e:
            self.add(rel, "unreadable", "file", path.name, f"not UTF-8 text ({type(e).__name__}): nothing in the "
                     "release may be unscannable")
            return
        name = path.name.lower()
        if rel == "config.yaml":
            self.tree(rel, _yaml(path) or {}, precision_rule_at=lambda p: False)
            # the YAML's own lines: an absolute path is caught above; nothing else to check
        elif name.endswith(".json"):
            obj = _json_file(path)
            if obj is None:
                self.plain(rel, text)
                return
            if rel == "privacy.json":
                self.tree(rel, obj, precision_rule_at=lambda p: p == "released" or p.startswith("released."))
            else:
                self.tree(rel, obj, precision_rule_at=lambda p: True)
        elif name.endswith(".jsonl"):
            for i, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    self.plain(rel, line)
                    continue
                self.tree(rel, obj, precision_rule_at=lambda p: True, prefix=f"line {i}: ")
        elif name.endswith((".yaml", ".yml")):
            self.tree(rel, _yaml(path) or {}, precision_rule_at=lambda p: True)
        elif name.endswith((".html", ".htm")):
            self.html(rel, text)
        else:
            self.plain(rel, text)


def scan_release(root: str | os.PathLike[str], *, min_count: int = 20, label_counts: bool = False,
                 files: Sequence[str | os.PathLike[str]] | None = None) -> list[Finding]:
    """Every :class:`Finding` in the release of run ``root`` (every file outside ``private/``; or only
    ``files``). An empty list means the release holds nothing the scan knows to look for."""
    root = Path(root)
    if not (root / "config.yaml").exists():
        from ..errors import RunError

        raise RunError(f"{root} is not a privtext run directory (no config.yaml)")
    sc = _Scanner(root, min_count=min_count, label_counts=label_counts)
    for p in ([Path(f) if Path(f).is_absolute() else root / f for f in files] if files is not None
              else release_files(root)):
        sc.file(p)
    return sc.findings


def summary(findings: Sequence[Finding]) -> str:
    """One line per finding, for an assertion message."""
    return "\n".join(f.line() for f in findings) or "(clean)"


__all__ = ["KINDS", "Finding", "kept_values", "private_counts", "release_files", "scan_release", "summary"]
