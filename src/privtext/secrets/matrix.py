"""The records × secrets membership matrix.

A :class:`SecretMatrix` says which record holds which declared secret: ``matrix[i, j] == 1`` when record ``i``
contains secret ``j``. Secrets are identified by ``(type, canonical value)``: the same e-mail address written in
two cases, or the same card number written with spaces and with dashes, is one secret (see
:mod:`privtext.secrets.canonical`). The same string found as two different types (an ``EXPLICIT`` secret that is
also an ``EMAIL``) stays two secrets; both columns then hold the same records, which only makes SecPE's linear
program more conservative.

This is the input of SecPE's SecretNoise linear program (``D_pri,j`` = :meth:`SecretMatrix.holders` of ``j``) and
of the public/private split (:func:`privtext.secrets.split.split_public_private`): a record that holds no secret
is public.

Secret *values* are sensitive. :meth:`SecretMatrix.summary` leaves them out unless asked, and ``repr`` never
shows them.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from ..errors import DataError
from .values import SecretValueIndex


class Span(NamedTuple):
    """One occurrence of a secret in a record's text: ``text[start:end]`` is the mention.

    ``secret`` is the column of the secret in the owning :class:`SecretMatrix` (so ``span[:3]`` is the plain
    ``(start, end, type)`` triple benchmarks compare with gold spans).
    """

    start: int
    end: int
    type: str
    secret: int


@dataclass(frozen=True, repr=False)
class SecretMatrix:
    """Sparse 0/1 membership of ``n_records`` records × ``n_secrets`` secrets.

    ``matrix`` is a ``scipy.sparse.csr_matrix`` of dtype int8 holding only ones; ``secrets[j]`` is secret ``j``'s
    canonical value and ``types[j]`` its entity type. ``spans`` (optional) gives, per record, the mentions found
    in its text, sorted by position.
    """

    matrix: sp.csr_matrix
    secrets: tuple[str, ...]
    types: tuple[str, ...]
    spans: tuple[tuple[Span, ...], ...] | None = field(default=None)

    def __post_init__(self) -> None:
        m = self.matrix
        if not sp.issparse(m):
            m = sp.csr_matrix(np.asarray(m))
        m = sp.csr_matrix(m, dtype=np.int8, copy=True)
        m.sum_duplicates()
        m.eliminate_zeros()
        m.data[:] = 1
        m.sort_indices()
        object.__setattr__(self, "matrix", m)
        object.__setattr__(self, "secrets", tuple(str(s) for s in self.secrets))
        object.__setattr__(self, "types", tuple(str(t) for t in self.types))
        n, k = m.shape
        if len(self.secrets) != k:
            raise DataError(f"secret matrix has {k} columns but {len(self.secrets)} secret values")
        if len(self.types) != k:
            raise DataError(f"secret matrix has {k} columns but {len(self.types)} secret types")
        keys = list(zip(self.types, self.secrets, strict=True))
        if len(set(keys)) != len(keys):
            dup = [f"{t}:<{len(v)} chars>" for (t, v), c in Counter(keys).items() if c > 1][:5]
            raise DataError(f"secret matrix lists the same (type, secret) more than once: {dup}")
        if self.spans is not None:
            spans = tuple(tuple(Span(*s) for s in rec) for rec in self.spans)
            if len(spans) != n:
                raise DataError(f"secret matrix has {n} records but spans for {len(spans)}")
            for i, rec in enumerate(spans):
                for s in rec:
                    if not 0 <= s.secret < k:
                        raise DataError(f"record {i}: span {s[:3]} names secret {s.secret}, not in [0, {k})")
            object.__setattr__(self, "spans", spans)

    # ------------------------------------------------------------------------------------------ constructors

    @classmethod
    def empty(cls, n_records: int, *, with_spans: bool = True) -> SecretMatrix:
        """No secrets at all: every record is public."""
        return cls(
            sp.csr_matrix((n_records, 0), dtype=np.int8), (), (), tuple(() for _ in range(n_records)) if with_spans else None
        )

    @classmethod
    def from_spans(
        cls, n_records: int, found: Iterable[Iterable[tuple[int, int, str, str]]]
    ) -> SecretMatrix:
        """Build from per-record ``(start, end, type, canonical value)`` mentions (secrets in first-seen order)."""
        builder = MatrixBuilder()
        count = 0
        for i, rec in enumerate(found):
            for start, end, typ, value in rec:
                builder.add(i, typ, value, start, end)
            count = i + 1
        if count > n_records:
            raise DataError(f"mentions given for {count} records but n_records={n_records}")
        return builder.build(n_records)

    @classmethod
    def from_pairs(
        cls, n_records: int, pairs: Iterable[tuple[int, str, str]], *, spans: bool = False
    ) -> SecretMatrix:
        """Build from ``(record index, type, canonical value)`` memberships (no spans)."""
        builder = MatrixBuilder()
        for i, typ, value in pairs:
            builder.add(int(i), typ, value)
        return builder.build(n_records, with_spans=spans)

    # ------------------------------------------------------------------------------------------ shape

    @property
    def n_records(self) -> int:
        """The number of records (rows)."""
        return int(self.matrix.shape[0])

    @property
    def n_secrets(self) -> int:
        """The number of distinct secrets (columns)."""
        return int(self.matrix.shape[1])

    @property
    def shape(self) -> tuple[int, int]:
        """(records, secrets)."""
        return self.n_records, self.n_secrets

    def __len__(self) -> int:
        return self.n_records

    def __repr__(self) -> str:  # never shows secret values
        return (
            f"SecretMatrix(n_records={self.n_records}, n_secrets={self.n_secrets}, "
            f"private={int(self.private_mask().sum())}, types={sorted(set(self.types))})"
        )

    # ------------------------------------------------------------------------------------------ queries

    @cached_property
    def _csc(self) -> sp.csc_matrix:
        return self.matrix.tocsc()

    @cached_property
    def _index(self) -> dict[tuple[str, str], int]:
        return {(t, v): j for j, (t, v) in enumerate(zip(self.types, self.secrets, strict=True))}

    def holders(self, j: int) -> np.ndarray:
        """Sorted indices of the records that hold secret ``j`` (``D_pri,j`` in SecPE's Eq. 6)."""
        if not -self.n_secrets <= j < self.n_secrets:
            raise IndexError(f"secret index {j} out of range for {self.n_secrets} secrets")
        j %= max(self.n_secrets, 1)
        c = self._csc
        return np.asarray(c.indices[c.indptr[j]:c.indptr[j + 1]], dtype=np.int64)

    def secrets_of(self, i: int) -> np.ndarray:
        """Sorted column indices of the secrets record ``i`` holds."""
        m = self.matrix
        return np.asarray(m.indices[m.indptr[i]:m.indptr[i + 1]], dtype=np.int64)

    def holder_counts(self) -> np.ndarray:
        """Number of records holding each secret, shape ``(n_secrets,)``."""
        return np.diff(self._csc.indptr).astype(np.int64)

    def secret_counts(self) -> np.ndarray:
        """Number of distinct secrets in each record, shape ``(n_records,)``."""
        return np.diff(self.matrix.indptr).astype(np.int64)

    def private_mask(self) -> np.ndarray:
        """Boolean mask of the records that hold at least one secret (the private records)."""
        return self.secret_counts() > 0

    def index(self, value: str, type: str | None = None) -> int:
        """Column of a secret given its canonical value (and type, needed when the value has several)."""
        if type is not None:
            try:
                return self._index[(type, value)]
            except KeyError:
                raise KeyError(f"no secret of type {type!r} with that value") from None
        cols = [j for (t, v), j in self._index.items() if v == value]
        if not cols:
            raise KeyError("no secret with that value")
        if len(cols) > 1:
            raise KeyError(f"the value is a secret of several types {[self.types[j] for j in cols]}; pass type=")
        return cols[0]

    def counts_by_type(self) -> dict[str, dict[str, int]]:
        """Per entity type: ``secrets`` (distinct values), ``records`` (records holding ≥ 1 of them),
        ``occurrences`` (record–secret memberships, i.e. non-zeros) and, when spans are kept, ``mentions``
        (every match in the text, repeats included)."""
        out: dict[str, dict[str, int]] = {}
        types = np.asarray(self.types, dtype=object)
        c = self._csc
        nnz_per_col = np.diff(c.indptr)
        for t in sorted(set(self.types)):
            cols = np.flatnonzero(types == t)
            sub = c[:, cols]
            out[t] = {
                "secrets": len(cols),
                "records": int((np.diff(sub.tocsr().indptr) > 0).sum()),
                "occurrences": int(nnz_per_col[cols].sum()),
            }
        if self.spans is not None:
            mentions = Counter(s.type for rec in self.spans for s in rec)
            for t in out:
                out[t]["mentions"] = int(mentions.get(t, 0))
        return out

    def summary(self, *, include_values: bool = False, max_values: int | None = None) -> dict[str, Any]:
        """JSON-safe statistics. Secret values are included only with ``include_values=True``."""
        hc = self.holder_counts()
        sc = self.secret_counts()
        priv = sc > 0
        out: dict[str, Any] = {
            "n_records": self.n_records,
            "n_secrets": self.n_secrets,
            "n_private": int(priv.sum()),
            "n_public": int((~priv).sum()),
            "private_fraction": float(priv.mean()) if self.n_records else 0.0,
            "max_holders_per_secret": int(hc.max()) if hc.size else 0,
            "mean_holders_per_secret": float(hc.mean()) if hc.size else 0.0,
            "max_secrets_per_record": int(sc.max()) if sc.size else 0,
            "mean_secrets_per_private_record": float(sc[priv].mean()) if priv.any() else 0.0,
            "by_type": self.counts_by_type(),
        }
        if include_values:
            order = np.argsort(-hc, kind="stable")
            if max_values is not None:
                order = order[:max_values]
            out["secrets"] = [
                {"value": self.secrets[j], "type": self.types[j], "holders": int(hc[j])} for j in order
            ]
        return out

    # ------------------------------------------------------------------------------------------ transforms

    def subset_records(self, idx: Sequence[int] | np.ndarray, *, drop_unheld: bool = False) -> SecretMatrix:
        """Rows ``idx`` (in that order). Columns are kept (same secret indices) unless ``drop_unheld``."""
        idx_arr = np.asarray(idx)
        if idx_arr.dtype == bool:
            if idx_arr.shape != (self.n_records,):
                raise DataError(f"boolean mask of length {idx_arr.shape} for {self.n_records} records")
            idx_arr = np.flatnonzero(idx_arr)
        idx_arr = idx_arr.astype(np.int64, copy=False)
        if idx_arr.size and (idx_arr.min() < -self.n_records or idx_arr.max() >= self.n_records):
            raise IndexError(f"record index out of range for {self.n_records} records")
        m = self.matrix[idx_arr]
        spans = None if self.spans is None else tuple(self.spans[int(i)] for i in idx_arr)
        out = SecretMatrix(m, self.secrets, self.types, spans)
        return out.drop_unheld() if drop_unheld else out

    def subset_secrets(self, cols: Sequence[int] | np.ndarray) -> SecretMatrix:
        """Keep only secret columns ``cols`` (spans of dropped secrets are dropped; indices are remapped)."""
        cols_arr = np.asarray(cols)
        if cols_arr.dtype == bool:
            cols_arr = np.flatnonzero(cols_arr)
        cols_arr = cols_arr.astype(np.int64, copy=False)
        remap = {int(old): new for new, old in enumerate(cols_arr)}
        spans = None
        if self.spans is not None:
            spans = tuple(
                tuple(Span(s.start, s.end, s.type, remap[s.secret]) for s in rec if s.secret in remap)
                for rec in self.spans
            )
        return SecretMatrix(
            self._csc[:, cols_arr].tocsr(),
            tuple(self.secrets[j] for j in cols_arr),
            tuple(self.types[j] for j in cols_arr),
            spans,
        )

    def drop_unheld(self) -> SecretMatrix:
        """Drop the secrets no record holds."""
        keep = np.flatnonzero(self.holder_counts() > 0)
        return self if keep.size == self.n_secrets else self.subset_secrets(keep)

    def select_types(self, types: Iterable[str]) -> SecretMatrix:
        """Keep only secrets of the given entity types."""
        wanted = set(types)
        return self.subset_secrets([j for j, t in enumerate(self.types) if t in wanted])

    def union(self, other: SecretMatrix) -> SecretMatrix:
        """Secrets of both matrices over the same records; ``(type, value)`` pairs found by both merge."""
        if not isinstance(other, SecretMatrix):
            raise TypeError(f"can only union with a SecretMatrix, got {type(other).__name__}")
        if other.n_records != self.n_records:
            raise DataError(f"cannot union secret matrices over {self.n_records} and {other.n_records} records")
        index = dict(self._index)
        secrets, types = list(self.secrets), list(self.types)
        remap = np.empty(other.n_secrets, dtype=np.int64)
        for j, key in enumerate(zip(other.types, other.secrets, strict=True)):
            if key not in index:
                index[key] = len(secrets)
                types.append(key[0])
                secrets.append(key[1])
            remap[j] = index[key]
        k = len(secrets)
        a = sp.csr_matrix((self.matrix.data, self.matrix.indices, self.matrix.indptr), shape=(self.n_records, k))
        o = other.matrix.tocoo()
        b = sp.csr_matrix(
            (np.ones(o.nnz, dtype=np.int8), (o.row, remap[o.col])), shape=(self.n_records, k)
        )
        spans = None
        if self.spans is not None and other.spans is not None:
            merged = []
            for ra, rb in zip(self.spans, other.spans, strict=True):
                rb2 = [Span(s.start, s.end, s.type, int(remap[s.secret])) for s in rb]
                merged.append(tuple(sorted({*ra, *rb2}, key=lambda s: (s.start, s.end, s.secret))))
            spans = tuple(merged)
        return SecretMatrix(a + b, tuple(secrets), tuple(types), spans)

    def __or__(self, other: SecretMatrix) -> SecretMatrix:
        return self.union(other)

    def with_all_holders(self, texts: Sequence[str]) -> SecretMatrix:
        """Every record of ``texts`` (this matrix's records) that contains a secret's value made a holder of it
        (:func:`privtext.secrets.holders.propagate_holders`; canonical matching, digits-only numbers, case-folded
        words)."""
        texts = as_texts(texts)
        if len(texts) != self.n_records:
            raise DataError(f"secret matrix has {self.n_records} records but {len(texts)} texts were given")
        if self.n_secrets == 0:
            return self
        index = SecretValueIndex(self.secrets, self.types)
        found = [index.find(t) for t in texts]
        held = [sorted({h.secret for h in hits}) for hits in found]
        rows = [i for i, cols in enumerate(held) for _ in cols]
        extra = sp.csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, [c for cols in held for c in cols])),
                              shape=self.shape)
        spans = None
        if self.spans is not None:
            spans = tuple(_add_spans(old, hits, self.types) for old, hits in zip(self.spans, found, strict=True))
        return SecretMatrix(self.matrix + extra, self.secrets, self.types, spans)

    def value_index(self) -> SecretValueIndex:
        """A :class:`~privtext.secrets.values.SecretValueIndex` of this matrix's values (hashed, no text): finds
        them in any text, e.g. the prompts and synthetic texts the run's guard scans."""
        return SecretValueIndex(self.secrets, self.types)

    def by_type(self) -> SecretMatrix:
        """One secret per entity type (the paper's PII set-up, §4.3: "treat each category as a secret").

        Record ``i`` holds secret ``EMAIL`` when it holds any e-mail secret; the secret's value is the type name.
        """
        kinds = sorted(set(self.types))
        pos = {t: j for j, t in enumerate(kinds)}
        colmap = np.array([pos[t] for t in self.types], dtype=np.int64)
        o = self.matrix.tocoo()
        m = sp.csr_matrix(
            (np.ones(o.nnz, dtype=np.int8), (o.row, colmap[o.col] if o.nnz else o.col)),
            shape=(self.n_records, len(kinds)),
        )
        spans = None
        if self.spans is not None:
            spans = tuple(tuple(Span(s.start, s.end, s.type, pos[s.type]) for s in rec) for rec in self.spans)
        return SecretMatrix(m, tuple(kinds), tuple(kinds), spans)

    def to_dense(self) -> np.ndarray:
        return self.matrix.toarray().astype(bool)

    # ------------------------------------------------------------------------------------------ persistence

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write to ``path`` (.npz). The file contains the secret values: keep it with the private data."""
        from ..atomicio import atomic_path

        p = Path(path)
        meta: dict[str, Any] = {"secrets": list(self.secrets), "types": list(self.types)}
        if self.spans is not None:
            meta["spans"] = [[list(s) for s in rec] for rec in self.spans]
        m = self.matrix
        with atomic_path(p) as tmp, open(tmp, "wb") as fh:
            np.savez_compressed(
                fh,
                indptr=m.indptr,
                indices=m.indices,
                shape=np.asarray(m.shape, dtype=np.int64),
                meta=np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8),
            )
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SecretMatrix:
        p = Path(path)
        if not p.exists():
            raise DataError(f"{p}: no such secret matrix file")
        try:
            with np.load(p, allow_pickle=False) as z:
                indptr, indices, shape = z["indptr"], z["indices"], tuple(int(x) for x in z["shape"])
                meta = json.loads(z["meta"].tobytes().decode("utf-8"))
        except (OSError, KeyError, ValueError) as e:
            raise DataError(f"{p}: not a secret matrix file ({e})") from None
        m = sp.csr_matrix((np.ones(len(indices), dtype=np.int8), indices, indptr), shape=shape)
        spans = meta.get("spans")
        return cls(
            m,
            tuple(meta["secrets"]),
            tuple(meta["types"]),
            None if spans is None else tuple(tuple(Span(*s) for s in rec) for rec in spans),
        )


def _add_spans(old: Sequence[Span], hits: Iterable[Any], types: Sequence[str]) -> tuple[Span, ...]:
    """``old`` plus a span per hit that overlaps no span of the same secret already there (the detector's own
    span, e.g. the whole URL, wins over the canonical part the value index finds inside it)."""
    out = list(old)
    for h in sorted(hits, key=lambda h: (h.start, -(h.end - h.start), h.secret)):
        if not any(s.secret == h.secret and s.start < h.end and h.start < s.end for s in out):
            out.append(Span(h.start, h.end, types[h.secret], h.secret))
    return tuple(sorted(set(out), key=lambda s: (s.start, s.end, s.secret)))


def from_mentions(mentions: Iterable[Sequence[tuple[int, int, str, str]]], n_records: int) -> SecretMatrix:
    """The matrix of per-record ``(start, end, type, canonical value)`` mentions (record i = i-th item)."""
    b = MatrixBuilder()
    for i, found in enumerate(mentions):
        for start, end, typ, value in found:
            b.add(i, typ, value, start, end)
    return b.build(n_records)


class MatrixBuilder:
    """Accumulates ``(record, type, value[, start, end])`` findings into a :class:`SecretMatrix`.

    Secrets get columns in first-seen order, so building over records in order is deterministic.
    """

    def __init__(self) -> None:
        self._index: dict[tuple[str, str], int] = {}
        self._secrets: list[str] = []
        self._types: list[str] = []
        self._rows: list[int] = []
        self._cols: list[int] = []
        self._spans: dict[int, list[Span]] = {}

    def column(self, typ: str, value: str) -> int:
        key = (typ, value)
        j = self._index.get(key)
        if j is None:
            j = self._index[key] = len(self._secrets)
            self._secrets.append(value)
            self._types.append(typ)
        return j

    def add(self, record: int, typ: str, value: str, start: int | None = None, end: int | None = None) -> int:
        j = self.column(typ, value)
        self._rows.append(record)
        self._cols.append(j)
        if start is not None and end is not None:
            self._spans.setdefault(record, []).append(Span(int(start), int(end), typ, j))
        return j

    def build(self, n_records: int, *, with_spans: bool = True) -> SecretMatrix:
        if self._rows and max(self._rows) >= n_records:
            raise DataError(f"a finding names record {max(self._rows)} but there are {n_records} records")
        k = len(self._secrets)
        m = sp.csr_matrix(
            (np.ones(len(self._rows), dtype=np.int8), (np.asarray(self._rows, dtype=np.int64),
                                                       np.asarray(self._cols, dtype=np.int64))),
            shape=(n_records, k),
        )
        spans = None
        if with_spans:
            spans = tuple(
                tuple(sorted(set(self._spans.get(i, ())), key=lambda s: (s.start, s.end, s.secret)))
                for i in range(n_records)
            )
        return SecretMatrix(m, tuple(self._secrets), tuple(self._types), spans)


def as_texts(texts: Any) -> list[str]:
    """Accept a :class:`~privtext.data.Corpus`, a sequence of strings, or one string (refused: wrap it)."""
    if isinstance(texts, str):
        raise DataError("detect() takes a sequence of texts, got a single string (wrap it in a list)")
    t = getattr(texts, "texts", texts)
    out = list(t)
    for i, x in enumerate(out):
        if not isinstance(x, str):
            raise DataError(f"text {i} is {type(x).__name__}, not str")
    return out

