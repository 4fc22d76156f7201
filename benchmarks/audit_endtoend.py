"""End-to-end attacks on the demo's corpus (``privtext audit --end-to-end``): each method as built, then the three
broken fixtures of issue 22, each run once with its canaries; prints the lower bound beside the claim and the run
times (docs/audit.md quotes the output).

    python benchmarks/audit_endtoend.py [--out DIR] [--embedder demo|hashing] [--only augpe,secpe,...]
        [--lm-size tiny|small]

* ``augpe``, ``wasp`` — the demo's Aug-PE configuration at (ε, δ) = (4, 1e-5) (WASP: the same generator as its
  one generator); ``dpkps`` — pure ε = 4; ``secpe`` — the demo's (p, r) = (1e-3, 2e-2). Canaries: as many as the
  claim needs (membership), 32 secrets with 5 holders each (reconstruction).
* ``fault:prompt`` — Aug-PE whose generators put private records into their prompts and copy them;
* ``fault:noise`` — DP-KPS (ε = 1, counting each document's highest-idf terms) on a small corpus (10 demo notes)
  with a public vocabulary holding 200 rare terms, every noise draw removed;
* ``fault:detector`` — SecPE whose detector misses the planted secret in 4 of its 5 holders;
* ``learn:ngram``, ``learn:dpo`` (issue 38; not in the default list) — the ``augpe`` case learning from its released
  votes: ``evolution.learn: {kind: ngram_counts}`` (the demo's 4-gram, its counts re-estimated after each
  iteration), or ``{kind: dpo}`` with the ``lm`` generator (``--lm-size``, default tiny: the small one takes
  minutes to train on this CPU; trained on the demo's public notes, cached under ``--out``) and every learning
  option at its default. The trained generator writes iterations 1–3; the attack reads the same shared files.
  ``learn:dpo:secpe`` and ``learn:dpo:wasp``: the ``secpe`` and ``wasp`` cases with ``{kind: dpo}`` on the same lm
  (SecPE: its pairs from the released cluster votes, the reconstruction game of its claim; WASP: from its released
  Top-Q nearest and furthest histograms). ``final:model``: ``learn:dpo`` with ``evolution.final: model``, so the
  released set is sampled from the trained generator instead of the population. ``learn:rerank`` (and
  ``learn:rerank:secpe``): ``{kind: rerank}`` on the demo's 4-gram, best of 2 under a preference model fitted to
  the released pairs (privtext.learn.rerank; WASP refuses the kind).

    python benchmarks/audit_endtoend.py --only learn:ngram,learn:dpo,learn:dpo:secpe,learn:dpo:wasp,final:model
    python benchmarks/audit_endtoend.py --only learn:rerank,learn:rerank:secpe
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any


def _corpora(folder: Path, *, n_private: int = 240, rare: int = 0) -> None:
    from privtext.demo import make_demo_corpora, write_demo_files
    from privtext.testing.audit_faults import with_rare_terms

    folder.mkdir(parents=True, exist_ok=True)
    private, public, patients = make_demo_corpora(n_private=n_private)
    if rare:
        public = with_rare_terms(public, rare)
    write_demo_files(folder, private, public, patients)


def _config(folder: Path, method: str, embedder: str) -> dict[str, Any]:
    from privtext.demo import demo_config

    raw = demo_config(folder, "secpe" if method == "secpe" else "augpe")
    raw["method"] = method
    if embedder == "hashing":
        raw["embedder"] = {"backend": "hashing", "dim": 256, "cache": False}
    if method == "dpkps":
        raw["privacy"] = {"epsilon": 4.0}
        raw["evolution"] = {}  # one shot: no loop settings (synthesis.num_samples stays the demo's)
        raw["dpkps"] = {"vocab_size": 200, "length": 6}
    return raw


def _learning_config(folder: Path, kind: str, embedder: str, lm_size: str, cache: Path, *, method: str = "augpe",
                     final: str = "population") -> dict[str, Any]:
    """The ``method`` case with ``evolution.learn: {kind: KIND}`` (``dpo``: on the lm generator) and
    ``evolution.final: FINAL``."""
    raw = _config(folder, method, embedder)
    raw["evolution"]["learn"] = {"kind": kind}
    if final != "population":
        raw["evolution"]["final"] = final
    if kind == "dpo":
        raw["generator"] = {"backend": "lm", "size": lm_size, "cache_dir": str(cache)}
    return raw


def _learning_case(case: str) -> tuple[str, str, str] | None:
    """``learn:KIND[:METHOD]`` or ``final:model`` → (kind, method, final); None for any other case."""
    if case == "final:model":
        return "dpo", "augpe", "model"
    parts = case.split(":")
    if parts[0] != "learn" or len(parts) not in (2, 3) or parts[1] not in ("ngram", "dpo", "rerank"):
        return None
    method = parts[2] if len(parts) == 3 else "augpe"
    if method not in ("augpe", "secpe", "wasp"):
        raise SystemExit(f"unknown case {case!r}: learning runs for augpe, secpe or wasp")
    return {"ngram": "ngram_counts"}.get(parts[1], parts[1]), method, "population"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/privtext-audit-endtoend")
    ap.add_argument("--embedder", choices=["demo", "hashing"], default="demo")
    ap.add_argument("--only", default="augpe,wasp,dpkps,secpe,fault:prompt,fault:noise,fault:detector")
    ap.add_argument("--lm-size", choices=["tiny", "small"], default="tiny", help="the lm generator of learn:dpo")
    args = ap.parse_args()
    from privtext.audit.endtoend import audit_end_to_end
    from privtext.report import build_report
    from privtext.testing.audit_faults import (
        DetectorMisses,
        PrivateTextInPrompts,
        private_texts_of,
        scaled_noise,
    )

    out = Path(args.out)
    demo, small = out / "demo", out / "small"
    _corpora(demo)
    _corpora(small, n_private=10, rare=200)
    rows = []
    t_all = time.perf_counter()
    for case in args.only.split(","):
        t0 = time.perf_counter()
        report = build_report  # every run's report.html is built and read by the attacker
        if case in ("augpe", "wasp", "dpkps", "secpe"):
            res = audit_end_to_end(_config(demo, case, args.embedder), workdir=out / case, holders=5,
                                   after_run=report)
        elif (learning := _learning_case(case)) is not None:
            kind, method, final = learning
            res = audit_end_to_end(_learning_config(demo, kind, args.embedder, args.lm_size, out / "lm-cache",
                                                    method=method, final=final),
                                   workdir=out / case.replace(":", "-"), after_run=report,
                                   **({"holders": 5} if method == "secpe" else {}))
            res.details["learning"] = _learning_figures(Path(res.run_dir))
        elif case == "fault:prompt":
            fault = PrivateTextInPrompts()
            with fault.active():
                res = audit_end_to_end(_config(demo, "augpe", args.embedder), workdir=out / "fault-prompt",
                                       on_canaries=lambda cs, f=fault: f.prime(private_texts_of(cs, [])),
                                       after_run=report)
        elif case == "fault:noise":
            raw = _config(small, "dpkps", args.embedder)
            raw["privacy"] = {"epsilon": 1.0}
            raw["dpkps"] = {"vocab_size": 400, "length": 6, "vocab_selection": "idf"}
            with scaled_noise(0.0):
                res = audit_end_to_end(raw, workdir=out / "fault-noise", canaries=64, after_run=report)
        elif case == "fault:detector":
            det = DetectorMisses()
            with det.active():
                res = audit_end_to_end(_config(demo, "secpe", args.embedder), workdir=out / "fault-detector",
                                       holders=5, on_canaries=det.prime, after_run=report)
        else:
            raise SystemExit(f"unknown case {case!r}")
        rows.append((case, res, time.perf_counter() - t0))
        for line in res.lines():
            print(f"[{case}] {line}", flush=True)
        if "learning" in res.details:
            print(f"[{case}]   learning steps: {res.details['learning']}", flush=True)
    print()
    print(f"{'case':16} {'claim':44} {'lower bound (95%)':>18} {'canaries':>9} {'run s':>7} {'total s':>8}  verdict")
    for case, res, sec in rows:
        lb = (f"{res.lower_bound:.3g}" if res.game == "membership" else
              f"{res.details['successes']}/{res.canaries} ≥ {res.lower_bound:.3g}")
        expect_fail = case.startswith("fault:")
        verdict = ("caught" if not res.passed else "MISSED") if expect_fail else ("pass" if res.passed else "FAIL")
        print(f"{case:16} {res.claim_words[:44]:44} {lb:>18} {res.canaries:>9} {res.seconds['run']:7.0f} "
              f"{sec:8.0f}  {verdict}")
    print(f"\n{len(rows)} end-to-end audits in {time.perf_counter() - t_all:.0f} s (embedder: {args.embedder})")


def _learning_figures(run: Path) -> str:
    """What the run's learning steps did (private/checkpoints/iter_NNN/learn/learn.json, or learn/gen_K/learn.json
    per WASP generator: pairs and optimiser steps, voted texts, or the pairs a rerank model was fitted to; seconds),
    one item per step."""
    import json

    out = []
    for f in sorted((run / "private" / "checkpoints").glob("iter_*/learn/**/learn.json")):
        d = json.loads(f.read_text(encoding="utf-8"))
        t = d["trained"]
        if d["kind"] == "ngram_counts":
            what = f"{t.get('texts', 0)} voted texts"
        elif d["kind"] == "rerank":
            what = f"{d['pairs']} pairs, a preference model on {t.get('pairs_total', 0)}"
            what += "" if t.get("fitted") else " (not fitted: too few)"
        else:
            what = f"{d['pairs']} pairs, {t.get('steps', 0)} optimiser steps"
        gen = f" ({f.parent.name})" if f.parent.name.startswith("gen_") else ""
        out.append(f"iter {d['iteration']}{gen}: {what}, {d['seconds']:.1f} s")
    return "; ".join(out) or "none"


if __name__ == "__main__":
    main()
