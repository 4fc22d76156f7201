"""Voting throughput: exact and approximate nearest-neighbour backends at Aug-PE scale.

    python benchmarks/voting.py [--private 100000] [--candidates 30000] [--dim 384] [--backends faiss,numpy,ivf,hnsw]

Each backend runs in its own subprocess so its peak resident memory (ru_maxrss) is its own. Prints pairs/s
(private × candidate distance evaluations per second), GFLOP/s (2·d flops per pair, exact backends) and agreement
with the float64 brute-force reference on a 1000-query sample. Data: clustered unit vectors (embedding-like).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def make_data(n_priv: int, n_cand: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(200, d))

    def draw(n: int) -> np.ndarray:
        out = np.empty((n, d), dtype=np.float32)
        for s in range(0, n, 20000):
            k = min(20000, n - s)
            x = centres[rng.integers(0, 200, size=k)] + 0.6 * rng.normal(size=(k, d))
            out[s:s + k] = x / np.linalg.norm(x, axis=1, keepdims=True)
        return out

    return draw(n_priv), draw(n_cand)


def child(backend: str, n_priv: int, n_cand: int, d: int) -> None:
    from privtext.mechanisms.nn import brute_force_nn, nearest

    q, b = make_data(n_priv, n_cand, d)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    idx = nearest(q, b, backend=backend, chunk_size=4096)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sample = np.random.default_rng(1).choice(n_priv, size=min(1000, n_priv), replace=False)
    ref = brute_force_nn(q[sample], b)
    print(json.dumps({
        "backend": backend, "seconds": dt, "pairs_per_s": n_priv * n_cand / dt,
        "gflops": 2 * d * n_priv * n_cand / dt / 1e9, "agreement": float((idx[sample] == ref).mean()),
        "peak_rss_mb": peak / 1024, "data_rss_mb": base_rss / 1024,
    }))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--private", type=int, default=100_000)
    ap.add_argument("--candidates", type=int, default=30_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--backends", default="faiss,numpy,ivf,hnsw")
    ap.add_argument("--child", default=None)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.private, a.candidates, a.dim)
        return
    data_mb = (a.private + a.candidates) * a.dim * 4 / 2**20
    print(f"voting benchmark: {a.private:,} private × {a.candidates:,} candidates × {a.dim} dims "
          f"(inputs {data_mb:.0f} MB; a full distance matrix would be {a.private * a.candidates * 4 / 2**30:.1f} GB)")
    print(f"{'backend':8} {'seconds':>8} {'Mpairs/s':>10} {'GFLOP/s':>8} {'agree':>6} {'peak RSS MB':>12}")
    for be in a.backends.split(","):
        r = subprocess.run([sys.executable, __file__, "--child", be, "--private", str(a.private),
                            "--candidates", str(a.candidates), "--dim", str(a.dim)],
                           capture_output=True, text=True, check=True)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        gf = f"{res['gflops']:8.1f}" if be in ("faiss", "numpy", "torch") else f"{'(ann)':>8}"
        print(f"{be:8} {res['seconds']:8.2f} {res['pairs_per_s'] / 1e6:10.1f} {gf} {res['agreement']:6.3f} "
              f"{res['peak_rss_mb']:12.0f}")


if __name__ == "__main__":
    main()
