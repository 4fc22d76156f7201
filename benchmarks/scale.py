"""Voting at Yelp scale: exact, approximate and SecPE representative voting side by side.

    python benchmarks/scale.py [--scale 0.1] [--methods faiss,numpy,torch,ivf-gemm,secpe-exact,secpe]
        [--sample 20000]

Yelp-size synthetic data: 1.9M private × 35k candidates × 384 dims at ``--scale 1`` (the private count is
multiplied by ``--scale``; the candidates — one iteration's N_syn — stay 35k). Data: the embedding-like unit vectors
of benchmarks/voting.py. Each method runs in its own subprocess (its own peak memory and CPU time). The CPU's
matrix-product peak is measured in the same run, before the methods and again after them (the machine is
shared: the larger of the two is used) — fp32 sgemm (numpy) and bf16 (torch) on one voting block
(rows × 384 · 384 × 35k), best of 5. Every method's effective GFLOP/s counts 2·d flops per private × candidate
pair it decides (exact or not); "×peak" is its time over the time the sgemm peak needs for those flops (the
goal for exact voting: ≤ 1.2), and the same against the bf16 peak.

* ``faiss``, ``numpy``, ``torch``: exact votes (``torch``: the auto precision — bf16 with fp32/float64
  re-decision on AMX/AVX-512-BF16 CPUs); ``torch-fp32``: the torch GEMM in fp32 (what ``auto`` runs on a CPU
  without those features); identical votes are checked against the first exact method.
* ``ivf-gemm``: approximate with the library defaults (nlist √N_syn, nprobe 2); ``ivf-gemm:NLIST:NPROBE`` for
  other points of the curve. Agreement: with the exact votes of this run when there are some, else with an
  exact search of ``--sample`` private rows.
* ``secpe`` / ``secpe-exact``: SecPE's representative voting (mechanisms/clustering.py) — public k-means into
  K = 1000 centres on a public set of 10 % of the private size; every private record assigned to its centre once
  per run (``assign_records``: the centres are public and fixed for the run, so a record's cluster is too); then,
  per iteration, ONE secret clustering release (ρ = ½, two independent Bernoulli samples, the sums of the kept
  records by cluster, noise) and each noisy centre votes for its nearest candidate. ``secpe-exact``: the library
  defaults (k-means on every public point, 25 iterations; exact assignment). ``secpe``: k-means on 32 points per
  centre, 10 iterations, assignment by ivf-gemm (nprobe 8 of its 25 lists) — its agreement column is the share
  of a ``--sample`` of private records assigned to their exact nearest centre. Printed: the once-per-run steps
  (k-means, assignment) and the per-iteration ones (median of 3 iterations).

Peak memory: ru_maxrss of the subprocess minus its RSS after the data exist — the GEMM backends hold one block of
chunk × N_syn scores (64 MB), not N_priv × N_syn (printed for comparison). CPU s: user + system time of the
subprocess; on a shared machine wall time / CPU time shows how much of the 2 cores it got.
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


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(method: str, n_priv: int, n_cand: int, d: int, out_path: str, n_sample: int) -> None:
    from privtext.search import ann_nearest, gemm_nearest, ivf_sizes, nearest

    q, b = make_data(n_priv, n_cand, d)
    sample = np.sort(np.random.default_rng(1).choice(n_priv, size=min(n_sample, n_priv), replace=False))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    extra: dict = {}
    c0, t0 = _cpu(), time.perf_counter()
    flops = 2 * d * n_priv * n_cand
    if method in ("faiss", "numpy", "torch"):
        votes = nearest(q, b, backend=method)  # type: ignore[arg-type]
    elif method == "torch-fp32":  # the torch GEMM in fp32: what a CPU without AMX / AVX-512-BF16 runs
        votes = nearest(q, b, backend="torch", precision="fp32")
    elif method.startswith("ivf-gemm"):
        parts = method.split(":")
        nl, npr = ivf_sizes(n_cand, int(parts[1]) if len(parts) > 1 else None, int(parts[2]) if len(parts) > 2 else None)
        votes = ann_nearest(q, b, "l2", "ivf-gemm", nlist=nl, nprobe=npr)
        extra = {"nlist": nl, "nprobe": npr}
    elif method in ("secpe", "secpe-exact"):
        from privtext.mechanisms.clustering import (
            assign_records,
            centre_votes,
            public_kmeans,
            secret_clustering,
        )

        fast = method == "secpe"
        k = 1000
        pub, _ = make_data(max(k, n_priv // 10), 1, d, seed=7)
        c0, t0 = _cpu(), time.perf_counter()
        kw = {"sample_per_centre": 32, "iters": 10, "assign_backend": "ivf-gemm"} if fast else {}
        clusters = public_kmeans(pub, np.zeros(len(pub), dtype=np.int64), 1, k, seed=0, **kw)  # type: ignore[arg-type]
        t_km = time.perf_counter() - t0
        groups = np.zeros(n_priv, dtype=np.int64)
        t1 = time.perf_counter()
        asg = assign_records(q, groups, clusters, backend="ivf-gemm" if fast else "auto", nprobe=8 if fast else None)
        t_asg = time.perf_counter() - t1
        t_cl, t_votes = [], []
        for it in range(3):  # three iterations' clustering releases and centre votes, each timed
            t2 = time.perf_counter()
            rel, _ = secret_clustering(q, groups, clusters, rho=np.full(n_priv, 0.5), sigma=1.0,
                                       rng=np.random.default_rng(it), assignment=asg)
            t3 = time.perf_counter()
            hist = centre_votes(rel.centres.astype(np.float32), rel.counts, clusters.group, b,
                                np.zeros(n_cand, dtype=np.int64))
            t_cl.append(t3 - t2)
            t_votes.append(time.perf_counter() - t3)
        votes = np.full(n_priv, -1)
        flops = 2 * d * (n_priv * len(clusters) + 3 * len(clusters) * n_cand)
        agree = 1.0
        if fast:  # share of sampled private records put in their exact nearest centre
            exact = nearest(q[sample], clusters.centres, backend="auto")
            agree = float((asg.owner[sample] == exact).mean())
        extra = {"kmeans_s": t_km, "assign_s": t_asg, "cluster_s": float(np.median(t_cl)),
                 "votes_s": float(np.median(t_votes)), "centres": len(clusters), "hist_sum": float(hist.sum()),
                 "assign_agree": agree}
    else:
        raise SystemExit(f"unknown method {method}")
    dt, dc = time.perf_counter() - t0, _cpu() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if method.startswith("ivf-gemm"):  # exact votes of the sample, outside the timing
        extra["sample_agree"] = float((votes[sample] == gemm_nearest(q[sample], b, "l2")).mean())
    np.save(out_path, votes)
    print(json.dumps({"method": method, "seconds": dt, "cpu_s": dc, "gflops": flops / dt / 1e9, "flops": flops,
                      "extra_rss_mb": (peak - base) / 1024, "data_rss_mb": base / 1024, **extra}))


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--candidates", type=int, default=35_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--methods", default="faiss,numpy,torch,ivf-gemm,secpe-exact,secpe")
    ap.add_argument("--sample", type=int, default=20_000, help="private rows for sampled agreement")
    ap.add_argument("--child", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--private", type=int, default=None)
    a = ap.parse_args()
    n_priv = a.private or round(1_900_000 * a.scale)
    if a.child:
        child(a.child, n_priv, a.candidates, a.dim, a.out, a.sample)
        return
    import tempfile

    print(f"scale benchmark: {n_priv:,} private × {a.candidates:,} candidates × {a.dim} (scale {a.scale}); "
          f"{os.cpu_count()} CPUs, load {_load()}")
    print(f"a full score matrix would be {n_priv * a.candidates * 4 / 2**30:.1f} GiB; one CPU block is 64 MiB")
    pk = peaks(a.candidates, a.dim)
    print(f"measured peak (before): sgemm fp32 {pk['sgemm_fp32']:.1f} GFLOP/s, torch bf16 {pk['torch_bf16']:.1f} "
          f"GFLOP/s")
    print(f"{'method':15} {'seconds':>8} {'CPU s':>7} {'GFLOP/s':>8} {'vs faiss':>8} {'agree':>7} {'+RSS MB':>8}  load")
    tmp = tempfile.mkdtemp()
    ref = None
    t_faiss = None
    rows = []
    for m in a.methods.split(","):
        path = os.path.join(tmp, f"{m.replace(':', '_')}.npy")
        r = subprocess.run([sys.executable, __file__, "--child", m, "--private", str(n_priv), "--candidates",
                            str(a.candidates), "--dim", str(a.dim), "--out", path, "--sample", str(a.sample)],
                           capture_output=True, text=True)
        if r.returncode:
            print(f"{m}: failed\n{r.stderr[-2000:]}")
            continue
        res = json.loads(r.stdout.strip().splitlines()[-1])
        rows.append(res)
        votes = np.load(path)
        if m == "faiss":
            t_faiss = res["seconds"]
        if ref is None and m in ("faiss", "numpy", "torch", "torch-fp32"):
            ref = votes
        if m.startswith("secpe"):
            agree = f"{res['assign_agree']:7.4f}"
        elif ref is not None:
            agree = f"{(votes == ref).mean():7.4f}"
        else:
            agree = f"{res.get('sample_agree', float('nan')):6.4f}s"
        ratio = f"{t_faiss / res['seconds']:7.2f}×" if t_faiss else f"{'':8}"
        print(f"{m:15} {res['seconds']:8.2f} {res['cpu_s']:7.1f} {res['gflops']:8.1f} {ratio} "
              f"{agree} {res['extra_rss_mb']:8.0f}  {_load()}" + (
                  f"\n{'':17}once per run: k-means {res['kmeans_s']:.1f} s, private records to centres "
                  f"{res['assign_s']:.1f} s; per iteration (median of 3): clustering release "
                  f"{res['cluster_s']:.2f} s + centre votes {res['votes_s']:.2f} s = "
                  f"{res['cluster_s'] + res['votes_s']:.2f} s ({res['centres']} centres)"
                  if m.startswith("secpe") else ""), flush=True)
    pk2 = peaks(a.candidates, a.dim)
    print(f"measured peak (after): sgemm fp32 {pk2['sgemm_fp32']:.1f} GFLOP/s, torch bf16 {pk2['torch_bf16']:.1f} "
          f"GFLOP/s; load {_load()}")
    p32 = max(pk["sgemm_fp32"], pk2["sgemm_fp32"])
    p16 = max(pk["torch_bf16"], pk2["torch_bf16"])
    print("\ntime over the time the measured peak needs for the same flops (exact goal: ≤ 1.2× the sgemm peak):")
    print(f"{'method':15} {'× sgemm peak':>13} {'× bf16 peak':>12} {'% of sgemm':>11}")
    for res in rows:
        t32 = res["flops"] / (p32 * 1e9)
        t16 = res["flops"] / (p16 * 1e9)
        print(f"{res['method']:15} {res['seconds'] / t32:13.2f} {res['seconds'] / t16:12.2f} "
              f"{t32 / res['seconds']:11.0%}")


if __name__ == "__main__":
    main()
