"""DP nearest-neighbour votes: exactness of the backends, noise level, thresholding, label groups."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from privtext.errors import ConfigError
from privtext.mechanisms.voting import dp_vote_histogram, nearest_votes, threshold_histogram
from privtext.search import ann_nearest, brute_force_nn, gemm_nearest, nearest
from privtext.search.reference import _prep


def _clustered(rng: np.random.Generator, n: int, d: int = 48, k: int = 40) -> np.ndarray:
    """Embedding-like data: points around k directions on the unit sphere."""
    centres = rng.normal(size=(k, d))
    x = centres[rng.integers(0, k, size=n)] + 0.35 * rng.normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("metric", ["l2", "cosine"])
@pytest.mark.parametrize("backend", ["faiss", "numpy", "torch"])
def test_exact_backends_agree_with_brute_force(backend: str, metric: str, any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    base = rng.normal(size=(700, 32)).astype(np.float32)
    base[50:60] = base[3]  # exact duplicates: ties must go to the lowest index
    q = rng.normal(size=(900, 32)).astype(np.float32)
    q[:5] = base[3]
    ref = brute_force_nn(q, base, metric=metric)
    got = nearest(q, base, metric=metric, backend=backend, chunk_size=128)
    assert np.array_equal(got, ref)
    assert (got[:5] == 3).all()


@pytest.mark.parametrize("metric", ["l2", "cosine"])
@pytest.mark.parametrize(("precision", "select", "top_k"), [
    ("fp32", "auto", 64), ("bf16", "int16", 64), ("bf16", "topk", 64), ("bf16", "topk", 2), ("fp16", "topk", 64),
    ("fp16", "topk", 3), ("bf16", "window", 64), ("fp16", "window", 64),
])
def test_low_precision_gemm_votes_equal_the_float64_reference(metric: str, precision: str, select: str, top_k: int,
                                                              any_seed: int) -> None:
    """bf16/fp16 products (the CUDA path, run here with device='cpu') re-decide near-ties, so votes are exact:
    duplicates, near-duplicates closer than bf16 can resolve, and top_k=2 (most rows fall back to fp32)."""
    rng = np.random.default_rng(any_seed)
    base = _clustered(rng, 1500, d=48, k=20) * rng.uniform(0.5, 2.0, size=(1500, 1)).astype(np.float32)
    base[100:110] = base[7]
    base[200] = base[8] + 1e-4 * rng.normal(size=48).astype(np.float32)  # inside bf16's rounding, outside fp32's
    q = _clustered(np.random.default_rng(any_seed + 1), 1200, d=48, k=20)
    q[:4], q[4:8] = base[7], base[8]
    ref = brute_force_nn(q, base, metric=metric)
    got = gemm_nearest(_prep(q, metric, "q"), _prep(base, metric, "b"), metric, device="cpu",
                       precision=precision, select=select, top_k=top_k, chunk_size=256)  # type: ignore[arg-type]
    assert np.array_equal(got, ref)
    assert (got[:4] == 7).all()


def test_bf16_rows_without_a_positive_maximum_go_dense() -> None:
    """Every score negative (queries opposite the base): the int16 shortcut cannot anchor, the rows are redone
    in fp32 and still equal the reference."""
    rng = np.random.default_rng(3)
    base = np.abs(rng.normal(size=(400, 16))).astype(np.float32)
    q = -np.abs(rng.normal(size=(300, 16))).astype(np.float32)
    ref = brute_force_nn(q, base, metric="cosine")
    got = gemm_nearest(_prep(q, "cosine", "q"), _prep(base, "cosine", "b"), "cosine", device="cpu",
                       precision="bf16", select="int16")
    assert np.array_equal(got, ref)


def test_gemm_blocks_are_chunk_rows_by_all_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    """The numpy backend multiplies chunk × d by d × N_base blocks: memory O(chunk · N_syn)."""
    import privtext.search.gemm as gemm

    seen: list[tuple[int, int]] = []
    real = gemm._decide_dense

    def spy(s, *a, **kw):  # type: ignore[no-untyped-def]
        seen.append(s.shape)
        return real(s, *a, **kw)

    monkeypatch.setattr(gemm, "_decide_dense", spy)
    rng = np.random.default_rng(0)
    nearest(rng.normal(size=(1000, 8)), rng.normal(size=(900, 8)), backend="numpy", chunk_size=100)
    assert len(seen) == 10 and all(shape == (100, 900) for shape in seen)
    seen.clear()
    nearest(rng.normal(size=(1000, 8)), rng.normal(size=(900, 8)), backend="numpy")  # default: 2^24 scores
    assert seen == [(1000, 900)]


@pytest.mark.parametrize("backend", ["ivf", "ivf-gemm", "hnsw"])
def test_ann_agrees_at_least_95_percent(backend: str, any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    base = _clustered(rng, 4000)
    q = _clustered(np.random.default_rng(any_seed + 1), 2000)
    ref = brute_force_nn(q, base)
    got = nearest(q, base, backend=backend, nprobe=16, seed=any_seed)
    assert (got == ref).mean() >= 0.95


@pytest.mark.parametrize("kind", ["ivf-sq8", "ivf-pq"])
def test_quantised_ivf_with_exact_reranking_agrees(kind: str) -> None:
    rng = np.random.default_rng(5)
    base = _clustered(rng, 4000)
    q = _clustered(np.random.default_rng(6), 1000)
    got = ann_nearest(q, base, "l2", kind, nprobe=8, rerank=64)
    assert (got == brute_force_nn(q, base)).mean() >= 0.95


def test_ivf_gemm_probing_every_list_is_exact_and_one_vote_per_record(any_seed: int) -> None:
    """nprobe = nlist scans every candidate: the per-list GEMM + argmax merge must equal exact search; and any
    nprobe gives each query exactly one valid candidate (one vote per record)."""
    rng = np.random.default_rng(any_seed)
    base = _clustered(rng, 3000)
    q = _clustered(np.random.default_rng(any_seed + 1), 1500)
    got = ann_nearest(q, base, "l2", "ivf-gemm", nlist=40, nprobe=40, seed=any_seed)
    assert np.array_equal(got, brute_force_nn(q, base))
    one = ann_nearest(q, base, "cosine", "ivf-gemm", nlist=40, nprobe=1, seed=any_seed)
    assert one.shape == (1500,) and one.min() >= 0 and one.max() < 3000
    counts, n_voting = nearest_votes(q, base, backend="ivf-gemm", nprobe=1)
    assert counts.sum() == n_voting == 1500
    with pytest.raises(ConfigError, match="'annoy'"):
        ann_nearest(q, base, "l2", "annoy")


def test_empty_and_bad_inputs() -> None:
    assert nearest(np.zeros((3, 4)), np.zeros((0, 4))).tolist() == [-1, -1, -1]
    with pytest.raises(ConfigError, match="dimension"):
        nearest(np.zeros((3, 4)), np.zeros((2, 5)))
    with pytest.raises(ConfigError, match="NaN"):
        nearest(np.full((1, 2), np.nan), np.zeros((2, 2)))
    with pytest.raises(ConfigError, match="metric"):
        nearest(np.zeros((1, 2)), np.zeros((2, 2)), metric="manhattan")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'annoy'"):
        nearest(np.zeros((1, 2)), np.zeros((2, 2)), backend="annoy")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'fp8'"):
        nearest(np.zeros((1, 2)), np.zeros((2, 2)), backend="torch", precision="fp8")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'tpu'"):
        nearest(np.zeros((1, 2)), np.zeros((2, 2)), backend="torch", device="tpu")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="bf16"):
        nearest(np.zeros((1, 2)), np.zeros((2, 2)), backend="numpy", precision="bf16")
    with pytest.raises(ConfigError, match="chunk_size"):
        nearest(np.zeros((1, 2)), np.zeros((2, 2)), backend="numpy", chunk_size=0)


def test_votes_stay_within_label_groups() -> None:
    rng = np.random.default_rng(0)
    cand = rng.normal(size=(10, 6)).astype(np.float32)
    cand_groups = np.array([0] * 5 + [1] * 5)
    # private records sit exactly on group-1 candidates but are labelled group 0
    priv = cand[5:8] + 1e-4
    counts, n_voting = nearest_votes(priv, cand, private_groups=np.zeros(3, dtype=int), candidate_groups=cand_groups)
    assert counts[5:].sum() == 0 and counts[:5].sum() == 3 and n_voting == 3
    # a group without candidates casts no vote
    counts, n_voting = nearest_votes(priv, cand, private_groups=np.full(3, 2), candidate_groups=cand_groups)
    assert counts.sum() == 0 and n_voting == 0


def test_sigma_zero_histogram_is_exact() -> None:
    rng = np.random.default_rng(1)
    cand = rng.normal(size=(50, 16)).astype(np.float32)
    priv = rng.normal(size=(400, 16)).astype(np.float32)
    rel, event = dp_vote_histogram(priv, cand, noise_multiplier=0.0, rng=rng)
    exact = np.bincount(brute_force_nn(priv, cand), minlength=50)
    assert np.array_equal(rel.noisy, exact.astype(float))
    assert rel.noisy.sum() == 400 and event.noise_multiplier == 0.0


@pytest.mark.parametrize("sigma,sens", [(0.7, 1.0), (2.5, 1.0), (1.3, 3.0)])
def test_noise_level_matches_sigma(sigma: float, sens: float, any_seed: int) -> None:
    """Zero signal: identical private and candidate sets, each record votes for itself (count exactly 1).
    The residual noisy − 1 must be N(0, (σΔ)²): a chi-square interval on the variance at level 1e-4."""
    rng = np.random.default_rng(any_seed)
    n = 6000
    x = rng.normal(size=(n, 8)).astype(np.float32)
    rel, _ = dp_vote_histogram(x, x, noise_multiplier=sigma, sensitivity=sens, rng=rng)
    resid = rel.raw_noisy - 1.0
    std = sigma * sens
    var = resid.var(ddof=1)
    lo = std**2 * stats.chi2.ppf(1e-4 / 2, n - 1) / (n - 1)
    hi = std**2 * stats.chi2.ppf(1 - 1e-4 / 2, n - 1) / (n - 1)
    assert lo <= var <= hi
    # and the mean is zero: |mean| within 4.5 standard errors
    assert abs(resid.mean()) <= 4.5 * std / np.sqrt(n)
    assert rel.noise_std == pytest.approx(std)


def test_threshold_clips_then_subtracts() -> None:
    h = np.array([-3.0, 0.5, 2.0, 7.5])
    assert threshold_histogram(h, 2.0).tolist() == [0.0, 0.0, 0.0, 5.5]
    assert threshold_histogram(h, 0.0).tolist() == h.tolist()
    with pytest.raises(ConfigError):
        threshold_histogram(h, -1)


def test_mechanism_returns_the_gaussian_event_of_its_noise_multiplier() -> None:
    from privtext.privacy.events import gaussian_event

    _, ev = dp_vote_histogram(np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32), noise_multiplier=1.7,
                              sensitivity=3.0, rng=np.random.default_rng(0))
    assert ev == gaussian_event(1.7)  # the multiplier σ = std/Δ, whatever Δ


def test_centering_keeps_one_vote_per_record_and_breaks_hubs(any_seed: int) -> None:
    """A 'hub' candidate at the centre of the cloud collects votes under plain search; centring on the
    candidates' mean spreads them, and every record still casts exactly one vote (sensitivity unchanged)."""
    rng = np.random.default_rng(any_seed)
    d = 16
    offset = np.zeros(d)
    offset[0] = 3.0  # the whole cloud sits away from the origin, as sentence embeddings do
    cand = rng.normal(size=(40, d)) + offset
    cand[0] = offset  # the hub: the cloud's centre
    priv = rng.normal(size=(2000, d)) + offset
    cand = cand / np.linalg.norm(cand, axis=1, keepdims=True)
    priv = priv / np.linalg.norm(priv, axis=1, keepdims=True)
    plain, n1 = nearest_votes(priv, cand)
    centred, n2 = nearest_votes(priv, cand, center=cand.mean(0))
    assert plain.sum() == centred.sum() == n1 == n2 == 2000
    assert plain[0] == plain.max() and plain[0] > 0.1 * 2000  # the hub wins most without centring (1/40 fair)
    assert centred[0] < plain[0] / 4
    rel, _ = dp_vote_histogram(priv, cand, noise_multiplier=0.0, rng=rng, center=cand.mean(0))
    assert np.array_equal(rel.noisy, centred.astype(float))


