"""Corpus loading and writing: round trips, malformed inputs, splits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privtext.data import Corpus, load_corpus, split_corpus, train_test_split, write_corpus
from privtext.errors import (
    DataEncodingError,
    DataError,
    DataFormatError,
    EmptyTextError,
    MissingColumnError,
)

from .conftest import shared_file

# any text that UTF-8 can hold (no lone surrogates)
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=60)
LABEL = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12).filter(str.strip)
SPECIAL = st.sampled_from(["", "a,b", 'say "hi"', "line1\nline2", "cr\r\nlf", "\r", "\t tab", "NaN", "null",
                           "  padded  ", "ünïcödé ✓ 漢字 🙂", '"', "\x00nul", "=1+2"])


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.one_of(TEXT, SPECIAL), min_size=1, max_size=8), labels=st.data())
def test_round_trip_any_text(tmp_path: Path, fmt: str, texts: list[str], labels: st.DataObject) -> None:
    lab = labels.draw(st.lists(LABEL, min_size=len(texts), max_size=len(texts)))
    c = Corpus.from_texts(texts, {"label": lab})
    path = tmp_path / f"c.{fmt}"
    write_corpus(c, path)
    back = load_corpus(path, label_columns=["label"], id_column="id", allow_empty_text=True)
    assert back.texts == c.texts
    assert back.labels["label"] == c.labels["label"]
    assert back.ids == c.ids


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_missing_column_is_named(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"c.{fmt}"
    write_corpus(Corpus.from_texts(["a", "b"], {"label1": ["x", "y"]}), path)
    with pytest.raises(MissingColumnError, match="'label2'") as e:
        load_corpus(path, label_columns=["label1", "label2"])
    assert "label1" in e.value.available


@pytest.mark.parametrize("fmt,where", [("csv", [3, 5]), ("jsonl", [2, 4]), ("parquet", [2, 4])])
def test_empty_text_rejected_with_where_an_editor_shows_it(tmp_path: Path, fmt: str, where: list[int]) -> None:
    """Issue 35, item 6: the file's lines as an editor numbers them (the CSV header is line 1), 1-based records
    for Parquet; not 0-based data rows."""
    path = tmp_path / f"c.{fmt}"
    write_corpus(Corpus.from_texts(["ok", "   ", "fine", ""]), path)
    with pytest.raises(EmptyTextError) as e:
        load_corpus(path)
    unit = "record" if fmt == "parquet" else "line"
    assert e.value.rows == where and f"at {unit}(s) {where[0]}, {where[1]} " in str(e.value), str(e.value)
    if fmt != "parquet":  # the lines hold exactly the blank texts
        lines = path.read_text().splitlines()
        assert all(not json.loads(lines[n - 1])["text"].strip() if fmt == "jsonl" else
                   lines[n - 1].split(",")[1].strip() in ("", '""') for n in where)


def test_line_numbers_count_blank_lines_and_quoted_newlines(tmp_path: Path) -> None:
    p = tmp_path / "c.csv"
    p.write_text('id,text\n1,a\n\n2,"multi\nline"\n3,  \n4,b\n', encoding="utf-8")
    with pytest.raises(EmptyTextError) as e:
        load_corpus(p)
    assert e.value.rows == [6]  # line 3 blank, lines 4-5 one record
    j = tmp_path / "c.jsonl"
    j.write_text('{"text": "a"}\n\n{"text": ""}\n', encoding="utf-8")
    with pytest.raises(EmptyTextError) as e:
        load_corpus(j)
    assert e.value.rows == [3]
    q = tmp_path / "l.csv"
    q.write_text("text,label\na,x\nb,\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 3: missing value in label column 'label'"):
        load_corpus(q, label_columns=["label"])


@pytest.mark.parametrize("delimiter", [";", "\t", "|"])
def test_a_csv_separated_by_another_delimiter_is_read_and_says_so(tmp_path: Path, delimiter: str) -> None:
    """Issue 35, item 6: a semicolon-separated CSV (a spreadsheet export) gave "2 fields where the header has 1".
    A header with no comma that splits on one other delimiter is read with it; errors say how it was read."""
    p = tmp_path / "semi.csv"
    rows = ["id;text;intent", "1;hello, world;card", "2;pending transaction?;card", '3;"a; b";refund']
    p.write_text("\n".join(r.replace(";", delimiter) for r in rows) + "\n", encoding="utf-8")
    c = load_corpus(p, label_columns=["intent"], id_column="id")
    assert c.texts == ("hello, world", "pending transaction?", "a" + delimiter + " b")
    assert c.labels["intent"] == ("card", "card", "refund") and c.ids == ("1", "2", "3")
    with pytest.raises(MissingColumnError, match=r"read as .*-separated: its header has no comma"):
        load_corpus(p, text_column="message")


def test_a_one_column_csv_with_an_unquoted_comma_gets_a_hint(tmp_path: Path) -> None:
    p = tmp_path / "one.csv"
    p.write_text("text\nhello, world\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"one\.csv:2: 2 fields where the header has 1 \(the header is one "
                                              r"column, 'text': a field that holds a comma must be quoted"):
        load_corpus(p)
    q = tmp_path / "amb.csv"
    q.write_text("a;b|c\nx;y|z\n", encoding="utf-8")  # splits on two candidates: not sniffed
    assert load_corpus(q, text_column="a;b|c").texts == ("x;y|z",)


def test_nan_and_null_text_rejected(tmp_path: Path) -> None:
    import pandas as pd

    p = tmp_path / "nan.parquet"
    pd.DataFrame({"text": ["a", None, float("nan")]}).to_parquet(p)
    with pytest.raises(EmptyTextError) as e:
        load_corpus(p)
    assert e.value.rows == [2, 3]  # both None and NaN arrive as nulls (records 2 and 3)
    j = tmp_path / "nan.jsonl"
    j.write_text('{"text": "a"}\n{"text": null}\n{"text": NaN}\n', encoding="utf-8")
    with pytest.raises(EmptyTextError) as e:
        load_corpus(j)
    assert e.value.rows == [2, 3]  # lines 2 and 3


def test_non_utf8_reports_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_bytes(b"text,label\nfine,a\n\"multi\nline\",b\nbad \xff byte,c\n")
    with pytest.raises(DataEncodingError) as e:
        load_corpus(p)
    assert e.value.line == 5 and str(p) in str(e.value) and "0xff" in str(e.value)


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_empty_file(tmp_path: Path, fmt: str) -> None:
    p = tmp_path / f"empty.{fmt}"
    p.write_bytes(b"")
    with pytest.raises(DataFormatError, match="empty"):
        load_corpus(p)


def test_header_only_and_broken_rows(tmp_path: Path) -> None:
    p = tmp_path / "h.csv"
    p.write_text("text,label\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="no records"):
        load_corpus(p)
    p.write_text('text,label\n"a",x\n"b",y,extra\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=":3: 3 fields"):
        load_corpus(p)
    j = tmp_path / "b.jsonl"
    j.write_text('{"text": "a"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=":2: invalid JSON"):
        load_corpus(j)


def test_unknown_extension_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="extension"):
        load_corpus(tmp_path / "x.txt")
    with pytest.raises(DataError, match="no such file"):
        load_corpus(tmp_path / "missing.csv")


def test_writer_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure mid-write leaves the old file intact and no temporary file behind."""
    p = tmp_path / "out.jsonl"
    write_corpus(Corpus.from_texts(["old"]), p)
    import privtext.atomicio as rd

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(rd.os, "replace", boom)
    with pytest.raises(OSError):
        write_corpus(Corpus.from_texts(["new"]), p)
    assert json.loads(p.read_text())["text"] == "old"
    assert [f.name for f in tmp_path.iterdir()] == ["out.jsonl"]


