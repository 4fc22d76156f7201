"""What the benchmark scripts share: where the repository and the shared data are, the offline environment, and
reading and writing the CSV corpora they split and feed to privtext.

A script run as ``python benchmarks/<name>.py`` finds this module next to it (Python puts the script's folder first
on ``sys.path``). Data: ``$PRIVTEXT_SHARED_DATA`` or ``../shared/data`` next to the repository (Yelp, PubMed,
Banking77, PII spans; its README says what each holds); a script whose data is absent says so and exits 0.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: the repository
ROOT = Path(__file__).resolve().parents[1]
#: the shared public data sets (never copied into the repository)
SHARED = Path(os.environ.get("PRIVTEXT_SHARED_DATA", ROOT.parent / "shared" / "data"))


def use_src() -> None:
    """Import privtext from this checkout's ``src/`` (before an installed copy), so the code timed is this one."""
    src = str(ROOT / "src")
    if sys.path[:1] != [src]:
        sys.path.insert(0, src)


def offline() -> None:
    """No network for Hugging Face (models come from the local cache) and no tokenizer threads fighting the
    benchmark's own; a value the caller set wins."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def key_values(items: Iterable[str]) -> dict[str, Any]:
    """``--set key=value`` arguments as a dict, each value read as JSON where it parses (``3``, ``true``,
    ``[1, 2]``) and kept as a string otherwise."""
    out: dict[str, Any] = {}
    for item in items:
        k, _, v = item.partition("=")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def uptime() -> str:
    """The machine's ``uptime`` line (the load a timing was taken under), or the load averages without it."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def missing(path: Path, what: str) -> bool:
    """True, after saying so on stderr, when the data file ``path`` is absent (the script then exits 0)."""
    if Path(path).exists():
        return False
    print(f"{what} not found under {Path(path).parent}; nothing to do", file=sys.stderr)
    return True


def read_rows(path: Path) -> list[dict[str, str]]:
    """Every row of a CSV file with a header, as dicts."""
    with Path(path).open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def read_texts(path: Path, *, n: int | None = None, offset: int = 0, column: str = "text") -> list[str]:
    """The ``column`` of a CSV file's rows ``offset`` … ``offset + n`` (all from ``offset`` when ``n`` is None),
    reading no further than needed."""
    out: list[str] = []
    with Path(path).open(encoding="utf-8", newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            if n is not None and i >= offset + n:
                break
            if i >= offset:
                out.append(row[column])
    return out


def write_rows(path: Path, rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> None:
    """A CSV file of ``rows`` (their ``columns`` only, in that order), written whole or not at all (a temporary
    file, then a rename); the folder is created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def write_texts(path: Path, texts: Iterable[str], column: str = "text") -> None:
    """A one-column CSV file of ``texts`` (see :func:`write_rows`)."""
    write_rows(path, ({column: t} for t in texts), [column])


__all__ = ["ROOT", "SHARED", "key_values", "missing", "offline", "read_rows", "read_texts", "uptime", "use_src", "write_rows",
           "write_texts"]
