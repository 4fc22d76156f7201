"""Distributed voting on a local 2-worker Ray cluster equals single-process voting exactly, noise included."""

from __future__ import annotations

import numpy as np
import pytest

from privtext.config import ClusterConfig
from privtext.errors import ConfigError
from privtext.mechanisms.voting import dp_vote_histogram


@pytest.fixture(scope="module")
def ray_local():  # type: ignore[no-untyped-def]
    ray = pytest.importorskip("ray")
    mp = pytest.MonkeyPatch()
    mp.setenv("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
    mp.undo()


def test_ray_shards_sum_to_the_single_process_release(ray_local) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    priv = rng.normal(size=(3001, 24)).astype(np.float32)
    cand = rng.normal(size=(400, 24)).astype(np.float32)
    pg, cg = rng.integers(0, 3, size=3001), rng.integers(0, 3, size=400)
    cg[:3] = [0, 1, 2]
    kw = {"noise_multiplier": 2.0, "private_groups": pg, "candidate_groups": cg, "threshold": 1.0,
          "center": cand.mean(0), "backend": "numpy"}
    single, ev1 = dp_vote_histogram(priv, cand, rng=np.random.default_rng(7), **kw)
    dist, ev2 = dp_vote_histogram(priv, cand, rng=np.random.default_rng(7), cluster=ClusterConfig(
        backend="ray", shards=3), **kw)
    assert np.array_equal(single.raw_noisy, dist.raw_noisy) and np.array_equal(single.noisy, dist.noisy)
    assert ev1 == ev2 and dist.n_voting == single.n_voting == 3001
    zero, _ = dp_vote_histogram(priv, cand, rng=np.random.default_rng(7), cluster=ClusterConfig(backend="ray"),
                                **{**kw, "noise_multiplier": 0.0, "threshold": 0.0})
    assert zero.raw_noisy.sum() == 3001  # one vote per record across shards


def test_cluster_section_is_validated() -> None:
    with pytest.raises(ValueError, match="backend"):
        ClusterConfig(backend="spark")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shards"):
        ClusterConfig(shards=0)
    from privtext.mechanisms.distributed import distributed_nearest_votes

    c = ClusterConfig.model_construct(backend="dask", address=None, num_cpus=None, shards=2)
    with pytest.raises(ConfigError, match="'dask'"):
        distributed_nearest_votes(np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32), cluster=c,
                                  count=lambda *a, **k: (np.zeros(2, np.int64), 0))