def test_split_is_deterministic_disjoint_and_stratified() -> None:
    texts = [f"t{i}" for i in range(1000)]
    labels = ["a"] * 700 + ["b"] * 300
    c = Corpus.from_texts(texts, {"y": labels})
    a1, b1 = train_test_split(c, test_size=0.2, seed=7, stratify="y")
    a2, b2 = train_test_split(c, test_size=0.2, seed=7, stratify="y")
    assert a1.ids == a2.ids and b1.ids == b2.ids
    assert not set(a1.ids) & set(b1.ids) and len(a1) + len(b1) == 1000
    assert b1.labels["y"].count("b") == 60 and b1.labels["y"].count("a") == 140
    _, b3 = train_test_split(c, test_size=0.2, seed=8, stratify="y")
    assert b3.ids != b1.ids
    parts = split_corpus(c, [100, 200], seed=0)
    assert [len(p) for p in parts] == [100, 200]
    with pytest.raises(DataError):
        split_corpus(c, [0.8, 0.5], seed=0)


def test_real_csvs_with_quotes_and_newlines(shared_data: Path) -> None:
    p = shared_file("yelp", "dev.csv")
    c = load_corpus(p, label_columns=["label1", "label2"])
    assert len(c) == 5000
    assert sum('"' in t for t in c.texts) > 100  # quoted fields with embedded quotes
    assert len(set(c.labels["label1"])) == 10 and len(set(c.labels["label2"])) == 5
    assert all(v.startswith("Business Category: ") for v in c.labels["label1"])
    b = load_corpus(shared_file("banking77", "train.csv"), label_columns=["category"])
    assert len(b) == 10003 and sum("\n" in t for t in b.texts) == 10  # embedded newlines survive


def test_corpus_validation() -> None:
    with pytest.raises(DataError, match="duplicate ids"):
        Corpus(ids=("1", "1"), texts=("a", "b"))
    with pytest.raises(DataError, match="label column"):
        Corpus(ids=("1",), texts=("a",), labels={"y": ("p", "q")})
    c = Corpus.from_texts(["a", "b", "c"], {"y": ["1", "2", "3"]})
    s = c.subset(np.array([2, 0]))
    assert s.texts == ("c", "a") and s.labels["y"] == ("3", "1")


def test_atomic_dir_replaces_a_folder_whole_or_leaves_it_as_it_was(tmp_path: Path) -> None:
    """privtext.atomicio.atomic_dir (the vLLM learner's peft/ and merged/ folders): on success the new folder
    replaces the old one entirely; on an error the old folder stays and no temporary folder is left behind."""
    from privtext.atomicio import atomic_dir

    out = tmp_path / "peft"
    with atomic_dir(out) as tmp:
        (tmp / "a.json").write_text("1")
    assert sorted(p.name for p in out.iterdir()) == ["a.json"]
    with pytest.raises(RuntimeError):
        with atomic_dir(out) as tmp:
            (tmp / "b.json").write_text("2")
            raise RuntimeError("stopped half-way")
    assert sorted(p.name for p in out.iterdir()) == ["a.json"]
    with atomic_dir(out) as tmp:
        (tmp / "c.json").write_text("3")
    assert sorted(p.name for p in out.iterdir()) == ["c.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["peft"]
