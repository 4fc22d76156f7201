"""Voting at Yelp scale: exact, approximate and SecPE representative voting side by side.

    python benchmarks/scale.py [--scale 0.1] [--methods faiss,numpy,torch,ivf-gemm,secpe] [--threads N]

Yelp-size synthetic data: 1.9M private × 35k candidates × 384 dims at ``--scale 1`` (the private count is
multiplied by ``--scale``; the candidates — one iteration's N_syn — stay 35k). Data: the embedding-like unit vectors
of benchmarks/voting.py. Each method runs in its own subprocess (its own peak memory); the CPU's matrix-product
peak is measured first in the same run — fp32 sgemm (numpy) and bf16 (torch) on one voting block
(rows × 384 · 384 × 35k), best of 5 — and every method's effective GFLOP/s (2·d flops per private × candidate pair
it decides, exact or not) is given as a fraction of the sgemm peak.

* ``faiss``, ``numpy``, ``torch``: exact votes (``torch``: the auto precision — bf16 with fp32/float64
  re-decision on AMX CPUs); identical votes are checked.
* ``ivf-gemm``: approximate (nlist = 2√N_syn, nprobe 4); agreement with the exact votes is printed.
* ``secpe``: SecPE's representative voting (mechanisms/clustering.py): public k-means into K = 1000 centres on a
  public set of 10 % of the private size, ONE secret clustering release (each private record assigned to its
  nearest centre, twice — independent samples), then each noisy centre votes for its nearest candidate.
  Its "GFLOP/s" counts the private assignment (2·d·N_priv·K·2) plus the public k-means.

Peak memory: ru_maxrss of the subprocess minus its RSS after the data exist — the GEMM backends hold one block of
chunk × N_syn scores (64 MB), not N_priv × N_syn (printed for comparison).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from voting import make_data


def peaks(n_cand: int, d: int) -> dict:
    import torch

    rows = max(16, (1 << 24) // n_cand)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, d), dtype=np.float32)
    bT = np.ascontiguousarray(rng.standard_normal((n_cand, d), dtype=np.float32).T)
    at, bt = torch.from_numpy(a).bfloat16(), torch.from_numpy(bT).bfloat16().contiguous()
    out = {}
    for name, f in (("sgemm_fp32", lambda: a @ bT), ("torch_bf16", lambda: at @ bt)):
        f()
        best = min(_timed(f) for _ in range(5))
        out[name] = 2 * rows * d * n_cand / best / 1e9
    return out


def _timed(f) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def child(method: str, n_priv: int, n_cand: int, d: int, out_path: str) -> None:
    from privtext.mechanisms.nn import ann_nearest, nearest

    q, b = make_data(n_priv, n_cand, d)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    extra: dict = {}
    t0 = time.perf_counter()
    if method in ("faiss", "numpy", "torch"):
        votes = nearest(q, b, backend=method)  # type: ignore[arg-type]
        flops = 2 * d * n_priv * n_cand
    elif method == "ivf-gemm":
        votes = ann_nearest(q, b, "l2", "ivf-gemm", nlist=2 * int(np.sqrt(n_cand)), nprobe=4)
        flops = 2 * d * n_priv * n_cand
    elif method == "secpe":
        from privtext.mechanisms.clustering import centre_votes, public_kmeans, secret_clustering

        k = 1000
        pub, _ = make_data(max(k, n_priv // 10), 1, d, seed=7)
        t1 = time.perf_counter()
        clusters = public_kmeans(pub, np.zeros(len(pub), dtype=np.int64), 1, k, seed=0)
        t_km = time.perf_counter() - t1
        rel, _ = secret_clustering(q, np.zeros(n_priv, dtype=np.int64), clusters, rho=np.full(n_priv, 0.5),
                                   sigma=1.0, rng=np.random.default_rng(0))
        t_assign = time.perf_counter() - t1 - t_km
        hist = centre_votes(rel.centres.astype(np.float32), rel.counts, clusters.group, b,
                            np.zeros(n_cand, dtype=np.int64))
        votes = np.full(n_priv, -1)
        extra = {"kmeans_s": t_km, "assign_s": t_assign, "centres": len(clusters), "hist_sum": float(hist.sum())}
        flops = 2 * d * n_priv * len(clusters) * 2 + 2 * d * len(pub) * k * 25
    else:
        raise SystemExit(f"unknown method {method}")
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    np.save(out_path, votes)
    print(json.dumps({"method": method, "seconds": dt, "gflops": flops / dt / 1e9,
                      "extra_rss_mb": (peak - base) / 1024, "data_rss_mb": base / 1024, **extra}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--candidates", type=int, default=35_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--methods", default="faiss,numpy,torch,ivf-gemm,secpe")
    ap.add_argument("--child", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--private", type=int, default=None)
    a = ap.parse_args()
    n_priv = a.private or round(1_900_000 * a.scale)
    if a.child:
        child(a.child, n_priv, a.candidates, a.dim, a.out)
        return
    import tempfile

    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"scale benchmark: {n_priv:,} private × {a.candidates:,} candidates × {a.dim} (scale {a.scale}); "
          f"{os.cpu_count()} CPUs, load {load}")
    print(f"a full score matrix would be {n_priv * a.candidates * 4 / 2**30:.1f} GiB; one CPU block is 64 MiB")
    pk = peaks(a.candidates, a.dim)
    print(f"measured peak: sgemm fp32 {pk['sgemm_fp32']:.1f} GFLOP/s, torch bf16 {pk['torch_bf16']:.1f} GFLOP/s")
    print(f"{'method':9} {'seconds':>8} {'GFLOP/s':>8} {'of sgemm':>8} {'vs faiss':>8} {'agree':>7} {'+RSS MB':>8}")
    tmp = tempfile.mkdtemp()
    ref = None
    t_faiss = None
    for m in a.methods.split(","):
        path = os.path.join(tmp, f"{m}.npy")
        r = subprocess.run([sys.executable, __file__, "--child", m, "--private", str(n_priv), "--candidates",
                            str(a.candidates), "--dim", str(a.dim), "--out", path],
                           capture_output=True, text=True)
        if r.returncode:
            print(f"{m}: failed\n{r.stderr[-2000:]}")
            continue
        res = json.loads(r.stdout.strip().splitlines()[-1])
        votes = np.load(path)
        if m == "faiss":
            t_faiss = res["seconds"]
        if ref is None and m in ("faiss", "numpy", "torch"):
            ref = votes
        agree = f"{(votes == ref).mean():7.4f}" if ref is not None and m != "secpe" else f"{'—':>7}"
        ratio = f"{t_faiss / res['seconds']:7.2f}×" if t_faiss else f"{'':8}"
        print(f"{m:9} {res['seconds']:8.2f} {res['gflops']:8.1f} {res['gflops'] / pk['sgemm_fp32']:8.0%} {ratio} "
              f"{agree} {res['extra_rss_mb']:8.0f}" + (
                  f"   (k-means {res['kmeans_s']:.1f} s, private assignment {res['assign_s']:.1f} s, "
                  f"{res['centres']} centres)" if m == "secpe" else ""), flush=True)


if __name__ == "__main__":
    main()