def test_fast_bf16_is_read_from_the_cpu_flags() -> None:
    """AMX-BF16 or AVX-512-BF16 (a bf16 GEMM at twice fp32 or better) picks bf16 for ``precision='auto'``; a
    CPU with neither stays fp32; a flag must match whole (``avx512_bf16x`` is not ``avx512_bf16``)."""
    from privtext.search import cpu_has_fast_bf16

    assert cpu_has_fast_bf16("flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n")
    assert cpu_has_fast_bf16("flags\t\t: fpu avx2 amx_bf16 amx_tile\n")
    assert not cpu_has_fast_bf16("flags\t\t: fpu avx2 avx512f avx512_vnni\n")
    assert not cpu_has_fast_bf16("flags\t\t: fpu avx512_bf16x\n")


@pytest.mark.parametrize(("nlist", "nprobe", "bad"), [(0, 2, "nlist must be ≥ 1, got 0"), (10, 0, "nprobe must be ≥ 1, got 0"),
                                                      (-3, None, "nlist must be ≥ 1, got -3")])
@pytest.mark.parametrize("kind", ["ivf-gemm", "ivf"])
def test_bad_ivf_sizes_are_typed_errors_naming_the_value(kind: str, nlist: int, nprobe: int | None, bad: str) -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigError, match=bad):
        ann_nearest(rng.normal(size=(20, 8)), rng.normal(size=(400, 8)), "l2", kind, nlist=nlist, nprobe=nprobe)


def test_ivf_gemm_query_blocks_do_not_change_votes() -> None:
    """The search runs query block by query block (memory O(block)): any block size gives the same votes."""
    from privtext.search.ivf_gemm import _ivf_gemm

    rng = np.random.default_rng(2)
    q, b = _prep(_clustered(rng, 2500), "l2", "q"), _prep(_clustered(rng, 3000), "l2", "b")
    one = _ivf_gemm(q, b, "l2", nlist=30, nprobe=2, niter=5, seed=0, block=1 << 16)
    assert np.array_equal(one, _ivf_gemm(q, b, "l2", nlist=30, nprobe=2, niter=5, seed=0, block=333))
