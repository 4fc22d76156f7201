"""Every configuration check runs before anything is written (issue 35, item 4): each refusal below leaves no run
folder (and no half-made one), and is raised before ``RunDir.create`` is called; a configuration error that only a
method can find mid-run removes the folder it made, so the fixed configuration runs without ``--force``. With
``data.label_values`` and unlabelled public text, the default label distribution (``auto``) now runs and says what
it picked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from privtext.config import config_from_dict
from privtext.data import Corpus, write_corpus
from privtext.errors import ConfigError, DataError, MissingColumnError, PrivtextError
from privtext.rundir import RunDir
from privtext.runner import run_config
from privtext.testing.tinyrun import toy_corpora

SCHEMA = {"category": ["food", "hotel"], "mood": ["good", "bad"]}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=40, n_pool=120)
    write_corpus(priv, tmp_path / "private.csv")
    write_corpus(pub, tmp_path / "public.csv")
    unlabelled = Corpus(pub.ids, pub.texts, {}, name="pub")
    write_corpus(unlabelled, tmp_path / "public-unlabelled.csv")
    write_corpus(Corpus(pub.ids, pub.texts, {}, name="pub"), tmp_path / "public-body.csv", text_column="body")
    return {"private": tmp_path / "private.csv", "public": tmp_path / "public.csv",
            "unlabelled": tmp_path / "public-unlabelled.csv", "body": tmp_path / "public-body.csv"}


def _raw(tmp: Path, files: dict[str, Path], **kw: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "method": "augpe", "seed": 0,
        "data": {"private": str(files["private"]), "public": str(files["public"]),
                 "label_columns": ["category", "mood"]},
        "generator": {"backend": "scripted"}, "embedder": {"backend": "hashing", "dim": 32, "cache": False},
        "privacy": {"epsilon": 4.0, "delta": 1e-5},
        "evolution": {"num_samples": 8, "iterations": 1, "variations": 2},
        "output": str(tmp / "run"),
    }
    for k, v in kw.items():
        raw[k] = {**raw[k], **v} if isinstance(v, dict) and isinstance(raw.get(k), dict) and k != "privacy" else v
    return raw


UNLABELLED = {"data": {"public": "unlabelled", "label_values": SCHEMA}}

#: (case, overrides, error, words in the message): every configuration check a user can hit at the start
CASES: list[tuple[str, dict[str, Any], type, str]] = [
    ("label_values_without_label_columns",
     {"data": {"public": "unlabelled", "label_columns": [], "label_values": {"category": ["food", "hotel"]}}},
     ConfigError, "add data.label_columns: [category]"),
    ("label_column_without_values",
     {"data": {"public": "unlabelled", "label_values": {"category": ["food", "hotel"]}}},
     ConfigError, "data.label_values gives no values for it"),
    ("public_kind_without_public_labels",
     {**UNLABELLED, "evolution": {"label_distribution": {"kind": "public"}}},
     ConfigError, "kind=public needs labelled public text"),
    ("given_weights_missing_a_group",
     {**UNLABELLED, "evolution": {"label_distribution": {"kind": "given", "weights": {"food|good": 1.0}}}},
     ConfigError, "has no weight for"),
    ("undeclared_private_label",
     {"data": {"public": "unlabelled", "label_values": {"category": ["food"], "mood": ["good", "bad"]}}},
     DataError, "not in data.label_values"),
    ("public_text_column_missing", {"data": {"public": "body"}}, MissingColumnError, "data.public_text_column"),
    ("public_is_the_private_file", {"data": {"public": "private"}}, DataError, "name the same file"),
    ("budget_too_large", {"privacy": {"epsilon": 1e9, "delta": 1e-5}}, ConfigError, "privacy.allow_weak"),
    ("delta_too_large", {"privacy": {"epsilon": 4.0, "delta": 0.05}}, ConfigError, "too large for this data"),
    ("unknown_method_option", {"augpe": {"no_such_option": 1}}, ConfigError, "no_such_option"),
    ("wasp_dp_labels", {"method": "wasp", "evolution": {"label_distribution": {"kind": "dp"}}},
     ConfigError, "not dp"),
]


@pytest.mark.parametrize("case,kw,error,needle", CASES, ids=[c[0] for c in CASES])
def test_each_configuration_check_refuses_before_the_run_folder_exists(
        tmp_path: Path, files: dict[str, Path], case: str, kw: dict[str, Any], error: type, needle: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    kw = json.loads(json.dumps(kw))
    if "data" in kw and "public" in kw["data"]:
        kw["data"]["public"] = str(files[kw["data"]["public"]])
    raw = _raw(tmp_path, files, **kw)
    created: list[Path] = []
    real_create = RunDir.create

    def create(self: RunDir, **a: Any) -> RunDir:
        created.append(self.root)
        return real_create(self, **a)

    monkeypatch.setattr(RunDir, "create", create)
    with pytest.raises(PrivtextError) as e:
        run_config(config_from_dict(raw))
    assert isinstance(e.value, error) and needle in str(e.value), str(e.value)
    assert created == []  # refused in the pre-flight, not by the clean-up after a start
    assert not (tmp_path / "run").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".run.starting-")]


def test_label_values_with_unlabelled_public_text_run_on_the_default_and_say_what_was_picked(
        tmp_path: Path, files: dict[str, Path]) -> None:
    """The README's set-up: label values declared, public text without labels, no label_distribution given.
    Before: "kind=public needs labelled public text" after the folder was made, and the rerun demanded --force."""
    raw = _raw(tmp_path, files, data={"public": str(files["unlabelled"]), "label_values": SCHEMA})
    root = run_config(config_from_dict(raw))
    full = yaml.safe_load((root / "private" / "config.yaml").read_text())
    ld = full["synthesis"]["label_distribution"]
    assert ld["kind"] == "uniform" and "no label columns" in ld["picked"]
    shared = yaml.safe_load((root / "config.yaml").read_text())
    assert shared["synthesis"]["label_distribution"]["kind"] == "uniform"
    st = json.loads((root / "privacy.json").read_text())
    assert st["parameters"]["label_distribution"] == "uniform"
    assert "no label columns" in st["parameters"]["label_distribution_picked"]
    assert "synthesis.label_distribution: uniform (kind auto" in (root / "private" / "log.txt").read_text()
    syn = [json.loads(x) for x in (root / "synthetic.jsonl").read_text().splitlines()]
    counts: dict[tuple[str, str], int] = {}
    for r in syn:
        counts[(r["category"], r["mood"])] = counts.get((r["category"], r["mood"]), 0) + 1
    assert sorted(counts.values()) == [2, 2, 2, 2]  # equal shares over the 4 declared combinations


def test_labelled_public_text_keeps_the_public_distribution_by_default(tmp_path: Path,
                                                                       files: dict[str, Path]) -> None:
    root = run_config(config_from_dict(_raw(tmp_path, files)))
    st = json.loads((root / "privacy.json").read_text())
    assert st["parameters"]["label_distribution"] == "public"
    assert "has the label columns" in st["parameters"]["label_distribution_picked"]
    # a run without labels states no label distribution pick (there is nothing to pick)
    raw = _raw(tmp_path, files, data={"label_columns": []}, output=str(tmp_path / "plain"))
    st = json.loads((run_config(config_from_dict(raw)) / "privacy.json").read_text())
    assert "label_distribution_picked" not in st["parameters"]


def test_a_configuration_error_found_mid_run_removes_the_folder_so_the_fix_needs_no_force(
        tmp_path: Path, files: dict[str, Path]) -> None:
    """augpe.vocabulary_prompts without data.public is found where the vocabulary is released (after the run
    folder exists): the folder this call made is removed again; an existing empty folder is kept, emptied."""
    raw = _raw(tmp_path, files, data={"public": None, "label_columns": []},
               augpe={"vocabulary_prompts": True})
    with pytest.raises(ConfigError, match=r"vocabulary_prompts needs data\.public"):
        run_config(config_from_dict(raw))
    assert not (tmp_path / "run").exists()
    mount = tmp_path / "mount"
    mount.mkdir()
    with pytest.raises(ConfigError, match=r"vocabulary_prompts needs data\.public"):
        run_config(config_from_dict({**raw, "output": str(mount)}))
    assert mount.is_dir() and list(mount.iterdir()) == []
    fixed = _raw(tmp_path, files, data={"label_columns": []}, augpe={"vocabulary_prompts": True})
    assert (run_config(config_from_dict(fixed)) / "synthetic.jsonl").exists()  # no --force needed


def test_the_missing_public_text_column_names_the_setting_that_fixes_it(tmp_path: Path,
                                                                        files: dict[str, Path]) -> None:
    raw = _raw(tmp_path, files, data={"public": str(files["body"]), "label_values": SCHEMA})
    with pytest.raises(MissingColumnError, match=r"missing column\(s\) 'text'.*set data\.public_text_column"):
        run_config(config_from_dict(raw))
    raw["data"]["public_text_column"] = "body"
    assert (run_config(config_from_dict(raw)) / "synthetic.jsonl").exists()
    # public text without the label columns and no declared schema: the hint is data.label_values
    raw = _raw(tmp_path, files, data={"public": str(files["unlabelled"])}, output=str(tmp_path / "r2"))
    with pytest.raises(MissingColumnError, match=r"declare the label values in data\.label_values"):
        run_config(config_from_dict(raw))


def test_a_few_private_records_in_the_public_corpus_are_public_not_a_refusal(tmp_path: Path,
                                                                             files: dict[str, Path]) -> None:
    """Issue 36: a public text equal to a private record is public by the statement's assumption; one such
    record does not stop the run (a data-dependent abort says one bit about membership). A public corpus that
    holds most of the private records is refused as a mistake, before anything is written."""
    import pandas as pd

    priv = pd.read_csv(files["private"])
    pub = pd.read_csv(files["public"])
    one = pd.concat([pub, priv.iloc[:1]], ignore_index=True)
    one.to_csv(tmp_path / "public-one.csv", index=False)
    most = pd.concat([pub, priv.iloc[:30]], ignore_index=True)
    most.to_csv(tmp_path / "public-most.csv", index=False)
    raw = _raw(tmp_path, files, data={"public": str(tmp_path / "public-most.csv")})
    with pytest.raises(DataError, match="holds more than half of the private records") as e:
        run_config(config_from_dict(raw))
    words = str(e.value).replace(str(tmp_path), "")  # the path may hold any digits (pytest-306)
    assert "30" not in words and "40" not in words  # no private count
    assert not (tmp_path / "run").exists()
    from privtext.runner import preflight, resolve_config

    cfg, cls = resolve_config(config_from_dict(_raw(tmp_path, files, data={"public": str(tmp_path / "public-one.csv")})))
    preflight(cfg, cls)  # passes: the record is public by assumption (the run's generator is the lead's to check)
