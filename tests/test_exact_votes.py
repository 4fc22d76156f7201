"""Exact votes from fast embeddings (privtext.embed.tiers, privtext.search.exact_votes): the votes equal the
reference vectors' votes on every record, each record's vote depends on that record alone, and a bound that is too
small is caught (planted faults). The last tests do it on real text with MiniLM: ``runtime: auto``'s OpenVINO tiers
(fp32; bf16 on a bf16 CPU only) re-decided with torch fp32."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from privtext.embed.base import l2_normalize
from privtext.embed.hashing import HashingEmbedder
from privtext.embed.tiers import (
    RowSource,
    TieredEmbedder,
    TieredVectors,
    attach_texts,
    row_source,
    with_source,
)
from privtext.errors import ConfigError
from privtext.mechanisms.voting import center_rows, nearest_votes
from privtext.search import exact_votes, nearest
from privtext.search.exact_votes import calibrate, exact_nearest, vote_space

from .conftest import needs_bf16, shared_file


class NoisyEmbedder:
    """A fake fast tier: ``inner``'s vectors moved by a fixed error of norm ``scale`` per text (a function of the
    text alone, like a real low-precision model's), renormalised. A real Embedder: texts in, unit rows out."""

    def __init__(self, inner: HashingEmbedder, scale: float, name: str):
        self.inner, self.scale, self.name, self.dim = inner, scale, name, inner.dim
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str], *, show_progress: bool = False) -> np.ndarray:
        self.calls.append(list(texts))
        v = self.inner.embed(texts).astype(np.float64)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(f"{self.name}|{t}".encode(), digest_size=8).digest(), "little")
            e = np.random.default_rng(seed).normal(size=self.dim)
            v[i] += self.scale * e / np.linalg.norm(e)
        return l2_normalize(v)


class CountingHashing(HashingEmbedder):
    """The hashing embedder, recording every text it embeds (the reference tier's work)."""

    def __init__(self, **kw: object):
        super().__init__(**kw)  # type: ignore[arg-type]
        self.seen: list[str] = []

    def embed(self, texts: list[str], *, show_progress: bool = False) -> np.ndarray:  # type: ignore[override]
        self.seen.extend(texts)
        return super().embed(texts)


def _texts(rng: np.random.Generator, n: int, vocab: int = 50, words: int = 10) -> list[str]:
    pool = [f"w{i}" for i in range(vocab)]
    return [" ".join(rng.choice(pool, words)) for _ in range(n)]


def _tiers(scale: float = 0.03, mid: bool = True) -> tuple[TieredEmbedder, CountingHashing]:
    ref = CountingHashing(dim=48)
    fast = NoisyEmbedder(HashingEmbedder(dim=48), scale, "noisy-fast")
    tiers = [fast, NoisyEmbedder(HashingEmbedder(dim=48), scale / 1000, "noisy-mid")] if mid else [fast]
    return TieredEmbedder([*tiers, ref]), ref


def _reference_votes(ref: HashingEmbedder, private: list[str], cands: list[str], metric: str,
                     center: np.ndarray | None) -> np.ndarray:
    p, c = ref.embed(private), ref.embed(cands)
    if center is not None:
        p, c = center_rows(p, center), center_rows(c, center)
    return nearest(p, c, metric=metric)  # type: ignore[arg-type]


