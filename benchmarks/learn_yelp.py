"""Learning from the released votes on Yelp (issue 38): Aug-PE and SecPE with the offline ``lm`` generator, each
without learning and with ``evolution.learn: {kind: dpo}``, at ε = 4, run by ``privtext compare`` over seeds.

    PYTHONPATH=src python benchmarks/learn_yelp.py                 # writes the configurations, prints the command
    PYTHONPATH=src python benchmarks/learn_yelp.py --table         # the table of docs/compare.md, with gap closed

Data (benchmarks/compare_methods.py's splits, written by ``prepare_data``): the 5 000 Yelp reviews of
yelp/dev.csv are private, yelp/test.csv rows 0–3 999 public (with their labels: the lm's training text), rows
4 000–4 999 the real held-out set. The ``lm`` generator is the small GPT-2 privtext trains on the public split,
here with sequences of 192 tokens and a cap of 1.2 M training tokens (the default 6 M costs 16+ minutes on the
2-core CPU); it writes at most 128 new tokens. N = 150 synthetic reviews, T = 2 iterations, both label columns
(category, stars), a DP label histogram; SecPE at the (p, r) whose μ is that of (4, 10⁻⁵), random-word secrets,
100 public clusters (compare_methods.py's set-up). DPO at the defaults of docs/learn.md (β 0.01, LoRA rank 8, one
epoch a round, the middle rank rejected) with 160 tokens a pair.

**Gap closed** is POPri's measure: (run − public-only control) / (real data − control), per run, with the control
the zero-shot baseline of the run's own evaluation (as many samples of the generator, no private signal) and "real
data" the OnlyPrivate baseline (the classifier trained on as many private records; for FID, that many private
reviews scored against the real set). 0: no better than the generator alone; 1: as good as the private data. The
sd over seeds says how much of it is noise.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

from harness import ROOT

ART = ROOT / "artifacts" / "learn_yelp"
DATA = ROOT / "artifacts" / "compare" / "data"


def configs() -> dict[str, dict[str, Any]]:
    """The four configurations, by name."""
    sys.path.insert(0, str(Path(__file__).parent))
    from compare_methods import prepare_data, secret_budget

    data = prepare_data(5000)
    base: dict[str, Any] = {
        "seed": 0,
        "data": {"private": str(data / "yelp-private-5000.csv"), "public": str(data / "yelp-public.csv"),
                 "text_column": "text", "label_columns": ["label1", "label2"]},
        "embedder": {"backend": "sentence-transformers", "cache_dir": str(ROOT / "artifacts" / "compare" /
                                                                          "embed-cache")},
        "generator": {"backend": "lm", "cache_dir": str(ART / "lm-cache"), "max_length": 192,
                      "train_tokens": 1_200_000, "max_new_tokens": 128},
        "synthesis": {"num_samples": 150, "label_distribution": {"kind": "dp"}},
        "evolution": {"iterations": 2},
    }
    methods = {
        "augpe": {"method": "augpe", "privacy": {"epsilon": 4.0, "delta": 1e-5}},
        "secpe": {"method": "secpe", "privacy": {"secret": secret_budget()},
                  "synthesis": {**base["synthesis"], "label_distribution": {"kind": "public"}},
                  "secpe": {"clusters": 100, "detector": {"name": "random_words", "quantile": 0.2,
                                                          "from_private": True}}},
    }
    learn = {"none": {"kind": "none"}, "dpo": {"kind": "dpo", "dpo": {"max_length": 160}}}
    out = {}
    for m, extra in methods.items():
        for tag, opts in learn.items():
            c = copy.deepcopy(base) | copy.deepcopy(extra)
            c["evolution"]["learn"] = opts
            c["name"] = f"{m}-{tag}"
            c["output"] = str(ART / "runs" / c["name"])
            out[c["name"]] = c
    # one lever (steps per iteration): the Aug-PE round over the same pairs four times (4 epochs)
    lever = copy.deepcopy(out["augpe-dpo"])
    lever["evolution"]["learn"]["dpo"]["epochs"] = 4
    lever["name"] = "augpe-dpo-epochs4"
    lever["output"] = str(ART / "runs" / lever["name"])
    out[lever["name"]] = lever
    # WASP with the same lm as its one generator (its Top-Q nearest/furthest votes give the pairs), 2 voted rounds
    for tag, opts in learn.items():
        c = copy.deepcopy(base)
        c |= {"method": "wasp", "privacy": {"epsilon": 4.0, "delta": 1e-5},
              "generators": [{**base["generator"], "name": "lm"}]}
        del c["generator"]
        c["synthesis"] = {**base["synthesis"], "label_distribution": {"kind": "public"}}
        c["evolution"]["learn"] = opts
        c["name"] = f"wasp-{tag}"
        c["output"] = str(ART / "runs" / c["name"])
        out[c["name"]] = c
    # the n-gram analogue: Aug-PE with the 4-gram, its counts re-estimated with the voted texts (ngram_counts)
    for tag, opts in (("none", {"kind": "none"}), ("counts", {"kind": "ngram_counts"})):
        c = copy.deepcopy(out["augpe-none"])
        c["generator"] = {"backend": "ngram", "order": 4}
        c["evolution"]["learn"] = opts
        c["name"] = f"augpe-ngram-{tag}"
        c["output"] = str(ART / "runs" / c["name"])
        out[c["name"]] = c
    return out


def _load(run: Path) -> dict[str, Any]:
    """One run's figures: its evaluation (FID, MAUVE, accuracies), the zero-shot and OnlyPrivate baselines of the
    same evaluation (private/evaluation.json: the OnlyPrivate classifier trained on private records), wall time
    and generator calls."""
    pub = json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
    priv = json.loads((run / "private" / "evaluation.json").read_text(encoding="utf-8"))
    metrics = json.loads((run / "private" / "metrics.json").read_text(encoding="utf-8"))
    res = priv["downstream"]["results"]["embedding-logreg"]
    out: dict[str, Any] = {"fid": pub["fid"]["fid"], "fid_zero_shot": pub["fid_zero_shot"]["fid"],
                           "mauve": (pub.get("mauve") or {}).get("mauve"),
                           "wall_s": metrics.get("wall_seconds"),
                           "train_lm_s": (metrics.get("stages", {}).get("setup_generator") or {}).get("seconds", 0.0),
                           "learn_s": (metrics.get("stages", {}).get("learning") or {}).get("seconds", 0.0),
                           "calls": metrics.get("counters", {}).get("llm_calls")}
    for col in ("label1", "label2"):
        for setname in ("synthetic", "zero_shot", "only_private"):
            out[f"{setname}:{col}"] = res[setname][col]["accuracy"]
    return out


def _fid_real(n: int) -> float:
    """FID of ``n`` private reviews (a seeded sample, no privacy: the "real data" end of the gap) against the
    real held-out set, on the MiniLM embeddings the runs are scored with."""
    from harness import offline, read_rows, use_src

    use_src()
    offline()
    import numpy as np

    from privtext.evaluate.embedding import resolve_embedder
    from privtext.evaluate.fid import fid

    emb = resolve_embedder(None)
    private = [r["text"] for r in read_rows(DATA / "yelp-private-5000.csv")]
    pick = np.random.default_rng(0).choice(len(private), size=n, replace=False)
    real = [r["text"] for r in read_rows(DATA / "yelp-real.csv")]
    return float(fid(emb.embed([private[i] for i in pick]), emb.embed(real)).fid)


def _ms(vals: list[float], fmt: str = ".4f") -> str:
    vals = [v for v in vals if v is not None and math.isfinite(v)]
    if not vals:
        return "—"
    if len(vals) == 1:
        return format(vals[0], fmt)
    return f"{statistics.fmean(vals):{fmt}} ± {statistics.stdev(vals):{fmt}}"


def table(runs_dir: Path, n_synthetic: int = 150) -> None:
    """Mean ± sd over seeds per configuration, and POPri's gap closed per run (then mean ± sd): accuracy
    (acc − zero-shot) / (OnlyPrivate − zero-shot) against the same evaluation's baselines; FID
    (FID_zero-shot − FID) / (FID_zero-shot − FID_private), FID_private that of ``n_synthetic`` private reviews."""
    by: dict[str, list[dict[str, Any]]] = {}
    for run in sorted(runs_dir.iterdir()):
        if (run / "evaluation.json").exists() and (run / "private" / "evaluation.json").exists():
            by.setdefault(run.name.rsplit("-s", 1)[0], []).append(_load(run))
    if not by:
        raise SystemExit(f"{runs_dir}: no evaluated runs")
    f_real = _fid_real(n_synthetic)
    print(f"FID of {n_synthetic} private reviews against the real set (the gap's real-data end): {f_real:.4f}")
    print("| config | seeds | FID ↓ | MAUVE ↑ | category acc | stars acc | gap closed: FID | gap closed: category "
          "| gap closed: stars | zero-shot category / stars | OnlyPrivate category / stars | wall s (less lm training) "
          "| learning s | calls |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, rs in by.items():
        def col(k: str, rs: list[dict[str, Any]] = rs) -> list[float]:
            return [r[k] for r in rs]

        gap_fid = [(r["fid_zero_shot"] - r["fid"]) / (r["fid_zero_shot"] - f_real) for r in rs]
        gaps = {c: [(r[f"synthetic:{c}"] - r[f"zero_shot:{c}"]) / (r[f"only_private:{c}"] - r[f"zero_shot:{c}"])
                    for r in rs] for c in ("label1", "label2")}
        print(f"| {name} | {len(rs)} | {_ms(col('fid'))} | {_ms(col('mauve'), '.3f')} | "
              f"{_ms([100 * v for v in col('synthetic:label1')], '.1f')} | "
              f"{_ms([100 * v for v in col('synthetic:label2')], '.1f')} | {_ms(gap_fid, '.2f')} | "
              f"{_ms(gaps['label1'], '.2f')} | {_ms(gaps['label2'], '.2f')} | "
              f"{_ms([100 * v for v in col('zero_shot:label1')], '.1f')} / "
              f"{_ms([100 * v for v in col('zero_shot:label2')], '.1f')} | "
              f"{_ms([100 * v for v in col('only_private:label1')], '.1f')} / "
              f"{_ms([100 * v for v in col('only_private:label2')], '.1f')} | "
              f"{_ms([r['wall_s'] - r['train_lm_s'] for r in rs], '.0f')} | {_ms(col('learn_s'), '.0f')} | "
              f"{_ms(col('calls'), '.0f')} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", action="store_true", help="print the table of the evaluated runs (after the compare)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--only", default="", help="comma-separated configuration names")
    a = ap.parse_args()
    if a.table:
        table(ART / "runs")
        return
    cfg_dir = ART / "cfg"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for name, c in configs().items():
        if a.only and name not in a.only.split(","):
            continue
        (cfg_dir / f"{name}.yaml").write_text(yaml.safe_dump(c, sort_keys=False), encoding="utf-8")
        names.append(name)
    print(f"wrote {len(names)} configurations under {cfg_dir}")
    paths = " ".join(str(cfg_dir / f"{n}.yaml") for n in names)
    print(f"privtext compare {paths} --real {DATA / 'yelp-real.csv'} --out-dir {ART / 'runs'} --seeds {a.seeds} "
          f"--classifier embedding-logreg --mauve --csv {ART / 'table.csv'}")


if __name__ == "__main__":
    main()
