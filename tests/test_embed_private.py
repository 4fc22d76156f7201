"""Private embeddings computed once (privtext.embed.private): the second run on the same private file embeds none
of it, releases exactly what the first released, keeps the cache private (mode 0700/0600, salted, outside the
run), and ``privtext cache clear`` deletes it. Also ``privtext profile``."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import privtext.embed as embed_pkg
from privtext.data import Corpus
from privtext.embed import build_embedder, embed_private, private_cache_dir
from privtext.embed.hashing import HashingEmbedder
from privtext.embed.private import clear_private_cache, private_cache_info
from privtext.embed.tiers import TieredEmbedder
from privtext.testing.tinyrun import tiny_run, toy_corpora

from .test_exact_votes import CountingHashing, NoisyEmbedder


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cache-home"
    monkeypatch.setenv("PRIVTEXT_CACHE_HOME", str(home))
    return home


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every text the hashing embedder embeds (its calls, counted)."""
    texts: list[str] = []
    orig = HashingEmbedder.embed

    def counting(self: HashingEmbedder, batch: list[str], *, show_progress: bool = False) -> np.ndarray:
        texts.extend(batch)
        return orig(self, batch, show_progress=show_progress)

    monkeypatch.setattr(HashingEmbedder, "embed", counting)
    yield texts


def _corpora(seed: int = 0) -> tuple[Corpus, Corpus]:
    priv, pool, _ = toy_corpora(rng=np.random.default_rng(seed), n_private=40, n_pool=120)
    return priv, pool


def _releases(run: Path) -> dict[str, bytes]:
    out = {"synthetic": (run / "synthetic.jsonl").read_bytes()}
    for p in sorted((run / "private" / "checkpoints").rglob("releases/*.npz")):
        with np.load(p) as z:
            out[str(p.relative_to(run))] = b"".join(z[k].tobytes() for k in sorted(z.files))
    return out


def _run(tmp: Path, name: str, priv: Corpus, pub: Corpus, *, voting: dict[str, object] | None = None,
         **embedder: object) -> Path:
    return tiny_run(tmp / name, private=priv, public=pub, iterations=2,
                    privacy={"mu": 1.0, "reproducible_noise": True}, voting=voting or {},
                    embedder={"backend": "hashing", "dim": 64, "cache": False, **embedder})


def test_a_second_run_embeds_no_private_text_and_releases_the_same(tmp_path: Path, cache_home: Path,
                                                                   seen: list[str]) -> None:
    priv, pub = _corpora()
    first = _run(tmp_path, "first", priv, pub)
    assert set(priv.texts) <= set(seen)  # the first run embedded its private file
    seen.clear()
    second = _run(tmp_path, "second", priv, pub)
    assert not set(priv.texts) & set(seen)  # 0 private embeddings on the second run
    assert seen  # the candidates were embedded as usual
    assert _releases(first) == _releases(second)
    m = json.loads((second / "private" / "metrics.json").read_text())["counters"]
    assert m["private_embedding_texts"] == len(priv) and m["private_embedding_cached"] == len(priv)
    assert m["private_embedding_embedded"] == 0


@pytest.mark.parametrize("method", ["secpe", "wasp"])
def test_every_method_reads_its_private_corpus_from_the_cache(method: str, tmp_path: Path, cache_home: Path,
                                                             seen: list[str]) -> None:
    """The private cache sits in the run skeleton (RunContext.embed_private), so each method has it without a
    line of its own: SecPE and WASP as Aug-PE above (DP-KPS embeds no private text)."""
    priv, pub = _corpora()
    kw = {"private": priv, "public": pub, "method": method, "iterations": 2,
          "embedder": {"backend": "hashing", "dim": 64, "cache": False}}
    tiny_run(tmp_path / "first", **kw)  # type: ignore[arg-type]
    assert set(priv.texts) <= set(seen)
    seen.clear()
    second = tiny_run(tmp_path / "second", **kw)  # type: ignore[arg-type]
    assert not set(priv.texts) & set(seen)
    m = json.loads((second / "private" / "metrics.json").read_text())["counters"]
    assert m["private_embedding_cached"] == len(priv) and m["private_embedding_embedded"] == 0


def test_the_count_catches_a_run_without_the_cache(tmp_path: Path, cache_home: Path, seen: list[str]) -> None:
    """Planted fault: with the cache off the second run embeds the private file again, and the count sees it."""
    priv, pub = _corpora(1)
    _run(tmp_path, "first", priv, pub, private_cache=False)
    seen.clear()
    _run(tmp_path, "second", priv, pub, private_cache=False)
    assert set(priv.texts) <= set(seen)
    assert not private_cache_dir().exists()


def test_the_cache_is_private_salted_and_outside_the_run(tmp_path: Path, cache_home: Path) -> None:
    priv, pub = _corpora(2)
    run = _run(tmp_path, "r", priv, pub)
    d = private_cache_dir()
    assert d == cache_home / "private" and not d.is_relative_to(run)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    for f in d.iterdir():
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600, f
    assert len((d / "salt").read_bytes()) == 32
    raw = (d / "embeddings.sqlite").read_bytes()
    assert not any(t.encode() in raw for t in priv.texts)  # keys are salted hashes, never text
    info = private_cache_info()
    assert info["models"] == {HashingEmbedder(dim=64).name: len(set(priv.texts))}


