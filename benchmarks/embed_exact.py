"""Embedding throughput with exact votes: ``embedder: {runtime: auto}`` (OpenVINO bf16, near-ties re-decided with
fp32 vectors) against today's default (torch fp32, batch 16), end to end on a vote, and the votes' agreement.

    HF_HUB_OFFLINE=1 python benchmarks/embed_exact.py [--data pubmed|yelp] [--n-private 600] [--n-candidates 600]
        [--offset 0] [--center] [--metric l2] [--variants fp32,auto,...] [--reps 1]

Texts: ``$PRIVTEXT_SHARED_DATA/<data>/`` (PubMed ``test.csv`` abstracts, Yelp ``dev.csv`` reviews; default
../shared/data) — after ``--offset``, the first ``--n-private`` as private records, the next ``--n-candidates``
as candidates. One nearest vote of every private record over the candidates (``--center``: centred on the
candidates' mean, Aug-PE's default). Every variant starts with empty caches and embeds both sets, then votes; its
time is embedding + voting, the re-decisions' fp32 embeddings included. Variants (timed in turn, one process,
best of ``--reps``):

* ``fp32``: today's default — SentenceTransformerEmbedder() (torch fp32, batch 16, torch's threads), exact vote;
* ``fp32-t1``: the same with ``torch_threads: 1`` (a busy machine's faster torch setting; same vectors);
* ``single``: the reference tier alone — torch fp32, one text per pass, one thread — for every text (exact);
* ``auto``: what ``runtime: auto`` builds on this machine;
* ``bf16`` / ``bf16-t1``: OpenVINO bf16 (batch 16; ``-t1``: one thread) → torch fp32 single;
* ``bf16-mid``: OpenVINO bf16 → OpenVINO fp32 single → torch fp32 single (a middle tier);
* ``ovfp32`` / ``ovfp32-single``: OpenVINO fp32 (batch 16 / one text per pass on one thread) → torch fp32 single.

Prints the CPU's features, then per variant: seconds (embedding of the two sets, the vote with its
re-decisions), texts/s, the ratio of ``fp32``'s total time to the variant's, the texts each tier embedded, the
records re-decided, the calibrated window E, and the share of votes equal to ``fp32``'s and to ``single``'s
(the reference vectors' own votes; ``single`` is always computed, last, when not asked for). The machine is
shared: compare ratios within one run.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from harness import SHARED, read_texts

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ALL = ("fp32", "fp32-t1", "single", "auto", "bf16", "bf16-t1", "bf16-mid", "ovfp32", "ovfp32-single")
FILES = {"pubmed": "pubmed/test.csv", "yelp": "yelp/dev.csv"}


def _variant(name: str) -> Any:
    from privtext.embed.auto import build_auto
    from privtext.embed.st import SentenceTransformerEmbedder, STOptions
    from privtext.embed.tiers import TieredEmbedder, reference_embedder

    opts = STOptions()
    if name == "fp32":
        return SentenceTransformerEmbedder()
    if name == "fp32-t1":
        return SentenceTransformerEmbedder(torch_threads=1)
    if name == "single":
        return reference_embedder(opts)
    if name == "auto":
        return build_auto(STOptions(runtime="auto"), cache_dir=None)
    if name.startswith("bf16"):
        fast = SentenceTransformerEmbedder(runtime="openvino", precision="bf16",
                                           torch_threads=1 if name == "bf16-t1" else None)
    elif name == "ovfp32":
        fast = SentenceTransformerEmbedder(runtime="openvino")
        fast.name += "@openvino"
    else:  # ovfp32-single: one text per pass, one thread
        fast = SentenceTransformerEmbedder(runtime="openvino", batch_size=1, torch_threads=1)
        fast.name += "@openvino-single"
    tiers = [fast]
    if name == "bf16-mid":
        mid = SentenceTransformerEmbedder(runtime="openvino", batch_size=1, torch_threads=1)
        mid.name += "@openvino-single"
        tiers.append(mid)
    return TieredEmbedder([*tiers, reference_embedder(opts)])


def _vote(emb: Any, private: list[str], cands: list[str], center: bool, metric: str
          ) -> tuple[np.ndarray, float, float]:
    from privtext.embed.tiers import TieredEmbedder
    from privtext.mechanisms.voting import center_rows
    from privtext.search import exact_nearest, nearest

    t0 = time.perf_counter()
    p, c = emb.embed(private), emb.embed(cands)
    t_embed = time.perf_counter() - t0
    mu = np.asarray(c).mean(axis=0) if center else None
    t0 = time.perf_counter()
    if isinstance(emb, TieredEmbedder):
        votes = exact_nearest(p, c, metric=metric, center=mu)  # type: ignore[arg-type]
    else:
        pp, cc = (center_rows(p, mu), center_rows(c, mu)) if mu is not None else (p, c)
        votes = nearest(pp, cc, metric=metric)  # type: ignore[arg-type]
    return votes, t_embed, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", choices=sorted(FILES), default="pubmed")
    ap.add_argument("--n-private", type=int, default=600)
    ap.add_argument("--n-candidates", type=int, default=600)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--center", action="store_true", help="centre on the candidates' mean (Aug-PE's default)")
    ap.add_argument("--metric", choices=("l2", "cosine"), default="l2")
    ap.add_argument("--variants", default="fp32,auto,single")
    ap.add_argument("--reps", type=int, default=1)
    a = ap.parse_args()
    wanted = [v.strip() for v in a.variants.split(",") if v.strip()]
    if bad := [v for v in wanted if v not in ALL]:
        ap.error(f"unknown variant(s) {bad}; choose from {', '.join(ALL)}")
    if "single" not in wanted:
        wanted.append("single")
    from privtext.backends.hardware import cpu_summary

    texts = read_texts(SHARED / FILES[a.data], offset=a.offset, n=a.n_private + a.n_candidates)
    private, cands = texts[: a.n_private], texts[a.n_private:]
    print(f"CPU: {cpu_summary()}, {os.cpu_count()} logical CPUs")
    print(f"{a.data}: {len(private)} private × {len(cands)} candidates (mean {np.mean([len(t) for t in texts]):.0f} "
          f"chars), metric {a.metric}, centred: {a.center}")
    builders: dict[str, Callable[[], Any]] = {v: (lambda v=v: _variant(v)) for v in wanted}
    warm = texts[:8]
    best: dict[str, tuple[float, float]] = {}
    votes: dict[str, np.ndarray] = {}
    extra: dict[str, dict[str, float]] = {}
    loads = []
    for _ in range(a.reps):
        for v, build in builders.items():
            emb = build()  # fresh: empty caches
            emb.embed(warm)  # loads, compiles; not timed
            if hasattr(emb, "_memo"):
                emb._memo = [{} for _ in emb._memo]
                emb.counters.values.clear()
            with open("/proc/loadavg") as f:
                loads.append(float(f.read().split()[0]))
            vt, te, tv = _vote(emb, private, cands, a.center, a.metric)
            if v not in best or te + tv < sum(best[v]):
                best[v] = (te, tv)
                votes[v] = vt
                extra[v] = dict(getattr(getattr(emb, "counters", None), "values", {}))
    n = len(texts)
    base = sum(best["fp32"]) if "fp32" in best else None
    print(f"load average while timing: {min(loads):.1f}-{max(loads):.1f}")
    print(f"{'variant':9} {'embed s':>8} {'vote s':>7} {'texts/s':>8} {'x fp32':>7} {'=fp32':>7} {'=single':>8}  "
          "re-decided / fp32 texts / window E")
    for v, (te, tv) in best.items():
        x = extra[v]
        ratio = f"{base / (te + tv):7.2f}" if base else "      -"
        eq_f = f"{(votes[v] == votes['fp32']).mean():7.4f}" if "fp32" in votes else "      -"
        eq_s = f"{(votes[v] == votes['single']).mean():8.4f}"
        tiers = " + ".join(f"{int(x.get(f'tier{t}_texts', 0))}" for t in range(1, 3) if f"tier{t}_texts" in x)
        info = (f"  {int(x.get('exact_stage_a_ambiguous', 0))} → {int(x.get('exact_stage_b_ambiguous', 0))} → "
                f"{int(x.get('exact_stage_reference', 0))} / {tiers} / {x.get('exact_window', 0):.2e}"
                if "exact_records" in x else "")
        print(f"{v:9} {te:8.1f} {tv:7.1f} {n / (te + tv):8.2f} {ratio} {eq_f} {eq_s}{info}")


if __name__ == "__main__":
    main()
