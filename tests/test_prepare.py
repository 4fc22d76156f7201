"""One ``prepare()`` per run (issue 37): the pre-run check reads the corpora with the run's own streams and hands
them to ``MethodRun.execute``, so a ``privtext run`` reads its private and its public file once each; a resumed run
reads them once more (it has no pre-run check)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privtext.data import Corpus
from privtext.testing.tinyrun import tiny_run, toy_corpora

SCHEMA = {"category": ["food", "hotel"], "mood": ["good", "bad"]}
GENS = [{"backend": "scripted", "name": "a", "vocabulary": ["pizza", "room", "store", "great", "menu"]},
        {"backend": "scripted", "name": "b", "vocabulary": ["thing", "stuff", "went", "okay"]}]
#: one small run of each prompting method (privtext.testing.tinyrun.method_runs' set-ups)
RUNS: dict[str, dict[str, Any]] = {
    "augpe": {"iterations": 2, "privacy": {"epsilon": 4.0, "delta": 1e-5}},
    "secpe": {"iterations": 2},
    "wasp": {"num_samples": 60, "iterations": 3, "generators": GENS, "privacy": {"epsilon": 4.0, "delta": 1e-5},
             "wasp": {"q": 3, "in_context": 4}},
    "dpkps": {"num_samples": 16, "privacy": {"epsilon": 6.0}, "data": {"label_values": SCHEMA},
              "synthesis": {"label_distribution": {"kind": "uniform"}},
              "dpkps": {"vocab_size": 20, "length": 4, "n_features": 32}},
}


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every time a CSV file is parsed (privtext.data.io's one CSV reader, whoever calls it), by file name."""
    from privtext.data import io

    seen: Counter[str] = Counter()
    real = io._read_delimited

    def counting(path: Path, delimiter: str) -> Any:
        seen[Path(path).name] += 1
        return real(path, delimiter)

    monkeypatch.setattr(io, "_read_delimited", counting)
    return seen


def _corpora(method: str) -> tuple[Corpus, Corpus]:
    private, pool, _ = toy_corpora(rng=np.random.default_rng(0))
    if method == "dpkps":  # unlabelled public text with a declared schema
        pool = Corpus(pool.ids, pool.texts, {}, name="pool")
    return private, pool


@pytest.mark.parametrize("method", sorted(RUNS))
def test_a_run_reads_its_private_and_public_file_once(method: str, tmp_path: Path, reads: Counter[str]) -> None:
    private, public = _corpora(method)
    run = tiny_run(tmp_path / "run", private=private, public=public, method=method, **RUNS[method])
    assert (run / "synthetic.jsonl").exists()
    assert reads == Counter({"run.private.csv": 1, "run.public.csv": 1}), reads


def test_with_party_files_each_party_file_is_read_once_and_data_private_never(tmp_path: Path,
                                                                              reads: Counter[str]) -> None:
    """``parties.files``: the parties' files are the private corpus (HoldsParties.prepare), read once each with the
    public file; ``data.private`` is not read at all."""
    from privtext.data import write_corpus

    private, public = _corpora("augpe")
    files = []
    for k, ix in enumerate(np.array_split(np.arange(len(private)), 3)):
        f = tmp_path / f"party{k}.csv"
        write_corpus(private.subset(ix), f)
        files.append(str(f))
    run = tiny_run(tmp_path / "run", private=private, public=public, iterations=2,
                   privacy={"epsilon": 4.0, "delta": 1e-5}, augpe={"parties": {"files": files, "aggregation": "plain"}})
    assert json.loads((run / "privacy.json").read_text())["parameters"]["parties"]["from_files"] is True
    assert reads == Counter({"party0.csv": 1, "party1.csv": 1, "party2.csv": 1, "run.public.csv": 1}), reads


def test_a_resumed_run_reads_them_once_more(tmp_path: Path, reads: Counter[str]) -> None:
    from privtext.rundir import RunDir
    from privtext.runner import resume_run

    private, public = _corpora("augpe")
    run = tiny_run(tmp_path / "run", private=private, public=public, **RUNS["augpe"])
    RunDir(run).privacy.unlink()  # as if the process had died before the statement
    RunDir(run).synthetic.unlink()
    resume_run(run)
    assert reads == Counter({"run.private.csv": 2, "run.public.csv": 2}), reads


def test_the_max_private_sample_is_drawn_once_with_the_runs_own_stream(tmp_path: Path) -> None:
    """The pre-run check's sample is the run's: with reproducible noise it is the one the privacy stream
    ``max_private`` of the seed draws, and the run counts exactly that many records."""
    from privtext.rng import noise_rng
    from privtext.runner import load_run_config, preflight, resolve_config

    private, public = _corpora("augpe")
    privacy = {"epsilon": 4.0, "delta": 1e-5, "reproducible_noise": True}
    run = tiny_run(tmp_path / "run", private=private, public=public, seed=3, data={"max_private": 25},
                   **{**RUNS["augpe"], "privacy": privacy})
    _, prepared = preflight(*resolve_config(load_run_config(run)))
    expect = np.sort(noise_rng(3, "max_private", reproducible=True).choice(len(private), 25, replace=False))
    assert prepared.inputs.subsampled
    assert list(prepared.inputs.private.texts) == [private.texts[i] for i in expect]
    diag = json.loads((run / "private" / "diagnostics.json").read_text())
    assert diag["records"]["private"] == 25
