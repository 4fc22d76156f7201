"""Loading and writing corpora: CSV, TSV, JSONL, Parquet, and Hugging Face datasets (offline cache).

Errors are typed and name the file, the line or row, and the column:

* :class:`~privtext.errors.DataEncodingError` — bytes that are not UTF-8, with file and line;
* :class:`~privtext.errors.MissingColumnError` — a requested column is absent (lists the ones present);
* :class:`~privtext.errors.EmptyTextError` — empty, whitespace-only, null or NaN text (the file's lines, 1-based
  as an editor shows them, for CSV/TSV/JSONL; 1-based records for Parquet and Hugging Face datasets);
* :class:`~privtext.errors.DataFormatError` — empty file, broken JSON line, unknown extension.

CSV/TSV is parsed with Python's :mod:`csv` module (RFC 4180 quoting, embedded newlines and quotes), not by
splitting lines, and is written the same way, so any text round-trips. A ``.csv`` file whose header holds no comma
but splits on ``;``, a tab or ``|`` into several distinct names (a spreadsheet's export in a locale whose decimal
mark is the comma) is read with that delimiter, and every error about its fields says so.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..atomicio import atomic_path, atomic_write_text
from ..errors import (
    DataEncodingError,
    DataError,
    DataFormatError,
    EmptyTextError,
    MissingColumnError,
    optional_import,
)
from .corpus import Corpus

FORMATS = ("csv", "tsv", "jsonl", "parquet")
csv.field_size_limit(2**31 - 1)


def infer_format(path: str | os.PathLike[str]) -> str:
    p = str(path)
    if p.startswith("hf:"):
        return "hf"
    suffixes = [s.lower() for s in Path(p).suffixes]
    ext = suffixes[-1] if suffixes else ""
    table = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
             ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet"}
    if ext not in table:
        raise DataFormatError(f"{p}: cannot tell the format from extension {ext!r}; use one of {FORMATS}")
    return table[ext]


def _decode(path: Path) -> str:
    raw = path.read_bytes()
    if not raw.strip():
        raise DataFormatError(f"{path}: file is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DataEncodingError(str(path), line, f"byte 0x{raw[e.start]:02x} at offset {e.start}") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _build(
    path: str,
    rows: list[dict[str, Any]],
    columns: Sequence[str],
    *,
    text_column: str,
    label_columns: Sequence[str],
    id_column: str | None,
    allow_empty_text: bool,
    name: str | None,
    lines: Sequence[int] | None = None,
    note: str = "",
) -> Corpus:
    """``lines``: the 1-based line of the file each row starts on (CSV/TSV/JSONL), so errors point where an editor
    shows the row; without them rows are named as 1-based records. ``note`` ends every message (how the file was
    read, e.g. its sniffed delimiter)."""
    unit = "line" if lines is not None else "record"

    def at(i: int) -> int:
        return lines[i] if lines is not None else i + 1

    wanted = [text_column, *label_columns] + ([id_column] if id_column else [])
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise MissingColumnError(path, missing, list(columns), hint=note)
    texts: list[str] = []
    bad: list[int] = []
    for i, r in enumerate(rows):
        t = r.get(text_column)
        if _is_missing(t):
            bad.append(at(i))
            texts.append("")
            continue
        if not isinstance(t, str):
            raise DataError(f"{path}: {unit} {at(i)}: text column {text_column!r} holds {type(t).__name__} {t!r}, "
                            "not text")
        if not allow_empty_text and not t.strip():
            bad.append(at(i))
        texts.append(t)
    if bad:
        raise EmptyTextError(path, bad, text_column, unit=unit)
    labels: dict[str, list[str]] = {}
    for c in label_columns:
        vals = []
        for i, r in enumerate(rows):
            v = r.get(c)
            if _is_missing(v) or (isinstance(v, str) and not v.strip()):
                raise DataError(f"{path}: {unit} {at(i)}: missing value in label column {c!r}")
            vals.append(str(v))
        labels[c] = vals
    if id_column:
        ids = [str(r[id_column]) for r in rows]
    else:
        ids = [str(i) for i in range(len(rows))]
    if not rows:
        raise DataFormatError(f"{path}: no records")
    return Corpus(ids=tuple(ids), texts=tuple(texts), labels=labels, name=name or Path(path).stem)


#: delimiters tried when a ``.csv`` header holds no comma (module docstring)
SNIFFED = (";", "\t", "|")


def _sniff(header_line: str, delimiter: str) -> str | None:
    """The delimiter a one-column header really uses: ``;``, a tab or ``|`` when the header has no ``delimiter``
    and splits on exactly one of them into several distinct, non-empty names; else None."""
    if delimiter in header_line:
        return None
    found = []
    for d in SNIFFED:
        if d == delimiter:
            continue
        try:
            names = next(csv.reader([header_line], delimiter=d))
        except (csv.Error, StopIteration):
            continue
        if len(names) > 1 and len(set(names)) == len(names) and all(n.strip() for n in names):
            found.append(d)
    return found[0] if len(found) == 1 else None


def _delimiter_words(d: str) -> str:
    return {"\t": "tab", ",": "comma", ";": "semicolon", "|": "'|'"}.get(d, repr(d))


def _read_delimited(path: Path, delimiter: str) -> tuple[list[dict[str, Any]], list[str], list[int], str]:
    """(rows, header, the 1-based line each row starts on, a note on how the file was read: "" or the sniffed
    delimiter)."""
    text = _decode(path)
    note = ""
    first = text.split("\n", 1)[0].rstrip("\r")
    sniffed = _sniff(first, delimiter)
    if sniffed is not None:
        note = (f"read as {_delimiter_words(sniffed)}-separated: its header has no {_delimiter_words(delimiter)} "
                f"and splits on {sniffed!r} into {len(next(csv.reader([first], delimiter=sniffed)))} columns")
        delimiter = sniffed
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    suffix = f" ({note})" if note else ""
    try:
        header = next(reader)
    except StopIteration:
        raise DataFormatError(f"{path}: file is empty") from None
    except csv.Error as e:
        raise DataFormatError(f"{path}:1: {e}{suffix}") from None
    if len(set(header)) != len(header):
        raise DataFormatError(f"{path}: duplicate column names in header {header}{suffix}")
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    try:
        start = reader.line_num + 1
        for rec in reader:
            here, start = start, reader.line_num + 1
            if not rec:
                continue  # blank line
            if len(rec) != len(header):
                hint = suffix
                if not note and len(header) == 1:
                    hint = (f" (the header is one column, {header[0]!r}: a field that holds a "
                            f"{_delimiter_words(delimiter)} must be quoted; privtext reads .csv as comma-separated, "
                            "or semicolon-, tab- or '|'-separated when the header is, and .tsv as tab-separated)")
                raise DataFormatError(
                    f"{path}:{here}: {len(rec)} fields where the header has {len(header)}{hint}"
                )
            rows.append(dict(zip(header, rec, strict=True)))
            lines.append(here)
    except csv.Error as e:
        raise DataFormatError(f"{path}:{reader.line_num}: {e}{suffix}") from None
    return rows, header, lines, note


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[str], list[int] | None]:
    text = _decode(path)
    rows: list[dict[str, Any]] = []
    columns: dict[str, None] = {}
    stripped = text.lstrip()
    if stripped.startswith("["):  # a plain JSON array of objects is accepted too
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataFormatError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
        lines = [(i + 1, d) for i, d in enumerate(data)]
        array = True
    else:
        array = False
        lines = []
        for ln, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                lines.append((ln, json.loads(line)))
            except json.JSONDecodeError as e:
                raise DataFormatError(f"{path}:{ln}: invalid JSON ({e.msg})") from None
    for ln, obj in lines:
        if not isinstance(obj, dict):
            raise DataFormatError(f"{path}:{ln}: expected a JSON object, got {type(obj).__name__}")
        rows.append(obj)
        for k in obj:
            columns.setdefault(k, None)
    # a JSON array's items are records (no line per record); JSON lines are named by their line in the file
    return rows, list(columns), None if array else [ln for ln, _ in lines]


def _read_parquet(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    import pyarrow.parquet as pq

    if path.stat().st_size == 0:
        raise DataFormatError(f"{path}: file is empty")
    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises ArrowInvalid and friends
        raise DataFormatError(f"{path}: not a readable Parquet file ({e})") from None
    return table.to_pylist(), list(table.column_names)


def _read_hf(spec: str) -> tuple[list[dict[str, Any]], list[str], str]:
    parts = spec[3:].split(":")
    if not parts or not parts[0]:
        raise DataFormatError(f"{spec}: expected hf:NAME[:CONFIG][:SPLIT]")
    name = parts[0]
    config = parts[1] if len(parts) > 1 and parts[1] else None
    split = parts[2] if len(parts) > 2 and parts[2] else "train"
    datasets = optional_import("datasets", "hf", f"loading {spec}")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        ds = datasets.load_dataset(name, config, split=split)
    except Exception as e:
        raise DataFormatError(f"{spec}: cannot load from the local Hugging Face cache ({e})") from None
    return [dict(r) for r in ds], list(ds.column_names), f"{name}-{split}"


def load_corpus(
    path: str | os.PathLike[str],
    *,
    text_column: str = "text",
    label_columns: Sequence[str] = (),
    id_column: str | None = None,
    format: str | None = None,
    allow_empty_text: bool = False,
    name: str | None = None,
    optional_labels: bool = False,
) -> Corpus:
    """Load a corpus. ``path`` may be ``hf:name[:config][:split]`` for a dataset in the local HF cache.

    ``optional_labels``: label columns the file lacks are left out instead of being an error (public text
    without labels when the label schema is declared in ``data.label_values``)."""
    spath = str(path)
    fmt = format or infer_format(spath)
    if fmt == "hf":
        rows, cols, nm = _read_hf(spath)
        if optional_labels:
            label_columns = [c for c in label_columns if c in cols]
        return _build(spath, rows, cols, text_column=text_column, label_columns=label_columns,
                      id_column=id_column, allow_empty_text=allow_empty_text, name=name or nm)
    p = Path(spath)
    if not p.exists():
        raise DataError(f"{p}: no such file")
    if p.is_dir():
        raise DataError(f"{p}: is a directory, expected a file")
    lines: list[int] | None = None
    note = ""
    if fmt == "csv":
        rows, cols, lines, note = _read_delimited(p, ",")
    elif fmt == "tsv":
        rows, cols, lines, note = _read_delimited(p, "\t")
    elif fmt == "jsonl":
        rows, cols, lines = _read_jsonl(p)
    elif fmt == "parquet":
        rows, cols = _read_parquet(p)
    else:
        raise DataFormatError(f"{p}: unknown format {fmt!r}; use one of {FORMATS}")
    if optional_labels:
        label_columns = [c for c in label_columns if c in cols]
    return _build(spath, rows, cols, text_column=text_column, label_columns=label_columns,
                  id_column=id_column, allow_empty_text=allow_empty_text, name=name, lines=lines, note=note)


def write_corpus(
    corpus: Corpus,
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    text_column: str = "text",
    include_ids: bool = True,
    extra: dict[str, Sequence[Any]] | None = None,
) -> Path:
    """Write atomically (a crash never leaves a half-written file under ``path``)."""
    p = Path(path)
    fmt = format or infer_format(p)
    cols: dict[str, list[Any]] = {}
    if include_ids:
        cols["id"] = list(corpus.ids)
    cols[text_column] = list(corpus.texts)
    for c, v in corpus.labels.items():
        cols[c] = list(v)
    for c, v in (extra or {}).items():
        if len(v) != len(corpus):
            raise DataError(f"extra column {c!r} has {len(v)} values for {len(corpus)} records")
        cols[c] = list(v)
    names = list(cols)
    if fmt in ("csv", "tsv"):
        buf = io.StringIO(newline="")
        w = csv.writer(buf, delimiter="," if fmt == "csv" else "\t", quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n")
        w.writerow(names)
        for i in range(len(corpus)):
            w.writerow([cols[c][i] for c in names])
        atomic_write_text(p, buf.getvalue())
    elif fmt == "jsonl":
        lines = [json.dumps({c: cols[c][i] for c in names}, ensure_ascii=False) for i in range(len(corpus))]
        atomic_write_text(p, "".join(line + "\n" for line in lines))
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table({c: pa.array(cols[c]) for c in names})
        with atomic_path(p) as tmp:
            pq.write_table(table, tmp)
    else:
        raise DataFormatError(f"{p}: cannot write format {fmt!r}; use one of {FORMATS}")
    return p
