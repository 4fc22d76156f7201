"""The plain federated aggregation writes no party's clean histogram to any file (issue 21, mutant "the plain
federated aggregation writes clean per-party histograms to disk").

A real tiny Aug-PE run with three parties summed in one process (``aggregation: plain``), working directory and
``TMPDIR`` in empty folders. Afterwards each party's exact (noise-free) vote histogram of every release is
recomputed from the checkpoints, and every file the run left — the run directory (``private/`` included), the
working directory, the temporary folder — is read: no array in an ``.npz``/``.npy`` file, no list of numbers in
a JSON file, and no line of numbers in a text file equals one of them. Planted fault (checked by hand): saving
each party's histogram from ``plain_sum`` with ``np.save`` into the temporary folder, or into the working
directory, makes this test fail.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privtext.federated import dirichlet_split
from privtext.federated.topq import PartyVotes
from privtext.federated.votes import party_nn_votes
from privtext.rundir import RunDir
from privtext.testing.tinyrun import run_private_side, tiny_run, toy_corpora


def _party_histograms(run: Path) -> list[np.ndarray]:
    rd, cfg, pe, pg = run_private_side(run)
    pt = cfg["augpe"]["parties"]
    split = dirichlet_split([str(g) for g in pg], pt["count"], alpha=pt.get("alpha", 1.0), seed=cfg["seed"])
    out = []
    for line in rd.ledger.read_text().splitlines():
        rec = json.loads(line)
        pop, vote_emb = rd.iteration(rec["iteration"]).load_population()
        ve = pop.emb if vote_emb is None else vote_emb
        for ix in split:
            h = party_nn_votes(PartyVotes(pe[ix], pg[ix]), candidate_emb=ve, candidate_groups=pop.group,
                               center=ve.mean(axis=0))
            if np.count_nonzero(h) >= 2:  # an empty or one-vote histogram says nothing; zeros are everywhere
                out.append(np.asarray(h, dtype=np.float64))
    return out


def _numbers_in(path: Path) -> Iterator[np.ndarray]:
    """Every numeric vector a file holds (arrays, their rows; JSON number lists; whitespace/comma lines)."""
    suffix = path.suffix
    if suffix in (".npz", ".npy"):
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.ndarray):  # .npy
            arrays = [loaded]
        else:
            with loaded as z:
                arrays = [z[k] for k in z.files]
        for a in arrays:
            if a.dtype.kind in "biuf":
                yield a.ravel()
                if a.ndim == 2:
                    yield from a
        return
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return
    docs: list[Any] = []
    try:
        docs.append(json.loads(text))
    except ValueError:
        for line in text.splitlines():
            try:
                docs.append(json.loads(line))
            except ValueError:
                parts = line.replace(",", " ").split()
                try:
                    yield np.asarray([float(x) for x in parts])
                except ValueError:
                    continue
    stack = docs
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, list):
            if x and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in x):
                yield np.asarray(x, dtype=np.float64)
            else:
                stack.extend(x)


def _leaks(folders: list[Path], hists: list[np.ndarray]) -> list[str]:
    found = []
    for folder in folders:
        for f in sorted(p for p in folder.rglob("*") if p.is_file()):
            for v in _numbers_in(f):
                for h in hists:
                    if v.shape == h.shape and np.allclose(v, h, rtol=0, atol=1e-9):
                        found.append(str(f))
    return sorted(set(found))


def test_no_file_holds_a_party_histogram_after_a_plain_federated_run(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=90, n_pool=200,
                               topics=("food", "hotel", "shop"))
    run = tiny_run(tmp_path / "runs" / "plain", private=priv, public=pub, method="augpe", num_samples=40,
                   iterations=3, privacy={"epsilon": 4.0, "delta": 1e-5},
                   augpe={"parties": {"count": 3, "aggregation": "plain"}})
    assert RunDir(run).synthetic.exists()
    hists = _party_histograms(run)
    assert len(hists) >= 6  # 3 releases × 3 parties, the trivial ones left out
    # the check can see a histogram: one planted in a file of the run is found
    probe = tmp_path / "probe"
    probe.mkdir()
    np.savez(probe / "x.npz", votes=hists[0])
    (probe / "y.json").write_text(json.dumps({"h": hists[-1].tolist()}))
    assert _leaks([probe], hists) == [str(probe / "x.npz"), str(probe / "y.json")]
    assert _leaks([run, work, tmp], hists) == []
