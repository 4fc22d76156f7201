"""Embedding on a local 2-CPU Ray cluster with Ray Data equals single-process embedding, in the same order: bit for
bit with the hashing embedder, cosine ≥ 0.9999 with the packaged MiniLM; Parquet shards are embedded where they
lie (ids kept, row order kept across files and row groups); the driver-side cache keeps cached texts off the
cluster; a whole Aug-PE run with ``cluster: {backend: ray, embed: true}`` releases what a local run releases.
Skipped where Ray is not installed (``pip install -c constraints.txt -e '.[ray]'``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from privtext.config import ClusterConfig, config_from_dict
from privtext.embed import CachedEmbedder, build_embedder
from privtext.embed.hashing import HashingEmbedder
from privtext.errors import ConfigError, DataError, MissingDependencyError

HASH = {"backend": "hashing", "dim": 48, "cache": False}


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    words = ["soup", "bread", "quiet", "room", "staff", "rude", "lovely", "menu", "bed", "price", "a", "the"]
    out = [" ".join(rng.choice(words, size=int(rng.integers(1, 40)))) for _ in range(n)]
    out[3] = out[7]  # a duplicate
    out[5] = "é ünïcode ✓ text"
    return out


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local test cluster only
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


# ------------------------------------------------------------------------------------- texts in memory


def test_ray_data_vectors_equal_single_process_vectors(ray_cluster) -> None:
    from privtext.embed.distributed import RayDataEmbedder

    texts = _texts(np.random.default_rng(0), 1500)
    local = HashingEmbedder(dim=48)
    emb = RayDataEmbedder(HASH, batch_size=64)
    assert emb.name == local.name and emb.dim == 48
    got = emb.embed(texts)
    want = local.embed(texts)
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.array_equal(got, want)  # exact, and in input order (rows are placed by their position)
    assert emb.embed([]).shape == (0, 48)
    assert np.array_equal(emb.embed(texts[:1]), want[:1])
    assert emb.calls == 2 and emb.rows == 1501


def test_the_cache_stays_on_the_driver(ray_cluster, tmp_path: Path) -> None:
    texts = _texts(np.random.default_rng(1), 300)
    emb = build_embedder({**HASH, "cache": True}, cache_dir=tmp_path / "cache",
                         cluster=ClusterConfig(backend="ray", embed=True, embed_batch_size=50))
    assert isinstance(emb, CachedEmbedder) and type(emb.inner).__name__ == "RayDataEmbedder"
    want = HashingEmbedder(dim=48).embed(texts)
    assert np.array_equal(emb.embed(texts), want)
    assert emb.inner.rows == len(set(texts))  # duplicates embedded once
    assert np.array_equal(emb.embed(texts[::-1]), want[::-1])
    assert emb.inner.calls == 1 and emb.hits == len(texts)  # the second call never reached the cluster
    assert np.array_equal(emb.embed([*texts[:5], "a brand new text"])[:5], want[:5])
    assert emb.inner.calls == 2 and emb.inner.rows == len(set(texts)) + 1


def test_without_cluster_embed_the_embedder_is_local(tmp_path: Path) -> None:
    emb = build_embedder(HASH, cluster=ClusterConfig(backend="ray"))  # votes on Ray, embedding here
    assert isinstance(emb, HashingEmbedder)
    with pytest.raises(ConfigError, match="unknown option 'dimm'"):  # checked before any cluster starts
        build_embedder({**HASH, "dimm": 3}, cluster=ClusterConfig(backend="ray", embed=True))


@pytest.mark.slow
def test_minilm_on_ray_matches_a_single_process(ray_cluster) -> None:
    """The packaged MiniLM, loaded offline on every worker: same vectors up to batch-composition rounding."""
    from privtext.embed.distributed import RayDataEmbedder

    texts = _texts(np.random.default_rng(2), 40)
    local = build_embedder({"backend": "sentence-transformers", "cache": False})
    emb = RayDataEmbedder({"backend": "sentence-transformers", "cache": False}, batch_size=8)
    got, want = emb.embed(texts), local.embed(texts)
    assert emb.name == local.name and got.shape == want.shape
    cos = np.sum(got * want, axis=1)
    assert cos.min() >= 0.9999, cos.min()


# ------------------------------------------------------------------------------------- Parquet shards


def _write_shards(tmp_path: Path, texts: list[str]) -> list[Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(texts)
    cuts = [0, n // 4, n // 4, 3 * n // 4, n]  # the second shard is empty
    paths = []
    for i in range(len(cuts) - 1):
        part = texts[cuts[i]:cuts[i + 1]]
        ids = [f"doc-{j}" for j in range(cuts[i], cuts[i + 1])]
        p = tmp_path / f"shard-{i}.parquet"
        pq.write_table(pa.table({"id": pa.array(ids, type=pa.string()), "body": pa.array(part, type=pa.string())}),
                       p, row_group_size=45)  # several row groups per file
        paths.append(p)
    return paths


def test_parquet_shards_are_embedded_in_order_with_their_ids(ray_cluster, tmp_path: Path) -> None:
    from privtext.embed.distributed import embed_parquet_distributed

    texts = _texts(np.random.default_rng(3), 520)
    paths = _write_shards(tmp_path, texts)
    want = HashingEmbedder(dim=48).embed(texts)
    res = embed_parquet_distributed(paths, "body", embedder=HASH, id_column="id", read_rows=16)
    assert np.array_equal(res.vectors, want)
    assert res.ids == [f"doc-{j}" for j in range(len(texts))] and res.rows_per_file == [130, 0, 260, 130]
    out = tmp_path / "vecs.npy"
    res = embed_parquet_distributed([str(p) for p in paths], "body", embedder=HASH, out=out)
    assert isinstance(res.vectors, np.memmap) and res.ids is None
    assert np.array_equal(np.load(out), want)


def test_bad_parquet_inputs_are_named(ray_cluster, tmp_path: Path) -> None:
    from privtext.embed.distributed import embed_parquet_distributed

    paths = _write_shards(tmp_path, _texts(np.random.default_rng(4), 200))
    with pytest.raises(DataError, match="no column 'text'"):
        embed_parquet_distributed(paths, embedder=HASH)
    with pytest.raises(DataError, match="no column 'doc_id'"):
        embed_parquet_distributed(paths, "body", embedder=HASH, id_column="doc_id")
    with pytest.raises(DataError, match=r"missing\.parquet: no such Parquet file"):
        embed_parquet_distributed([*paths, tmp_path / "missing.parquet"], "body", embedder=HASH)
    (tmp_path / "notes.parquet").write_text("not parquet")
    with pytest.raises(DataError, match="not a readable Parquet file"):
        embed_parquet_distributed(tmp_path / "notes.parquet", "body", embedder=HASH)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": ["fine", None, "fine too"]}), tmp_path / "holes.parquet")
    with pytest.raises(DataError, match=r"holes\.parquet: column 'body' holds a non-string value None \(row 1 ") as e:
        embed_parquet_distributed([tmp_path / "holes.parquet"], "body", embedder=HASH)  # raised on a worker
    assert "Traceback" not in str(e.value) and type(e.value) is DataError
    with pytest.raises(ConfigError, match="no Parquet paths"):
        embed_parquet_distributed([], "body", embedder=HASH)
    with pytest.raises(ConfigError, match="read_rows must be a positive integer, got 0"):
        embed_parquet_distributed(paths, "body", embedder=HASH, read_rows=0)


# ------------------------------------------------------------------------------------------- whole runs


def test_a_whole_augpe_run_embedding_on_ray_releases_what_a_local_run_releases(ray_cluster, tmp_path: Path) -> None:
    from privtext.rundir import RunDir
    from privtext.testing.tinyrun import tiny_run, toy_corpora

    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=40, n_pool=150)
    kw = {"iterations": 2, "privacy": {"epsilon": 4.0, "delta": 1e-5, "reproducible_noise": True},
          "embedder": {"backend": "hashing", "dim": 64, "cache": True}}
    local = tiny_run(tmp_path / "local", private=priv, public=pub, **kw)
    dist = tiny_run(tmp_path / "ray", private=priv, public=pub,
                    cluster={"backend": "ray", "shards": 2, "embed": True, "embed_batch_size": 16}, **kw)
    assert (local / "synthetic.jsonl").read_bytes() == (dist / "synthetic.jsonl").read_bytes()
    for it in (0, 1):
        a = np.load(RunDir(local).release_path(f"votes/iter_{it:03d}", it))
        b = np.load(RunDir(dist).release_path(f"votes/iter_{it:03d}", it))
        assert set(a.files) == set(b.files) and all(np.array_equal(a[k], b[k]) for k in a.files)


# ------------------------------------------------------------------------------------ config and errors


def test_bad_cluster_embed_settings_are_refused() -> None:
    base = {"method": "augpe", "data": {"private": "x.csv"}, "privacy": {"mu": 1.0}}
    with pytest.raises(ConfigError, match=r"cluster\.embed: true needs cluster\.backend: ray"):
        config_from_dict({**base, "cluster": {"embed": True}})
    for bad in ({"backend": "ray", "embed_batch_size": 0}, {"backend": "ray", "embed_concurrency": -1},
                {"backend": "ray", "embedd": True}):
        with pytest.raises(ConfigError, match="cluster"):
            config_from_dict({**base, "cluster": bad})
    ok = config_from_dict({**base, "cluster": {"backend": "ray", "embed": True}})
    assert ok.cluster.embed and ok.cluster.embed_batch_size == 256


def test_bad_embedder_arguments_are_named() -> None:
    from privtext.embed.distributed import RayDataEmbedder

    with pytest.raises(ConfigError, match="embed_batch_size must be a positive integer, got 0"):
        RayDataEmbedder(HASH, batch_size=0)
    with pytest.raises(ConfigError, match="embed_concurrency must be a positive integer, got True"):
        RayDataEmbedder(HASH, concurrency=True)
    with pytest.raises(ConfigError, match="unknown embedder backend 'nope'"):
        RayDataEmbedder({"backend": "nope"})


def test_without_ray_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from privtext.embed.distributed import RayDataEmbedder
    from privtext.mechanisms.distributed import RayVoteCounter

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(MissingDependencyError, match=r"privtext\[ray\]") as e:
        RayDataEmbedder(HASH).embed(["x"])
    assert "distributed embedding" in str(e.value) and e.value.package == "ray"
    with pytest.raises(MissingDependencyError, match="distributed voting"):
        RayVoteCounter()(np.zeros((1, 2), np.float32), np.zeros((1, 2), np.float32))
