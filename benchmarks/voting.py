"""Voting throughput: exact and approximate nearest-neighbour backends at Aug-PE scale.

    python benchmarks/voting.py [--private 100000] [--candidates 30000] [--dim 384]
        [--backends faiss,numpy,torch:fp32,torch:bf16] [--pareto] [--sample 2000]

Exact mode: each backend runs in its own subprocess so its peak resident memory (ru_maxrss) is its own; prints
seconds, GFLOP/s (2·d flops per private × candidate pair), the ratio to faiss exact in the same run, and agreement
with the float64 brute-force reference on a 1000-query sample.

``--pareto``: approximate search (faiss IVF-Flat with nlist/nprobe, IVF-SQ8 and IVF-PQ with exact re-ranking of
the top candidates, HNSW with efSearch) — wall time including the index build, speed-up over faiss exact measured
in the same run, and vote agreement (fraction of sampled private rows voting for the exact winner). Prints the
Pareto-optimal points (no other point both faster and more accurate) marked with ``*``.

Data: clustered unit vectors resembling sentence embeddings — 200 Gaussian centres in R^d, each point a centre
plus N(0, 0.6²) per coordinate, normalised (typical cosine to the nearest candidate ≈ 0.75, not uniform noise).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def make_data(n_priv: int, n_cand: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Embedding-like unit vectors: 50 topics, 2000 sub-topics (topic + N(0, 0.8²)), a point = sub-topic +
    N(0, 1) per coordinate, plus a shared direction (the anisotropy of sentence embeddings), normalised. At
    2000 × 30000 × 384: mean cosine between random points ≈ 0.15, cosine to the nearest candidate ≈ 0.7,
    mean gap between the best and second-best candidate ≈ 0.009 — neither uniform noise nor trivially clustered."""
    rng = np.random.default_rng(seed)
    topics = rng.normal(size=(50, d))
    subs = topics[rng.integers(0, 50, size=2000)] + 0.8 * rng.normal(size=(2000, d))
    shared = 0.68 * rng.normal(size=d)

    def draw(n: int) -> np.ndarray:
        out = np.empty((n, d), dtype=np.float32)
        for s in range(0, n, 20000):
            k = min(20000, n - s)
            x = subs[rng.integers(0, 2000, size=k)] + rng.normal(size=(k, d)) + shared
            out[s:s + k] = x / np.linalg.norm(x, axis=1, keepdims=True)
        return out

    return draw(n_priv), draw(n_cand)


def child(spec: str, n_priv: int, n_cand: int, d: int) -> None:
    from privtext.search import brute_force_nn, nearest

    backend, _, precision = spec.partition(":")
    q, b = make_data(n_priv, n_cand, d)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    idx = nearest(q, b, backend=backend, precision=precision or "auto")  # type: ignore[arg-type]
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sample = np.random.default_rng(1).choice(n_priv, size=min(1000, n_priv), replace=False)
    ref = brute_force_nn(q[sample], b)
    print(json.dumps({
        "backend": spec, "seconds": dt, "gflops": 2 * d * n_priv * n_cand / dt / 1e9,
        "agreement": float((idx[sample] == ref).mean()), "peak_rss_mb": peak / 1024, "data_rss_mb": base_rss / 1024,
    }))


def ann_configs(n_cand: int) -> list[tuple[str, dict]]:
    s = int(np.sqrt(n_cand))
    out: list[tuple[str, dict]] = []
    for nlist in (s, 2 * s):
        for nprobe in (1, 2, 3, 4, 8):
            out.append(("ivf-gemm", {"nlist": nlist, "nprobe": nprobe}))
    for nprobe in (1, 2, 4, 8):
        out.append(("ivf", {"nlist": s, "nprobe": nprobe}))
    for nprobe in (2, 4):
        out.append(("ivf-sq8", {"nlist": s, "nprobe": nprobe, "rerank": 8}))
    out.append(("ivf-pq", {"nlist": s, "nprobe": 4, "rerank": 16}))
    for m, ef in ((16, 32), (32, 64), (32, 128)):
        out.append(("hnsw", {"m": m, "ef": ef}))
    return out


def run_ann(kind: str, p: dict, q: np.ndarray, b: np.ndarray) -> np.ndarray:
    from privtext.search import ann_nearest

    return ann_nearest(q, b, "l2", kind, **p)


def pareto(a: argparse.Namespace) -> None:
    import faiss

    from privtext.search import nearest

    faiss.omp_set_num_threads(os.cpu_count() or 1)
    q, b = make_data(a.private, a.candidates, a.dim)
    t0 = time.perf_counter()
    exact = nearest(q, b, backend="faiss")
    t_faiss = time.perf_counter() - t0
    t0 = time.perf_counter()
    exact2 = nearest(q, b, backend="torch")
    t_gemm = time.perf_counter() - t0
    assert np.array_equal(exact, exact2)
    print(f"exact faiss {t_faiss:.2f} s; exact torch (auto precision) {t_gemm:.2f} s ({t_faiss / t_gemm:.2f}× faiss); "
          f"votes identical")
    rows = []
    for kind, p in ann_configs(a.candidates):
        t0 = time.perf_counter()
        got = run_ann(kind, p, q, b)
        dt = time.perf_counter() - t0
        rows.append((kind, p, dt, float((got == exact).mean())))
        print(f"  {kind:8} {json.dumps(p):44} {dt:7.2f} s  {t_faiss / dt:6.1f}×  agree {rows[-1][3]:.4f}", flush=True)
    print("\nPareto front (time vs agreement; speed-up over exact faiss in this run):")
    for kind, p, dt, ag in sorted(rows, key=lambda r: r[2]):
        dominated = any((o[2] < dt and o[3] >= ag) or (o[2] <= dt and o[3] > ag) for o in rows)
        mark = " " if dominated else "*"
        print(f"{mark} {kind:8} {json.dumps(p):44} {dt:7.2f} s  {t_faiss / dt:6.1f}×  agree {ag:.4f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--private", type=int, default=100_000)
    ap.add_argument("--candidates", type=int, default=30_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--backends", default="faiss,numpy,torch:fp32,torch:bf16")
    ap.add_argument("--pareto", action="store_true")
    ap.add_argument("--child", default=None)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.private, a.candidates, a.dim)
        return
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    data_mb = (a.private + a.candidates) * a.dim * 4 / 2**20
    print(f"voting benchmark: {a.private:,} private × {a.candidates:,} candidates × {a.dim} dims "
          f"(inputs {data_mb:.0f} MB; a full distance matrix would be {a.private * a.candidates * 4 / 2**30:.1f} GB); "
          f"{os.cpu_count()} CPUs, load {' '.join(load)}")
    if a.pareto:
        pareto(a)
        return
    print(f"{'backend':12} {'seconds':>8} {'GFLOP/s':>8} {'vs faiss':>8} {'agree':>6} {'peak RSS MB':>12}")
    t_faiss = None
    for be in a.backends.split(","):
        r = subprocess.run([sys.executable, __file__, "--child", be, "--private", str(a.private),
                            "--candidates", str(a.candidates), "--dim", str(a.dim)],
                           capture_output=True, text=True, check=True)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        if be == "faiss":
            t_faiss = res["seconds"]
        ratio = f"{t_faiss / res['seconds']:7.2f}×" if t_faiss else f"{'':8}"
        print(f"{be:12} {res['seconds']:8.2f} {res['gflops']:8.1f} {ratio} {res['agreement']:6.3f} "
              f"{res['peak_rss_mb']:12.0f}")


if __name__ == "__main__":
    main()
