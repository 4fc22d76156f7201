"""Corpora from Hugging Face datasets (``hf:name[:config][:split]``, local cache / local folders only)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from privtext.data import load_corpus
from privtext.errors import DataFormatError, MissingColumnError, MissingDependencyError


class _FakeDataset(list):
    def __init__(self, rows: list[dict]):
        super().__init__(rows)
        self.column_names = list(rows[0]) if rows else []


def test_spec_parsing_and_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def load_dataset(name, config=None, split=None):
        calls.append((name, config, split))
        return _FakeDataset([{"text": "good food", "stars": 5}, {"text": "cold soup", "stars": 1}])

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    c = load_corpus("hf:yelp_review_full::test", label_columns=["stars"])
    assert calls == [("yelp_review_full", None, "test")]
    assert c.texts == ("good food", "cold soup") and c.labels["stars"] == ("5", "1")
    load_corpus("hf:glue:sst2")
    assert calls[-1] == ("glue", "sst2", "train")
    with pytest.raises(MissingColumnError, match="'label'"):
        load_corpus("hf:x", label_columns=["label"])
    with pytest.raises(DataFormatError, match="hf:NAME"):
        load_corpus("hf:")


def test_offline_failure_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def load_dataset(*a, **k):
        raise ConnectionError("offline and not in the cache")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    with pytest.raises(DataFormatError, match="local Hugging Face cache"):
        load_corpus("hf:some/dataset")


def test_missing_package_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    with pytest.raises(MissingDependencyError, match=r"privtext\[hf\]"):
        load_corpus("hf:some/dataset")


def test_real_datasets_library_on_a_local_folder(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    folder = tmp_path / "ds"
    folder.mkdir()
    (folder / "train.csv").write_text('text,label\n"line one, with comma",a\nline two,b\n', encoding="utf-8")
    c = load_corpus(f"hf:{folder}", label_columns=["label"])
    assert c.texts == ("line one, with comma", "line two") and c.labels["label"] == ("a", "b")
