"""SecretMatrix: shapes, holders, private mask, counts, union, subsets, persistence, public/private split."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from privtext.data import Corpus
from privtext.errors import DataError
from privtext.secrets import MatrixBuilder, SecretMatrix, Span, split_public_private


def _example() -> SecretMatrix:
    # record 0: e-mail a (twice) ; record 1: nothing ; record 2: e-mail a + phone p ; record 3: phone p ; 4: word w
    b = MatrixBuilder()
    b.add(0, "EMAIL", "a@x.org", 0, 7)
    b.add(0, "EMAIL", "a@x.org", 20, 27)
    b.add(2, "EMAIL", "a@x.org", 5, 12)
    b.add(2, "PHONE", "4155552671", 30, 42)
    b.add(3, "PHONE", "4155552671", 0, 12)
    b.add(4, "RANDOM_WORD", "zebra", 3, 8)
    return b.build(6)


def test_shapes_holders_and_private_mask_agree() -> None:
    m = _example()
    assert m.shape == (6, 3) and m.n_records == 6 and m.n_secrets == 3
    assert m.matrix.dtype == np.int8 and set(np.unique(m.matrix.data)) == {1}  # repeats do not count twice
    assert m.secrets == ("a@x.org", "4155552671", "zebra") and m.types == ("EMAIL", "PHONE", "RANDOM_WORD")
    assert m.holders(0).tolist() == [0, 2]
    assert m.holders(1).tolist() == [2, 3]
    assert m.holders(2).tolist() == [4]
    assert m.private_mask().tolist() == [True, False, True, True, True, False]
    # consistency: a record is private iff it is a holder of some secret
    held = set().union(*(set(m.holders(j).tolist()) for j in range(m.n_secrets)))
    assert held == set(np.flatnonzero(m.private_mask()).tolist())
    assert m.holder_counts().tolist() == [2, 2, 1]
    assert m.secret_counts().tolist() == [1, 0, 2, 1, 1, 0]
    assert m.secrets_of(2).tolist() == [0, 1]
    assert m.index("4155552671") == 1 and m.index("a@x.org", "EMAIL") == 0
    with pytest.raises(IndexError):
        m.holders(3)


def test_counts_by_type() -> None:
    c = _example().counts_by_type()
    assert c["EMAIL"] == {"secrets": 1, "records": 2, "occurrences": 2, "mentions": 3}
    assert c["PHONE"] == {"secrets": 1, "records": 2, "occurrences": 2, "mentions": 2}
    assert c["RANDOM_WORD"] == {"secrets": 1, "records": 1, "occurrences": 1, "mentions": 1}


def test_summary_is_json_safe_and_hides_values_unless_asked() -> None:
    m = _example()
    s = m.summary()
    text = json.dumps(s)
    assert "a@x.org" not in text and "zebra" not in text and "a@x.org" not in repr(m)
    assert s["n_private"] == 4 and s["n_public"] == 2 and s["max_holders_per_secret"] == 2
    with_values = m.summary(include_values=True)
    assert {d["value"] for d in with_values["secrets"]} == {"a@x.org", "4155552671", "zebra"}
    json.dumps(with_values)


def test_union_merges_equal_secrets_and_keeps_distinct_ones() -> None:
    a = _example()
    b = MatrixBuilder()
    b.add(1, "PHONE", "4155552671", 0, 12)  # same secret as a's column 1, new holder
    b.add(5, "EXPLICIT", "falcon", 0, 6)  # new secret
    b.add(4, "EXPLICIT", "zebra", 3, 8)  # same value as a's word but another type: a separate secret
    u = a.union(b.build(6))
    assert u.n_secrets == 5
    assert u.holders(u.index("4155552671", "PHONE")).tolist() == [1, 2, 3]
    assert u.holders(u.index("falcon")).tolist() == [5]
    assert u.private_mask().all()
    assert (u.private_mask() == (a.private_mask() | b.build(6).private_mask())).all()
    assert u.spans is not None and Span(0, 12, "PHONE", u.index("4155552671", "PHONE")) in u.spans[1]
    assert (a | b.build(6)).shape == u.shape
    with pytest.raises(DataError):
        a.union(SecretMatrix.empty(5))


def test_subset_records_and_drop_unheld() -> None:
    m = _example()
    sub = m.subset_records([3, 1])
    assert sub.shape == (2, 3)
    assert sub.private_mask().tolist() == [True, False]
    assert sub.holders(1).tolist() == [0]
    assert sub.spans == (m.spans[3], m.spans[1])
    dropped = sub.drop_unheld()
    assert dropped.secrets == ("4155552671",) and dropped.spans[0][0].secret == 0
    mask_sub = m.subset_records(m.private_mask())
    assert mask_sub.n_records == 4 and mask_sub.private_mask().all()


def test_by_type_collapses_to_one_secret_per_category() -> None:
    t = _example().by_type()
    assert t.secrets == ("EMAIL", "PHONE", "RANDOM_WORD")
    assert t.holders(0).tolist() == [0, 2] and t.holders(1).tolist() == [2, 3]


def test_construction_validates() -> None:
    with pytest.raises(DataError, match="columns"):
        SecretMatrix(sp.csr_matrix((2, 2), dtype=np.int8), ("a",), ("EMAIL",))
    with pytest.raises(DataError, match="same"):
        SecretMatrix(sp.csr_matrix((2, 2), dtype=np.int8), ("a", "a"), ("EMAIL", "EMAIL"))
    with pytest.raises(DataError, match="spans"):
        SecretMatrix(sp.csr_matrix((2, 1), dtype=np.int8), ("a",), ("EMAIL",), ((),))
    m = SecretMatrix(np.array([[2, 0], [0, -0]]), ("a", "b"), ("X", "X"))  # dense input, values clipped to 1
    assert m.matrix.data.tolist() == [1]
    e = SecretMatrix.empty(3)
    assert e.shape == (3, 0) and not e.private_mask().any() and e.summary()["n_public"] == 3


def test_save_load_roundtrip(tmp_path) -> None:
    m = _example()
    p = m.save(tmp_path / "secrets.npz")
    back = SecretMatrix.load(p)
    assert back.secrets == m.secrets and back.types == m.types and back.spans == m.spans
    assert (back.matrix != m.matrix).nnz == 0
    with pytest.raises(DataError):
        SecretMatrix.load(tmp_path / "missing.npz")


def test_split_public_private_keeps_ids_and_order() -> None:
    m = _example()
    corpus = Corpus.from_texts([f"t{i}" for i in range(6)], {"y": list("abcdef")}, ids=[f"r{i}" for i in range(6)])
    pub, priv, pm = split_public_private(corpus, m)
    assert pub.ids == ("r1", "r5") and pub.labels["y"] == ("b", "f")
    assert priv.ids == ("r0", "r2", "r3", "r4") and priv.texts == ("t0", "t2", "t3", "t4")
    assert pm.n_records == len(priv) and pm.private_mask().all()
    assert pm.holders(m.index("4155552671")).tolist() == [1, 2]  # rows of private_corpus
    assert set(pub.ids).isdisjoint(priv.ids) and len(pub) + len(priv) == len(corpus)
    with pytest.raises(DataError, match="6 records"):
        split_public_private(corpus.subset([0, 1]), m)
