"""The Python API: run with overrides and callbacks, the Run object, resume, load — and the README's example."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import privtext
from privtext.data import write_corpus
from privtext.errors import ConfigError
from privtext.testing.tinyrun import toy_corpora

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cfg(tmp_path: Path) -> dict:
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(3), n_private=40, n_pool=120)
    write_corpus(priv, tmp_path / "private.csv")
    write_corpus(pub, tmp_path / "public.csv")
    return {
        "method": "augpe", "seed": 0,
        "data": {"private": str(tmp_path / "private.csv"), "public": str(tmp_path / "public.csv"),
                 "label_columns": ["category", "mood"]},
        "generator": {"backend": "scripted"}, "embedder": {"backend": "hashing", "dim": 32, "cache": False},
        "privacy": {"mu": 1.0},
        "evolution": {"num_samples": 12, "iterations": 3, "variations": 2},
        "output": str(tmp_path / "run"),
    }


def test_run_with_overrides_and_callbacks(cfg: dict, tmp_path: Path) -> None:
    seen = []
    run = privtext.run(cfg, evolution__iterations=2, privacy={"epsilon": 4.0, "delta": 1e-5},
                       callbacks=[lambda r: seen.append((r.iteration, len(r.selected), r.histogram.shape))])
    assert run.config.evolution.iterations == 2 and run.config.privacy.epsilon == 4.0
    assert [s[0] for s in seen] == [0, 1] and all(n == 12 for _, n, _ in seen)
    df = run.synthetic
    assert list(df.columns[:2]) == ["id", "text"] and len(df) == 12 and set(df["category"]) <= {"food", "hotel"}
    assert run.statement.headline.startswith("(") and run.statement.private
    assert [r.key for r in run.releases] == ["votes/iter_000", "votes/iter_001"]
    assert privtext.load(run.path).synthetic.equals(df)
    with pytest.raises(ConfigError, match="section__key"):
        privtext.run(cfg, evolution__=3)


def test_to_dataset(cfg: dict) -> None:
    pytest.importorskip("datasets")
    ds = privtext.run(cfg).to_dataset()
    assert ds.num_rows == 12 and "text" in ds.column_names


def test_readme_python_example_runs(cfg: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's Python block, executed as written (its config path swapped for a tiny offline config)."""
    import yaml

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"## Python\n.*?```python\n(.*?)```", text, re.S)
    assert m, "README has a '## Python' section with a python block"
    (tmp_path / "yelp.yaml").write_text(yaml.safe_dump(cfg))
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(compile(m.group(1), "README.md", "exec"), ns)
    assert "run" in ns and len(ns["run"].synthetic) == 12