def test_same_text_same_vector_and_settings_never_share_rows(cache_home: Path, seen: list[str]) -> None:
    texts = ["the soup was cold", "great service", "the soup was cold", "parking is hard"]
    a = build_embedder({"backend": "hashing", "dim": 64, "cache": False})
    v1 = embed_private(a, texts)
    assert len(seen) == 3  # the duplicate once
    v2 = embed_private(build_embedder({"backend": "hashing", "dim": 64, "cache": False}), texts)
    assert len(seen) == 3 and np.array_equal(v1, v2) and np.array_equal(v1, a.embed(texts))
    other = build_embedder({"backend": "hashing", "dim": 64, "seed": 7, "cache": False})  # another setting
    v3 = embed_private(other, texts)
    assert len(seen) == 3 + 4 + 3 and not np.allclose(v1, v3)  # a.embed above: 4; the new setting: 3 (no row shared)


def test_a_tiered_embedder_caches_every_tier_of_private_texts(tmp_path: Path, cache_home: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """With exact votes, a re-decided record's reference vector goes to the private cache too: the second run
    computes neither the fast nor the reference vector of any private text; and its votes are the reference
    embedder's (the release equals a run with the reference embedder itself)."""
    priv, pub = _corpora(3)
    made: list[tuple[NoisyEmbedder, CountingHashing]] = []

    def tiered(cfg: object, *, cache_dir: object = None, cluster: object = None) -> TieredEmbedder:
        fast, ref = NoisyEmbedder(HashingEmbedder(dim=64), 0.05, "noisy"), CountingHashing(dim=64)
        made.append((fast, ref))
        return TieredEmbedder([fast, ref])

    monkeypatch.setenv("PRIVTEXT_CACHE_HOME", str(tmp_path / "other-cache"))  # its own cache: shares no vector
    plain = _run(tmp_path, "plain", priv, pub, voting={"center": "none"})
    monkeypatch.setenv("PRIVTEXT_CACHE_HOME", str(cache_home))
    monkeypatch.setattr(embed_pkg, "build_embedder", tiered)
    first = tiny_run(tmp_path / "t1", private=priv, public=pub, iterations=2, voting={"center": "none"},
                     privacy={"mu": 1.0, "reproducible_noise": True})
    fast, ref = made[-1]
    assert set(priv.texts) & set(ref.seen)  # some records were re-decided with reference vectors
    assert _releases(first) == _releases(plain)
    tiny_run(tmp_path / "t2", private=priv, public=pub, iterations=2, voting={"center": "none"},
             privacy={"mu": 1.0, "reproducible_noise": True})
    fast, ref = made[-1]
    assert not set(priv.texts) & {t for c in fast.calls for t in c}
    assert not set(priv.texts) & set(ref.seen)
    voting = json.loads((tmp_path / "t2" / "private" / "metrics.json").read_text())["stages"]["voting"]
    assert voting["exact_records"] > 0 and voting.get("exact_stage_a_ambiguous", 0) > 0


def test_cache_cli_info_and_clear(tmp_path: Path, cache_home: Path) -> None:
    from privtext.cli import _mount, app

    _mount()
    runner = CliRunner()
    embed_private(build_embedder({"backend": "hashing", "dim": 32}), ["a b", "c d"])
    res = runner.invoke(app, ["cache", "info", "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert info["exists"] and sum(info["models"].values()) == 2
    res = runner.invoke(app, ["cache", "clear"])
    assert res.exit_code == 0 and "deleted" in res.stdout and "2 vectors" in res.stdout
    assert not private_cache_dir().exists()
    res = runner.invoke(app, ["cache", "clear"])
    assert res.exit_code == 0 and "nothing to delete" in res.stdout
    assert clear_private_cache()["exists"] is False


def test_profile_shows_stage_times_and_throughput(tmp_path: Path, cache_home: Path) -> None:
    from privtext.cli import _mount, app

    _mount()
    priv, pub = _corpora(4)
    run = _run(tmp_path, "p", priv, pub)
    runner = CliRunner()
    res = runner.invoke(app, ["profile", str(run), "--json", "--iterations"])
    assert res.exit_code == 0, res.output
    prof = json.loads(res.stdout)
    stages = {r["stage"]: r for r in prof["stages"]}
    assert {"embedding_private", "generation", "embedding", "voting"} <= set(stages)
    emb = stages["embedding"]
    # seconds are shown to the millisecond: the rate agrees with them within that rounding
    assert emb["unit"] == "texts" and emb["per_second"] == pytest.approx(
        emb["items"] / emb["seconds"], rel=0.01 + 0.0005 / emb["seconds"])
    assert 0 < sum(r["share"] for r in prof["stages"]) <= 1.0001
    assert prof["counters"]["private_embedding_embedded"] == len(set(priv.texts))
    res = runner.invoke(app, ["profile", str(run), "--iterations"])
    assert res.exit_code == 0 and "embedding" in res.stdout and "iteration 1" in res.stdout
    res = runner.invoke(app, ["profile", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "no metrics" in res.output


def test_lookahead_votes_are_said_not_to_be_re_decided(tmp_path: Path, cache_home: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A lookahead vote sees mean embeddings, which carry no text: the run says once that those votes are the fast
    vectors' votes (not re-decided), instead of claiming exactness it does not have."""
    priv, pub = _corpora(5)
    monkeypatch.setattr(embed_pkg, "build_embedder", lambda cfg, **kw: TieredEmbedder(
        [NoisyEmbedder(HashingEmbedder(dim=64), 0.05, "noisy"), CountingHashing(dim=64)]))
    run = tiny_run(tmp_path / "la", private=priv, public=pub, iterations=2, evolution={"lookahead": 1})
    log = (run / "private" / "log.txt").read_text(encoding="utf-8")
    assert log.count("lookahead votes see mean embeddings, which are not re-decided") == 1
