"""Distributed voting on a local 2-CPU Ray cluster equals single-process voting exactly: the per-shard counts sum
to the counts, and a whole Aug-PE run with ``cluster.backend: ray`` releases bit for bit what a local run releases
(same reproducible noise: the noise is added once, centrally, after the sum). Skipped where Ray is not installed
(``pip install -c constraints.txt -e '.[ray]'``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from privtext.errors import ConfigError
from privtext.mechanisms.distributed import shard_bounds


def test_shard_bounds_cover_every_row_once() -> None:
    for n in (1, 2, 7, 100, 101):
        for k in (1, 2, 3, 8, 200):
            b = shard_bounds(n, k)
            rows = [i for a, z in b for i in range(a, z)]
            assert rows == list(range(n)) and len(b) == min(k, n) and all(z > a for a, z in b)
    with pytest.raises(ConfigError, match="shards"):
        shard_bounds(10, 0)


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local test cluster only
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def _data(rng: np.random.Generator, n: int, m: int, d: int = 16) -> tuple[np.ndarray, ...]:
    p = rng.standard_normal((n, d)).astype(np.float32)
    c = rng.standard_normal((m, d)).astype(np.float32)
    pg = rng.integers(0, 4, size=n)
    cg = rng.integers(0, 3, size=m)  # label 3 has no candidate: its records cast no vote
    return p, c, pg, cg


@pytest.mark.parametrize("shards", [1, 2, 3, 7])
def test_ray_counts_equal_single_process_counts(ray_cluster, shards: int, any_seed: int) -> None:
    from privtext.mechanisms.distributed import RayVoteCounter
    from privtext.mechanisms.voting import nearest_votes

    p, c, pg, cg = _data(np.random.default_rng(any_seed), 301, 57)
    kw = {"metric": "l2", "backend": "numpy", "center": c.mean(axis=0)}
    want, nv = nearest_votes(p, c, private_groups=pg, candidate_groups=cg, **kw)
    got, gv = RayVoteCounter(shards=shards)(p, c, private_groups=pg, candidate_groups=cg, **kw)
    assert got.dtype == want.dtype and np.array_equal(got, want) and gv == nv
    assert nv == int((pg != 3).sum()) and got.sum() == nv


def test_noisy_release_is_identical_with_the_same_noise(ray_cluster) -> None:
    from privtext.mechanisms.distributed import RayVoteCounter
    from privtext.mechanisms.voting import dp_vote_histogram

    p, c, pg, cg = _data(np.random.default_rng(3), 200, 40)
    a, ea = dp_vote_histogram(p, c, noise_multiplier=2.0, rng=np.random.default_rng(9), private_groups=pg,
                              candidate_groups=cg, backend="numpy")
    b, eb = dp_vote_histogram(p, c, noise_multiplier=2.0, rng=np.random.default_rng(9), private_groups=pg,
                              candidate_groups=cg, backend="numpy", counter=RayVoteCounter(shards=2))
    assert np.array_equal(a.raw_noisy, b.raw_noisy) and ea == eb and a.noise_std == b.noise_std == 2.0


def test_a_whole_augpe_run_on_ray_releases_what_a_local_run_releases(ray_cluster, tmp_path: Path) -> None:
    from privtext.rundir import RunDir
    from privtext.testing.tinyrun import tiny_run, toy_corpora

    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=40, n_pool=150)
    kw = {"iterations": 2, "privacy": {"epsilon": 4.0, "delta": 1e-5, "reproducible_noise": True}}
    local = tiny_run(tmp_path / "local", private=priv, public=pub, **kw)
    dist = tiny_run(tmp_path / "ray", private=priv, public=pub, cluster={"backend": "ray", "shards": 2}, **kw)
    assert (local / "synthetic.jsonl").read_bytes() == (dist / "synthetic.jsonl").read_bytes()
    for it in (0, 1):
        a = np.load(RunDir(local).release_path(f"votes/iter_{it:03d}", it))
        b = np.load(RunDir(dist).release_path(f"votes/iter_{it:03d}", it))
        assert set(a.files) == set(b.files) and all(np.array_equal(a[k], b[k]) for k in a.files)


def test_bad_cluster_sections_are_refused() -> None:
    from privtext.config import config_from_dict
    from privtext.errors import ConfigError as CE

    base = {"method": "augpe", "data": {"private": "x.csv"}, "privacy": {"mu": 1.0}}
    for bad in ({"backend": "spark"}, {"backend": "ray", "shards": 0}, {"nodes": 3}):
        with pytest.raises(CE, match="cluster"):
            config_from_dict({**base, "cluster": bad})
