"""The medical-sized workload, before and after: Aug-PE on 2000 private PubMed abstracts (~200 words each), 4
iterations of 2000 candidates, offline n-gram generator — stage times with today's default embedder and with
``runtime: auto`` plus the private embedding cache on a second run.

    HF_HUB_OFFLINE=1 python benchmarks/medical_workload.py [--n-private 2000] [--num-samples 500] [--variations 4]
        [--iterations 4] [--out runs/medical] [--phases before,after-1,after-2]

Data: private = the first ``--n-private`` abstracts of ``$PRIVTEXT_SHARED_DATA/pubmed/test.csv``; public (the
n-gram model's training text) = ``pubmed/dev.csv`` plus the rest of ``test.csv``. Aug-PE, (ε, δ) = (4, 1e-5),
``num_samples × variations`` candidates per iteration (default 500 × 4 = 2000), blank-filling variations (mask ½),
the default vote (exact, centred on the candidates' mean), seed 0 and ``privacy.reproducible_noise: true`` so the
phases draw the same noise (the runs say NOT PRIVATE: a benchmark). Every phase is one ``privtext run`` in its own
process:

* ``before``  — ``embedder: {runtime: torch, private_cache: false}``: today's default (torch fp32, batch 16);
* ``after-1`` — ``embedder: {runtime: auto}`` with an empty private cache (``$PRIVTEXT_CACHE_HOME`` of its own):
  the fast path; this run fills the cache;
* ``after-2`` — the same again: the private corpus comes from the cache.

Prints the stage times of each phase (from ``private/metrics.json``; ``privtext profile RUN`` shows one run), the
ratio of ``before``'s time to each, what the embedder did (private texts embedded / read from the cache, votes
re-decided, fp32 texts), and whether each phase released exactly what ``before`` released (every vote histogram,
and the synthetic records). The machine is shared: the phases run one after another, so compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness import ROOT, SHARED, read_texts, write_texts

DATA = SHARED / "pubmed"
PHASES = ("before", "after-1", "after-2")
STAGES = ("loading", "setup_generator", "embedding_private", "generation", "embedding", "voting", "selection")


def _config(a: argparse.Namespace, phase: str, out: Path) -> dict[str, Any]:
    embedder: dict[str, Any] = {"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2"}
    embedder.update({"runtime": "torch", "private_cache": False} if phase == "before" else {"runtime": "auto"})
    return {
        "method": "augpe", "seed": 0, "name": f"medical-{phase}",
        "data": {"private": str(a.out / "private.csv"), "public": str(a.out / "public.csv"), "text_column": "text"},
        "generator": {"backend": "ngram", "order": 4},
        "embedder": embedder,
        "privacy": {"epsilon": 4.0, "delta": 1e-5, "reproducible_noise": True},
        "evolution": {"num_samples": a.num_samples, "iterations": a.iterations, "variations": a.variations,
                      "selection": "rank", "variation": {"kind": "blank", "mask_prob": 0.5}},
        "output": str(out),
    }


def _run(a: argparse.Namespace, phase: str) -> tuple[Path, float]:
    import yaml

    out = a.out / phase
    if out.exists():
        shutil.rmtree(out)
    cfg = a.out / f"{phase}.yaml"
    cfg.write_text(yaml.safe_dump(_config(a, phase, out), sort_keys=False), encoding="utf-8")
    env = {**os.environ, "PRIVTEXT_CACHE_HOME": str(a.out / ("cache-before" if phase == "before" else "cache-after")),
           "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "privtext", "-q", "run", str(cfg), "--force"], check=True, env=env)
    return out, time.perf_counter() - t0


def _releases(run: Path) -> dict[str, np.ndarray]:
    out = {}
    for p in sorted((run / "private" / "checkpoints").rglob("releases/*.npz")):
        with np.load(p) as z:
            out[str(p.relative_to(run))] = np.concatenate([z[k].ravel() for k in sorted(z.files)])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-private", type=int, default=2000)
    ap.add_argument("--num-samples", type=int, default=500)
    ap.add_argument("--variations", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "medical")
    ap.add_argument("--phases", default=",".join(PHASES))
    a = ap.parse_args()
    a.out = a.out.resolve()
    phases = [p.strip() for p in a.phases.split(",") if p.strip()]
    if bad := [p for p in phases if p not in PHASES]:
        ap.error(f"unknown phase(s) {bad}; choose from {', '.join(PHASES)}")
    a.out.mkdir(parents=True, exist_ok=True)
    test = read_texts(DATA / "test.csv")
    write_texts(a.out / "private.csv", test[: a.n_private])
    write_texts(a.out / "public.csv", read_texts(DATA / "dev.csv") + test[a.n_private:])
    from privtext.backends.hardware import cpu_summary

    words = np.mean([len(t.split()) for t in test[: a.n_private]])
    print(f"CPU: {cpu_summary()}, {os.cpu_count()} logical CPUs")
    print(f"workload: {a.n_private} private PubMed abstracts (mean {words:.0f} words), {a.iterations} iterations of "
          f"{a.num_samples * a.variations} candidates ({a.num_samples} samples × {a.variations}), n-gram generator")
    results: dict[str, dict[str, Any]] = {}
    for phase in phases:
        with open("/proc/loadavg") as f:
            load0 = f.read().split()[0]
        run, wall = _run(a, phase)
        with open("/proc/loadavg") as f:
            load1 = f.read().split()[0]
        m = json.loads((run / "private" / "metrics.json").read_text(encoding="utf-8"))
        results[phase] = {"run": run, "wall": wall, "metrics": m, "load": f"{load0}-{load1}"}
    print(f"\n{'stage':18}" + "".join(f"{p:>12}" for p in results) + "".join(
        f"{'before/' + p:>16}" for p in results if p != "before" and "before" in results))
    for st in (*STAGES, "run (wall)"):
        vals = {p: (r["metrics"]["wall_seconds"] if st == "run (wall)" else
                    r["metrics"]["stages"].get(st, {}).get("seconds", 0.0)) for p, r in results.items()}
        line = f"{st:18}" + "".join(f"{v:12.1f}" for v in vals.values())
        if "before" in vals:
            line += "".join(f"{(vals['before'] / v if v else float('inf')):16.2f}" for p, v in vals.items()
                            if p != "before")
        print(line)
    print("load average (start-end): " + ", ".join(f"{p} {r['load']}" for p, r in results.items()))
    for p, r in results.items():
        m = r["metrics"]
        emb, vote = m["stages"].get("embedding", {}), m["stages"].get("voting", {})
        c = m.get("counters", {})
        bits = [f"{int(emb.get('texts', 0))} candidate texts embedded ({emb.get('texts', 0) / max(emb.get('seconds', 1e-9), 1e-9):.1f}/s)",
                f"private: {int(c.get('private_embedding_embedded', 0))} embedded, "
                f"{int(c.get('private_embedding_cached', 0))} from the private cache"]
        if "exact_records" in vote:
            bits.append(f"exact votes: {int(vote.get('exact_stage_a_ambiguous', 0))} of {int(vote['exact_records'])} "
                        f"records near a tie, {int(vote.get('exact_stage_reference', 0))} decided by fp32, "
                        f"{int(vote.get('tier1_texts', 0))} fp32 texts embedded, window E ≤ "
                        f"{c.get('exact_window', 0):.2e}, largest error seen {c.get('exact_max_error_ratio', 0):.2f} E")
        print(f"{p}: " + "; ".join(bits))
    if "before" in results:
        ref = _releases(results["before"]["run"])
        syn = (results["before"]["run"] / "synthetic.jsonl").read_bytes()
        for p, r in results.items():
            if p == "before":
                continue
            got = _releases(r["run"])
            same = [k for k in ref if k in got and np.array_equal(ref[k], got[k])]
            print(f"{p} released what before released: {len(same)} of {len(ref)} releases equal; synthetic records "
                  f"{'identical' if (r['run'] / 'synthetic.jsonl').read_bytes() == syn else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
