"""Exact nearest-neighbour voting on CUDA at Yelp scale: fp16/bf16 matrix products with fp32 accumulation, near
ties re-decided in fp32 (then float64), so the votes are exact.

    python benchmarks/gpu_vote.py [--private 1900000] [--candidates 35000] [--dim 384] [--precisions fp16,bf16,fp32]
        [--sample 2000] [--device cuda]

Needs only numpy and torch: it imports ``privtext.search`` (numpy/torch only; faiss is imported there only
by the faiss backends) from ``src/`` next to this file, so the code timed is the library's own. Data: the
embedding-like unit vectors of benchmarks/voting.py (topics, sub-topics, a shared direction), drawn on the
device. Prints, per precision: wall seconds of the whole vote, effective TFLOP/s (2·d flops per private ×
candidate pair), rows sent to the fp32/float64 re-decision, and agreement with an independent float64 reference
(brute force in float64 on the device, ties to the lowest index) on a ``--sample`` of private rows — 1.0 is
expected for every precision. Also times the clustering-assignment step (private rows to K = 2000 centres).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from privtext.search import gemm_nearest, gemm_torch


def make_data(n_priv: int, n_cand: int, d: int, device: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    g = torch.Generator(device=device).manual_seed(seed)
    topics = torch.randn(50, d, generator=g, device=device)
    subs = topics[torch.randint(0, 50, (2000,), generator=g, device=device)] + 0.8 * torch.randn(
        2000, d, generator=g, device=device)
    shared = 0.68 * torch.randn(d, generator=g, device=device)

    def draw(n: int) -> np.ndarray:
        out = np.empty((n, d), dtype=np.float32)
        for s in range(0, n, 1 << 18):
            k = min(1 << 18, n - s)
            x = subs[torch.randint(0, 2000, (k,), generator=g, device=device)] + torch.randn(
                k, d, generator=g, device=device) + shared
            out[s:s + k] = torch.nn.functional.normalize(x, dim=1).cpu().numpy()
        return out

    return draw(n_priv), draw(n_cand)


def reference64(q: np.ndarray, b: np.ndarray, device: str) -> np.ndarray:
    """float64 brute force on the device: argmin ‖q − b‖², ties to the lowest index."""
    bt = torch.from_numpy(b).to(device, torch.float64)
    out = np.empty(len(q), dtype=np.int64)
    for s in range(0, len(q), 256):
        qt = torch.from_numpy(q[s:s + 256]).to(device, torch.float64)
        d2 = ((qt[:, None, :] - bt[None, :, :]) ** 2).sum(-1) if len(b) * 256 * q.shape[1] < 2**28 else (
            (qt * qt).sum(1, keepdim=True) + (bt * bt).sum(1)[None, :] - 2 * qt @ bt.T)
        m = d2.min(1, keepdim=True).values
        idx = torch.arange(len(b), device=device)[None, :].expand_as(d2)
        out[s:s + 256] = torch.where(d2 == m, idx, len(b)).min(1).values.cpu().numpy()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--private", type=int, default=1_900_000)
    ap.add_argument("--candidates", type=int, default=35_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--precisions", default="fp16,bf16,fp32")
    ap.add_argument("--sample", type=int, default=2000)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--chunk", type=int, default=None)
    a = ap.parse_args()
    dev = a.device
    name = torch.cuda.get_device_name() if dev == "cuda" else "cpu"
    print(f"gpu_vote: {a.private:,} × {a.candidates:,} × {a.dim} on {name}; torch {torch.__version__}")
    t0 = time.perf_counter()
    q, b = make_data(a.private, a.candidates, a.dim, dev)
    print(f"data drawn in {time.perf_counter() - t0:.1f} s")
    sample = np.sort(np.random.default_rng(1).choice(a.private, size=min(a.sample, a.private), replace=False))
    t0 = time.perf_counter()
    ref = reference64(q[sample], b, dev)
    print(f"float64 reference on {len(sample)} rows: {time.perf_counter() - t0:.1f} s")
    flops = 2 * a.dim * a.private * a.candidates
    results = []
    for prec in a.precisions.split(","):
        calls = {"dense_rows": 0, "float64_pairs": 0}
        real_dense, real64 = gemm_torch._decide_dense_torch, gemm_torch._decide64_pairs

        def dense(s, *args, _real=real_dense, _calls=calls, **kw):  # type: ignore[no-untyped-def]
            _calls["dense_rows"] += len(s)
            return _real(s, *args, **kw)

        def d64(qq, bb, rows, *args, _real=real64, _calls=calls, **kw):  # type: ignore[no-untyped-def]
            _calls["float64_pairs"] += len(rows)
            return _real(qq, bb, rows, *args, **kw)

        gemm_torch._decide_dense_torch, gemm_torch._decide64_pairs = dense, d64
        try:
            if dev == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            got = gemm_nearest(q, b, "l2", device=dev, precision=prec, chunk_size=a.chunk)  # type: ignore[arg-type]
            if dev == "cuda":
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
        finally:
            gemm_torch._decide_dense_torch, gemm_torch._decide64_pairs = real_dense, real64
        agree = float((got[sample] == ref).mean())
        res = {"precision": prec, "seconds": round(dt, 3), "tflops": round(flops / dt / 1e12, 2),
               "agreement_vs_float64": agree, **calls}
        results.append(res)
        print(json.dumps(res), flush=True)
    # clustering assignment (SecPE): every private row to its nearest of K centres
    cen = b[:2000].copy()
    if dev == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    assign = gemm_nearest(q, cen, "l2", device=dev, precision="auto")
    dt = time.perf_counter() - t0
    ref_c = reference64(q[sample], cen, dev)
    print(json.dumps({"step": "cluster_assignment", "centres": len(cen), "seconds": round(dt, 3),
                      "agreement_vs_float64": float((assign[sample] == ref_c).mean())}))
    if dev == "cuda":
        print(f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    ok = all(r["agreement_vs_float64"] == 1.0 for r in results)
    print("ALL EXACT" if ok else "MISMATCH")


if __name__ == "__main__":
    main()