@pytest.mark.parametrize("metric", ["l2", "cosine"])
@pytest.mark.parametrize("centred", [False, True])
@pytest.mark.parametrize("mid", [False, True])
def test_votes_equal_the_reference_votes_on_every_record(metric: str, centred: bool, mid: bool, any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    private, cands = _texts(rng, 400), _texts(rng, 300)
    cands[10:13] = [cands[4]] * 3  # duplicate candidates: a tie the reference breaks by the lowest index
    private[:3] = [cands[4]] * 3
    tiers, ref = _tiers(mid=mid)
    p, c = tiers.embed(private), tiers.embed(cands)
    center = np.asarray(c).mean(axis=0) if centred else None
    fast_votes = nearest(*((center_rows(np.asarray(p), center), center_rows(np.asarray(c), center))
                           if centred else (np.asarray(p), np.asarray(c))), metric=metric)  # type: ignore[arg-type]
    want = _reference_votes(HashingEmbedder(dim=48), private, cands, metric, center)
    got = exact_nearest(p, c, metric=metric, center=center)  # type: ignore[arg-type]
    assert (fast_votes != want).sum() > 5  # the fast vectors alone would vote differently
    assert np.array_equal(got, want)
    assert (got[:3] == 4).all()
    # only the re-decided records and their contenders (and the calibration rows) were embedded at the reference
    assert 0 < len(set(ref.seen)) < len(set(private)) + len(set(cands))


def test_a_bound_too_small_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted faults: the calibrated bound without its safety factor and floor (or zero) lets fast votes through
    that the reference decides otherwise — the equality test above would fail."""
    rng = np.random.default_rng(5)
    private, cands = _texts(rng, 400), _texts(rng, 300)
    want = _reference_votes(HashingEmbedder(dim=48), private, cands, "l2", None)
    for safety, floor in [(0.0, 0.0), (0.25, 0.0)]:
        monkeypatch.setattr(exact_votes, "SAFETY", safety)
        monkeypatch.setattr(exact_votes, "FLOOR", floor)
        tiers, _ = _tiers(mid=False)
        p, c = tiers.embed(private), tiers.embed(cands)
        bounds = calibrate(row_source(c), np.asarray(c), None, "l2", safety=safety)
        got = exact_votes.refine_group(row_source(p), np.arange(400), np.asarray(p), row_source(c), np.arange(300),
                                       np.asarray(c), bounds, None, "l2")
        assert (got != want).sum() > 0, (safety, floor)


def test_the_bound_is_calibrated_on_candidates_only() -> None:
    """E reads candidate rows only (public): the private side never enters it, whatever the records are."""
    rng = np.random.default_rng(1)
    cands = _texts(rng, 200)
    tiers, ref = _tiers(mid=False)
    c = tiers.embed(cands)
    b1 = calibrate(row_source(c), np.asarray(c), None, "l2")
    assert set(ref.seen) <= set(cands) and b1.rows == 64 and not tiers.calibration_floor_governed
    assert 0 < b1.window[0, 0] < 0.2 and b1.window[-1, -1] == 0
    # the window is SAFETY × the largest difference error of the calibration triples (+ FLOOR)
    assert b1.window[0, 0] == pytest.approx(exact_votes.SAFETY * b1.raw[0, 0] + exact_votes.FLOOR)
    # later votes add 16 new candidates (evenly spaced among those not calibrated yet) and keep the earlier ones
    more = tiers.embed(cands[100:] + _texts(rng, 100))
    b2 = calibrate(row_source(more), np.asarray(more), None, "l2")
    assert b2.rows == 64 + 16 and len(tiers.calibration) == 80 and set(ref.seen) <= set(cands) | set(more.source.texts)
    fresh, _ = _tiers(mid=False)
    few = fresh.embed(cands[:5])
    tiny = calibrate(row_source(few), np.asarray(few), None, "l2")  # too few rows: trust no bound
    assert tiny.rows == 0 and np.isinf(tiny.window[0, 0])


def test_a_float_rounding_tier_calibrates_on_few_texts() -> None:
    """A fast tier within float rounding of the reference (OpenVINO fp32's case) gives a window governed by FLOOR:
    16 calibration texts at the first vote, 4 more per later vote — and the votes are still the reference's."""
    rng = np.random.default_rng(8)
    private, cands = _texts(rng, 200), _texts(rng, 200)
    tiers = TieredEmbedder([NoisyEmbedder(HashingEmbedder(dim=48), 1e-7, "rounding"), CountingHashing(dim=48)])
    p, c = tiers.embed(private), tiers.embed(cands)
    b = calibrate(row_source(c), np.asarray(c), None, "l2")
    assert b.rows == exact_votes.CALIBRATION_FIRST and tiers.calibration_floor_governed
    assert b.window[0, 0] == pytest.approx(exact_votes.FLOOR, rel=0.3)
    assert calibrate(row_source(c), np.asarray(c), None, "l2").rows == 16 + 4
    assert np.array_equal(exact_nearest(p, c), _reference_votes(HashingEmbedder(dim=48), private, cands, "l2", None))


def test_counts_with_label_groups_equal_the_reference_counts() -> None:
    rng = np.random.default_rng(2)
    private, cands = _texts(rng, 300), _texts(rng, 240)
    pg, cg = rng.integers(0, 3, size=300), rng.integers(0, 3, size=240)
    cg[:3] = [0, 1, 2]
    tiers, _ = _tiers()
    p, c = tiers.embed(private), tiers.embed(cands)
    center = np.asarray(c).mean(axis=0)
    got, n_voting = nearest_votes(p, c, private_groups=pg, candidate_groups=cg, center=center)
    h = HashingEmbedder(dim=48)
    want, n_want = nearest_votes(h.embed(private), h.embed(cands), private_groups=pg, candidate_groups=cg,
                                 center=center)
    assert np.array_equal(got, want) and n_voting == n_want == 300
    assert tiers.counters.values["exact_records"] == 300


def test_each_record_changes_one_bin_by_one() -> None:
    """Δ = 1 with re-decisions: removing any one record changes the counts by exactly one vote in one bin (the
    other records' votes do not move), checked for every record of a sample."""
    rng = np.random.default_rng(3)
    private, cands = _texts(rng, 120), _texts(rng, 150)
    tiers, _ = _tiers(mid=False)
    c = tiers.embed(cands)
    full, _ = nearest_votes(tiers.embed(private), c)
    for i in range(0, 120, 7):
        rest = private[:i] + private[i + 1:]
        counts, _ = nearest_votes(tiers.embed(rest), c)
        diff = full - counts
        assert diff.sum() == 1 and (diff >= 0).all() and np.count_nonzero(diff) == 1


def test_a_source_is_never_carried_by_a_derived_array() -> None:
    tiers, _ = _tiers(mid=False)
    v = tiers.embed(["a b c", "d e f", "g h i"])
    assert isinstance(v, TieredVectors) and row_source(v) is not None and row_source(v).texts[1] == "d e f"
    # the voting layer reads the source duck-typed (mechanisms import no embedder): it sees the same one
    assert exact_votes.row_source(v) is row_source(v)
    for derived in (v[1:], v[[0, 2]], v * 1.0, v.mean(axis=0), np.asarray(v), np.concatenate([v, v]), v.copy()):
        assert row_source(derived) is None and exact_votes.row_source(derived) is None
    assert exact_votes.row_source([[0.0]]) is None and exact_votes.row_source(np.zeros((1, 48))) is None
    with pytest.raises(ConfigError, match="2 vectors for 3 texts"):
        with_source(np.zeros((2, 48)), RowSource(tiers, ("a", "b", "c")))
    plain = np.asarray(v)
    again = attach_texts(plain, tiers, ["a b c", "d e f", "g h i"])
    assert row_source(again).texts == ("a b c", "d e f", "g h i")
    assert attach_texts(plain, HashingEmbedder(dim=48), ["x"] * 3) is plain  # not tiered: unchanged


def test_one_side_without_a_source_is_voted_as_given(caplog: pytest.LogCaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from privtext.mechanisms import voting

    monkeypatch.setattr(voting, "_WARNED", set())
    rng = np.random.default_rng(4)
    private, cands = _texts(rng, 50), _texts(rng, 40)
    tiers, ref = _tiers(mid=False)
    p, c = tiers.embed(private), tiers.embed(cands)
    with caplog.at_level("WARNING", logger="privtext.embed"):
        got, _ = nearest_votes(np.asarray(p), c)
    assert caplog.text.count("private embeddings carry no fast-tier source") == 1
    assert np.array_equal(got, nearest_votes(np.asarray(p), np.asarray(c))[0]) and not ref.seen
    nearest_votes(np.asarray(p), c)
    assert caplog.text.count("private embeddings carry no fast-tier source") == 1  # said once


def test_tiers_must_differ_and_agree_on_the_dimension() -> None:
    h = HashingEmbedder(dim=48)
    with pytest.raises(ConfigError, match="must differ"):
        TieredEmbedder([h, HashingEmbedder(dim=48)])
    with pytest.raises(ConfigError, match="one dimension"):
        TieredEmbedder([NoisyEmbedder(h, 0.01, "n"), HashingEmbedder(dim=32)])
    with pytest.raises(ConfigError, match="a fast tier and a reference"):
        TieredEmbedder([h])


def test_vote_space_is_the_votes_own_preparation() -> None:
    rng = np.random.default_rng(6)
    x = l2_normalize(rng.normal(size=(20, 8)))
    mu = x.mean(axis=0)
    assert np.array_equal(vote_space(x, mu, "l2"), center_rows(x, mu))
    assert np.allclose(np.linalg.norm(vote_space(x * 3, None, "cosine"), axis=1), 1, atol=1e-6)


# ---------------------------------------------------------------------------------------------- real text, MiniLM
def _csv(rel: str, n: int, offset: int = 0) -> list[str]:
    import csv

    with open(shared_file(*rel.split("/")), newline="", encoding="utf-8") as f:
        rows = [r["text"] for _, r in zip(range(offset + n), csv.DictReader(f), strict=False)]
    return rows[offset:]


def _minilm_check(private: list[str], cands: list[str], centred: bool, tmp_path: object,
                  precision: str = "fp32") -> dict[str, float]:
    """``runtime: auto`` tiers against torch fp32 on real text: votes equal to the reference's (one text per pass)
    on every record, every record's difference errors — not only the re-decided ones' — below the calibrated
    bound, and (fp32 tiers, or an uncentred vote) votes equal to today's default path (torch, batch 16)."""
    pytest.importorskip("openvino")
    from privtext.embed.auto import build_auto
    from privtext.embed.st import SentenceTransformerEmbedder, STOptions

    opts = STOptions(runtime="auto", precision=precision, torch_threads=1, export_dir=str(tmp_path))
    tiers = build_auto(opts, cache_dir=None)
    assert isinstance(tiers, TieredEmbedder)
    p, c = tiers.embed(private), tiers.embed(cands)
    center = np.asarray(c).mean(axis=0) if centred else None
    got = exact_nearest(p, c, center=center)
    ref_p = tiers.tier_vectors(private, 1)
    ref_c = tiers.tier_vectors(cands, 1)
    want = nearest(*((center_rows(ref_p, center), center_rows(ref_c, center)) if centred else (ref_p, ref_c)))
    assert np.array_equal(got, want)
    # the bound covers every record: the largest difference error between each record's fast winner and any
    # candidate, measured with the reference vectors
    bounds = calibrate(row_source(c), np.asarray(c), center, "l2")
    fp, fc = vote_space(np.asarray(p), center, "l2"), vote_space(np.asarray(c), center, "l2")
    rp, rc = vote_space(ref_p, center, "l2"), vote_space(ref_c, center, "l2")
    f = fp.astype(np.float64) @ fc.T.astype(np.float64) - 0.5 * (fc.astype(np.float64) ** 2).sum(1)
    r = rp.astype(np.float64) @ rc.T.astype(np.float64) - 0.5 * (rc.astype(np.float64) ** 2).sum(1)
    d = f - r
    w = f.argmax(1)
    worst = float(np.abs(d - d[np.arange(len(d)), w][:, None]).max())
    assert worst < bounds.window[0, 0]
    default = SentenceTransformerEmbedder(torch_threads=1)  # batch 16: today's default (threads do not change bits)
    dp, dc = default.embed(private), default.embed(cands)
    if centred:
        dp, dc = center_rows(dp, dc.mean(axis=0)), center_rows(dc, dc.mean(axis=0))
    agree = float((nearest(dp, dc) == got).mean())
    if precision == "fp32" or not centred:
        assert agree == 1.0
    return {"worst": worst, "window": float(bounds.window[0, 0]), "agree_default": agree,
            "fast_agree": float((nearest(fp, fc) == got).mean()),
            "re_embedded": tiers.counters.values.get("tier1_texts", 0.0)}


def test_minilm_auto_votes_equal_fp32_on_yelp(tmp_path: object) -> None:
    texts = _csv("yelp/dev.csv", 160)
    out = _minilm_check(texts[:80], texts[80:], centred=True, tmp_path=tmp_path)
    assert out["window"] < 1e-4  # fp32 tiers: a float-rounding window


@needs_bf16
def test_minilm_bf16_tiers_vote_like_fp32_on_yelp(tmp_path: object) -> None:
    texts = _csv("yelp/dev.csv", 160)
    out = _minilm_check(texts[:80], texts[80:], centred=False, tmp_path=tmp_path, precision="bf16")
    assert out["window"] > 1e-3  # bf16 tiers: a real window, and re-decisions


@pytest.mark.slow
@pytest.mark.parametrize(("rel", "n", "centred", "precision"), [
    ("yelp/dev.csv", 1000, True, "fp32"), ("pubmed/test.csv", 600, True, "fp32"),
    pytest.param("yelp/dev.csv", 1000, False, "bf16", marks=needs_bf16),
    pytest.param("pubmed/test.csv", 600, True, "bf16", marks=needs_bf16)])
def test_minilm_votes_equal_fp32_at_scale(rel: str, n: int, centred: bool, precision: str, tmp_path: object) -> None:
    texts = _csv(rel, 2 * n, offset=1000)
    out = _minilm_check(texts[:n], texts[n:], centred=centred, tmp_path=tmp_path, precision=precision)
    if precision == "bf16":
        assert out["fast_agree"] < 1.0  # bf16 alone moves some votes here; the re-decision puts them back
