"""Learning from the released votes (issue 38) on Yelp (5 000 private reviews) and PubMed (1 000 private
abstracts): Aug-PE, SecPE and WASP with the offline ``lm`` generator, each without learning and with
``evolution.learn: {kind: dpo}``, the 4-gram with and without vote-weighted counts, and dpft on the same
public lm, at ε = 4, run by ``privtext compare`` over seeds.

    PYTHONPATH=src python benchmarks/learn_votes.py [--dataset yelp]          # writes the configurations, prints
                                                                              # the command
    PYTHONPATH=src python benchmarks/learn_votes.py --dataset pubmed --table  # the table of docs/compare.md

Data (benchmarks/compare_methods.py's splits, written by ``prepare_data``):

* Yelp: the 5 000 reviews of yelp/dev.csv are private, yelp/test.csv rows 0–3 999 public (with their labels: the
  lm's training text), rows 4 000–4 999 the real held-out set; both label columns (category, stars), a DP label
  histogram.
* PubMed: pubmed/dev.csv rows 0–999 private, pubmed/test.csv rows 0–3 306 public, rows 3 307–4 306 real; no
  labels, so no label histogram, and the downstream figure is next-word accuracy (a next-word model trained on the
  synthetic abstracts, tested on the real ones).

The ``lm`` generator is the small GPT-2 privtext trains on the public split, here with sequences of 192 tokens and
a cap of 1.2 M training tokens (the default 6 M costs 16+ minutes on the 2-core CPU); it writes at most 128 new
tokens. N = 150 synthetic texts, T = 2 iterations; SecPE at the (p, r) whose μ is that of (4, 10⁻⁵),
random-word secrets, 100 public clusters (compare_methods.py's set-up). DPO at the defaults of docs/learn.md (β
0.01, LoRA rank 8, one epoch a round, the middle rank rejected) with 160 tokens a pair. On Yelp, the levers of
``YELP_LEVERS`` one at a time from those defaults, ``final: model`` (POPri's release), and T = 4 with and without
learning (three learning rounds instead of one). dpft fine-tunes the same public lm (``dpft.lm`` = the
generator's settings, so the cached model is shared) with LoRA rank 8, q = 0.25, 2 epochs (8 steps), lr 5e-3, 128
tokens a record; its control is the same model with 0 epochs.

**Gap closed** is POPri's measure: (run − public-only control) / (real data − control), per run, with the control
the zero-shot baseline of the run's own evaluation (as many samples of the generator, no private signal) and "real
data" the OnlyPrivate baseline (the classifier or next-word model trained on as many private records; for FID,
that many private texts scored against the real set). 0: no better than the generator alone; 1: as good as the
private data. The sd over seeds says how much of it is noise.
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

DATA = ROOT / "artifacts" / "compare" / "data"
#: per dataset: its private file (under DATA), its label columns, where its configurations and runs go
DATASETS: dict[str, dict[str, Any]] = {
    "yelp": {"private": "yelp-private-5000.csv", "labels": ["label1", "label2"], "kind": "reviews"},
    "pubmed": {"private": "pubmed-private.csv", "labels": [], "kind": "abstracts"},
}

#: the lm generator's options in every run (its cache folder added per dataset); benchmarks/learn_lm_build.py trains
#: the same lm with another token budget or shape
LM_OPTIONS: dict[str, Any] = {"max_length": 192, "train_tokens": 1_200_000, "max_new_tokens": 128}


#: the Yelp levers, one at a time from the DPO defaults: name → (section of evolution.learn, key, value).
#: Steps per iteration: 4 epochs over each round's pairs; β; pairs per group; the rejected rank (the last of a
#: chunk of 10 against the middle); LoRA rank
YELP_LEVERS: dict[str, tuple[str, str, Any]] = {
    "augpe-dpo-epochs4": ("dpo", "epochs", 4),
    "augpe-dpo-beta0.1": ("dpo", "beta", 0.1),
    "augpe-dpo-pairs4": ("pairs", "pairs_per_group", 4),
    "augpe-dpo-rejectlast": ("pairs", "reject_rank", 10),
    "augpe-dpo-r32": ("dpo", "lora_r", 32),
}


def art(dataset: str) -> Path:
    """Where a dataset's configurations (cfg/), runs (runs/) and lm cache go."""
    return ROOT / "artifacts" / f"learn_{dataset}"


def _named(c: dict[str, Any], dataset: str, name: str) -> dict[str, Any]:
    c["name"] = name
    c["output"] = str(art(dataset) / "runs" / name)
    return c


def configs(dataset: str = "yelp") -> dict[str, dict[str, Any]]:
    """The configurations of one dataset, by name."""
    sys.path.insert(0, str(Path(__file__).parent))
    from compare_methods import prepare_data, secret_budget

    data = prepare_data(5000)
    d = DATASETS[dataset]
    labelled = bool(d["labels"])
    lm = {"backend": "lm", "cache_dir": str(art(dataset) / "lm-cache"), **LM_OPTIONS}
    base: dict[str, Any] = {
        "seed": 0,
        "data": {"private": str(data / d["private"]), "public": str(data / f"{dataset}-public.csv"),
                 "text_column": "text", "label_columns": d["labels"]},
        "embedder": {"backend": "sentence-transformers", "cache_dir": str(ROOT / "artifacts" / "compare" /
                                                                          "embed-cache")},
        "generator": lm,
        "synthesis": {"num_samples": 150, **({"label_distribution": {"kind": "dp"}} if labelled else {})},
        "evolution": {"iterations": 2},
    }
    public_labels = {"label_distribution": {"kind": "public" if labelled else "uniform"}}
    methods = {
        "augpe": {"method": "augpe", "privacy": {"epsilon": 4.0, "delta": 1e-5}},
        "secpe": {"method": "secpe", "privacy": {"secret": secret_budget()},
                  "synthesis": {**base["synthesis"], **public_labels},
                  "secpe": {"clusters": 100, "detector": {"name": "random_words", "quantile": 0.2,
                                                          "from_private": True}}},
    }
    learn = {"none": {"kind": "none"}, "dpo": {"kind": "dpo", "dpo": {"max_length": 160}}}
    out = {}
    for m, extra in methods.items():
        for tag, opts in learn.items():
            c = copy.deepcopy(base) | copy.deepcopy(extra)
            c["evolution"]["learn"] = opts
            out[f"{m}-{tag}"] = _named(c, dataset, f"{m}-{tag}")
    if dataset == "pubmed":  # kind: rerank on data unlike Yelp (unlabelled, long texts), at T = 2 as the rows here
        for m in methods:
            c = copy.deepcopy(out[f"{m}-none"])
            c["evolution"]["learn"] = {"kind": "rerank", "rerank": {"candidates": 2}}
            out[f"{m}-rerank"] = _named(c, dataset, f"{m}-rerank")
        # the lm the "why" below blames, trained on the generator's default 6 M-token cap instead of 1.2 M: does
        # learning help once the lm writes better abstracts? (Aug-PE without learning and with DPO's defaults)
        for tag in learn:
            c = copy.deepcopy(out[f"augpe-{tag}"])
            c["generator"]["train_tokens"] = 6_000_000
            out[f"augpe-{tag}-lm6m"] = _named(c, dataset, f"augpe-{tag}-lm6m")
    if dataset == "yelp":  # one lever at a time, each from Aug-PE's DPO defaults (docs/learn.md)
        for name, (section, key, value) in YELP_LEVERS.items():
            lever = copy.deepcopy(out["augpe-dpo"])
            lever["evolution"]["learn"].setdefault(section, {})[key] = value
            out[name] = _named(lever, dataset, name)
        lever = copy.deepcopy(out["augpe-dpo"])  # POPri's release: the synthetic set written by the trained lm
        lever["evolution"]["final"] = "model"
        out["augpe-dpo-model"] = _named(lever, dataset, "augpe-dpo-model")
        for tag in learn:  # more rounds: T = 4, so three learning rounds shape the population (T = 2: one)
            c = copy.deepcopy(out[f"augpe-{tag}"])
            c["evolution"]["iterations"] = 4
            out[f"augpe-{tag}-t4"] = _named(c, dataset, f"augpe-{tag}-t4")
        # the levers that came closest, together, over the three rounds of T = 4: LoRA rank 32 and the last of 10
        # rejected (pairs_per_group 4 is a no-op beside it: rank R + i − 1 falls outside the group for i > 1, so
        # one pair a group, as the runs' learn.json counts show)
        combined = {"reject_rank": 10, "pairs_per_group": 4}
        c = copy.deepcopy(out["augpe-dpo-t4"])
        c["evolution"]["learn"]["dpo"]["lora_r"] = 32
        c["evolution"]["learn"]["pairs"] = dict(combined)
        out["augpe-dpo-t4-combined"] = _named(c, dataset, "augpe-dpo-t4-combined")
        # more pairs a round, fixed before it was run: held-out pairs of other seeds are ordered better after
        # training on 1 674 pairs than on 236 (benchmarks/learn_generalise.py), so rank i against rank 4 + i − 1,
        # i = 1..4 (a group of 7 gives 4 pairs, a chunk of 10 gives 4), LoRA rank 32, T = 4
        c = copy.deepcopy(out["augpe-dpo-t4"])
        c["evolution"]["learn"]["dpo"]["lora_r"] = 32
        c["evolution"]["learn"]["pairs"] = {"reject_rank": 4, "pairs_per_group": 4}
        out["augpe-dpo-t4-morepairs"] = _named(c, dataset, "augpe-dpo-t4-morepairs")
        # the per-token DPO loss (dpo.loss: sigmoid_norm), fixed before it was run: the summed reward's held-out
        # accuracy is mostly length (benchmarks/learn_generalise.py); β 2 ordered the held-out pairs best per token
        # of the settings tried there (0.66); the combined levers otherwise; run on seeds 5-7, which chose nothing
        c = copy.deepcopy(out["augpe-dpo-t4-combined"])
        c["evolution"]["learn"]["dpo"] |= {"loss": "sigmoid_norm", "beta": 2.0}
        out["augpe-dpo-t4-norm"] = _named(c, dataset, "augpe-dpo-t4-norm")
        # RPO (dpo.sft_weight 0.1), fixed before it was run: one DPO round lowered the held-out chosen texts by 0.94
        # nats per token and the rejected by 1.06; α 0.1 kept both within 0.03 (learn_generalise.py); seeds 5-7
        c = copy.deepcopy(out["augpe-dpo-t4-combined"])
        c["evolution"]["learn"]["dpo"]["sft_weight"] = 0.1
        out["augpe-dpo-t4-rpo"] = _named(c, dataset, "augpe-dpo-t4-rpo")
        # kind: rerank (privtext.learn.rerank), fixed before it was run on seeds 5-7: the lm's adapter orders held-out
        # pairs at 0.60-0.66 and a logistic probe on MiniLM embedding differences at 0.82 (learn_ceiling.py), so the
        # probe, refitted after each release on every pair so far, keeps the better of 2 samples; the pairs as in
        # augpe-dpo-t4 (POPri's defaults); it ran before rerank.labels existed, so with one w (labels: none)
        c = copy.deepcopy(out["augpe-none-t4"])
        c["evolution"]["learn"] = {"kind": "rerank", "rerank": {"candidates": 2, "labels": "none"}}
        out["augpe-rerank-t4"] = _named(c, dataset, "augpe-rerank-t4")
        # the same two rows for SecPE (its released cluster votes give the pairs), fixed before they were run
        for tag in learn:
            c = copy.deepcopy(out[f"secpe-{tag}"])
            c["evolution"]["iterations"] = 4
            if tag == "dpo":
                c["evolution"]["learn"]["dpo"]["lora_r"] = 32
                c["evolution"]["learn"]["pairs"] = dict(combined)
            name = "secpe-none-t4" if tag == "none" else "secpe-dpo-t4-combined"
            out[name] = _named(c, dataset, name)
        c = copy.deepcopy(out["secpe-none-t4"])
        c["evolution"]["learn"] = {"kind": "rerank", "rerank": {"candidates": 2, "labels": "none"}}
        out["secpe-rerank-t4"] = _named(c, dataset, "secpe-rerank-t4")
        # rerank.labels: columns (the default since), fixed before they were run: one w may favour texts typical of
        # the corpus rather than of their label; offline, on pairs of other seeds, per-column terms ordered 0.89 of
        # held-out pairs against 0.78, and the halves they kept trained better classifiers (learn_rerank_labels.py)
        for m in ("augpe", "secpe"):
            c = copy.deepcopy(out[f"{m}-rerank-t4"])
            c["evolution"]["learn"]["rerank"]["labels"] = "columns"
            out[f"{m}-rerankcol-t4"] = _named(c, dataset, f"{m}-rerankcol-t4")
        # the compute-matched control, fixed before it was run: no learning, but the vote chooses among as many
        # texts as the reranker writes (10 variations a parent instead of best-of-2 of 5; iteration 0 as before:
        # 900 + 3 × 1 500 = 5 400 texts written), so a gain of the reranker is not only more samples
        for m in ("augpe", "secpe"):
            c = copy.deepcopy(out[f"{m}-none-t4"])
            c["evolution"] |= {"variations": 11, "initial_multiplier": 6}
            out[f"{m}-none-t4-L11"] = _named(c, dataset, f"{m}-none-t4-L11")
    # WASP with the same lm as its one generator (its Top-Q nearest/furthest votes give the pairs), 2 voted rounds
    for tag, opts in learn.items():
        c = copy.deepcopy(base)
        c |= {"method": "wasp", "privacy": {"epsilon": 4.0, "delta": 1e-5}, "generators": [{**lm, "name": "lm"}]}
        del c["generator"]
        c["synthesis"] = {**base["synthesis"], **public_labels}
        c["evolution"]["learn"] = opts
        out[f"wasp-{tag}"] = _named(c, dataset, f"wasp-{tag}")
    if dataset == "yelp":  # WASP with two generators it weights (the lm, which learns, and the 4-gram, which
        # does not), N = 300 over 3 rounds: more samples per label group for its Top-Q pairs than wasp-*'s 150 / 2
        for tag in learn:
            c = copy.deepcopy(out[f"wasp-{tag}"])
            c["generators"] = [{**lm, "name": "lm"}, {"backend": "ngram", "name": "4gram", "order": 4}]
            c["synthesis"]["num_samples"] = 300
            c["evolution"]["iterations"] = 3
            if tag == "dpo":
                c["evolution"]["learn"]["generators"] = ["lm"]  # the 4-gram writes as it is
            out[f"wasp2-{tag}"] = _named(c, dataset, f"wasp2-{tag}")
    # the n-gram analogue: Aug-PE with the 4-gram, its counts re-estimated with the voted texts (ngram_counts)
    for tag, opts in (("none", {"kind": "none"}), ("counts", {"kind": "ngram_counts"})):
        c = copy.deepcopy(out["augpe-none"])
        c["generator"] = {"backend": "ngram", "order": 4}
        c["evolution"]["learn"] = opts
        out[f"augpe-ngram-{tag}"] = _named(c, dataset, f"augpe-ngram-{tag}")
    # dpft on the same public lm (LoRA), and its control (0 epochs: the public lm alone)
    dpft = {"sampling_rate": 0.25, "epochs": 2, "max_grad_norm": 1.0, "lr": 5e-3, "max_length": 128,
            "lora": {"r": 8}, "max_new_tokens": 128, "lm": {k: v for k, v in lm.items() if k != "backend"}}
    for name, epochs in (("dpft", 2), ("dpft-control", 0)):
        c = copy.deepcopy(base)
        del c["generator"], c["evolution"]
        c |= {"method": "dpft", "privacy": {"epsilon": 4.0, "delta": 1e-5},
              "dpft": {**copy.deepcopy(dpft), "epochs": epochs}}
        out[name] = _named(c, dataset, name)
    return out


def _load(run: Path) -> dict[str, Any]:
    """One run's figures: its evaluation (FID, MAUVE, accuracies or next-word accuracy), the zero-shot and
    OnlyPrivate baselines of the same evaluation (private/evaluation.json: their models trained on private
    records), wall time, generator calls and the texts they wrote."""
    pub = json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
    priv = json.loads((run / "private" / "evaluation.json").read_text(encoding="utf-8"))
    metrics = json.loads((run / "private" / "metrics.json").read_text(encoding="utf-8"))
    out: dict[str, Any] = {"fid": pub["fid"]["fid"], "fid_zero_shot": (pub.get("fid_zero_shot") or {}).get("fid"),
                           "mauve": (pub.get("mauve") or {}).get("mauve"),
                           "wall_s": metrics.get("wall_seconds"),
                           "train_lm_s": (metrics.get("stages", {}).get("setup_generator") or {}).get("seconds", 0.0),
                           "learn_s": (metrics.get("stages", {}).get("learning") or {}).get("seconds", 0.0),
                           "calls": metrics.get("counters", {}).get("llm_calls"),
                           "texts": metrics.get("counters", {}).get("llm_texts"),
                           "n": sum(1 for line in (run / "synthetic.jsonl").open(encoding="utf-8") if line.strip())}
    if priv.get("next_word"):
        for setname in ("synthetic", "zero_shot", "only_private"):
            out[f"{setname}:next_word"] = (priv["next_word"].get(setname) or {}).get("accuracy")
        return out
    res = priv["downstream"]["results"]["embedding-logreg"]
    for col in ("label1", "label2"):
        for setname in ("synthetic", "zero_shot", "only_private"):
            # dpft's evaluation has no zero-shot set (its control run stands in for it, in table())
            out[f"{setname}:{col}"] = (res.get(setname) or {}).get(col, {}).get("accuracy")
    return out


def _fid_real(dataset: str, n: int) -> float:
    """FID of ``n`` private texts (a seeded sample, no privacy: the "real data" end of the gap) against the
    real held-out set, on the MiniLM embeddings the runs are scored with."""
    from harness import offline, read_rows, use_src

    use_src()
    offline()
    import numpy as np

    from privtext.evaluate.embedding import resolve_embedder
    from privtext.evaluate.fid import fid

    emb = resolve_embedder(None)
    private = [r["text"] for r in read_rows(DATA / DATASETS[dataset]["private"])]
    pick = np.random.default_rng(0).choice(len(private), size=n, replace=False)
    real = [r["text"] for r in read_rows(DATA / f"{dataset}-real.csv")]
    return float(fid(emb.embed([private[i] for i in pick]), emb.embed(real)).fid)


def _ms(vals: list[float], fmt: str = ".4f") -> str:
    vals = [v for v in vals if v is not None and math.isfinite(v)]
    if not vals:
        return "—"
    if len(vals) == 1:
        return format(vals[0], fmt)
    return f"{statistics.fmean(vals):{fmt}} ± {statistics.stdev(vals):{fmt}}"


def table(dataset: str) -> None:
    """Mean ± sd over seeds per configuration, and POPri's gap closed per run (then mean ± sd): accuracy
    (acc − zero-shot) / (OnlyPrivate − zero-shot) against the same evaluation's baselines; FID
    (FID_zero-shot − FID) / (FID_zero-shot − FID_private), FID_private that of as many private texts as the run
    released (FID depends on the sample size). dpft's zero-shot is its control run's mean (the public lm alone)."""
    runs_dir = art(dataset) / "runs"
    by: dict[str, list[dict[str, Any]]] = {}
    for run in sorted(runs_dir.iterdir()) if runs_dir.is_dir() else []:
        if (run / "evaluation.json").exists() and (run / "private" / "evaluation.json").exists():
            by.setdefault(run.name.rsplit("-s", 1)[0], []).append(_load(run))
    if not by:
        raise SystemExit(f"{runs_dir}: no evaluated runs")
    cols = ["label1", "label2"] if DATASETS[dataset]["labels"] else ["next_word"]
    # dpft has no zero-shot baseline in its evaluation: its public-only control is the dpft-control run (the same
    # public lm, 0 epochs), whose mean over seeds stands in for it
    control = by.get("dpft-control", [])
    for r in (r for name in ("dpft", "dpft-control") for r in by.get(name, [])):
        r["fid_zero_shot"] = statistics.fmean(c["fid"] for c in control)
        for c in cols:
            r[f"zero_shot:{c}"] = statistics.fmean(x[f"synthetic:{c}"] for x in control)
    words = {"label1": "category", "label2": "stars", "next_word": "next-word"}
    f_real = {n: _fid_real(dataset, n) for n in sorted({r["n"] for rs in by.values() for r in rs})}
    print(f"FID of n private {DATASETS[dataset]['kind']} against the real set (the gap's real-data end): "
          + ", ".join(f"n = {n}: {f:.4f}" for n, f in f_real.items()))
    print("| config | seeds | FID ↓ | MAUVE ↑ | " + " | ".join(f"{words[c]} acc" for c in cols) + " | gap closed: FID | "
          + " | ".join(f"gap closed: {words[c]}" for c in cols) + " | zero-shot " + " / ".join(words[c] for c in cols)
          + " | OnlyPrivate " + " / ".join(words[c] for c in cols) + " | wall s (less lm training) | learning s "
          "| calls | texts written |")
    print("|---" * (11 + 2 * len(cols)) + "|")
    for name, rs in by.items():
        def col(k: str, rs: list[dict[str, Any]] = rs) -> list[float]:
            return [r[k] for r in rs]

        def pct(k: str) -> str:
            return _ms([100 * v for v in col(k)], ".2f" if k.endswith("next_word") else ".1f")

        gap_fid = [(r["fid_zero_shot"] - r["fid"]) / (r["fid_zero_shot"] - f_real[r["n"]]) for r in rs]
        gaps = {c: [(r[f"synthetic:{c}"] - r[f"zero_shot:{c}"]) / (r[f"only_private:{c}"] - r[f"zero_shot:{c}"])
                    for r in rs] for c in cols}
        print(f"| {name} | {len(rs)} | {_ms(col('fid'))} | {_ms(col('mauve'), '.3f')} | "
              + " | ".join(pct(f"synthetic:{c}") for c in cols) + f" | {_ms(gap_fid, '.2f')} | "
              + " | ".join(_ms(gaps[c], ".2f") for c in cols) + " | "
              + " / ".join(pct(f"zero_shot:{c}") for c in cols) + " | "
              + " / ".join(pct(f"only_private:{c}") for c in cols) + " | "
              f"{_ms([r['wall_s'] - r['train_lm_s'] for r in rs], '.0f')} | {_ms(col('learn_s'), '.0f')} | "
              f"{_ms(col('calls'), '.0f')} | {_ms(col('texts'), '.0f')} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", choices=sorted(DATASETS), default="yelp")
    ap.add_argument("--table", action="store_true", help="print the table of the evaluated runs (after the compare)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--only", default="", help="comma-separated configuration names")
    a = ap.parse_args()
    if a.table:
        table(a.dataset)
        return
    cfg_dir = art(a.dataset) / "cfg"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for name, c in configs(a.dataset).items():
        if a.only and name not in a.only.split(","):
            continue
        (cfg_dir / f"{name}.yaml").write_text(yaml.safe_dump(c, sort_keys=False), encoding="utf-8")
        names.append(name)
    print(f"wrote {len(names)} configurations under {cfg_dir}")
    paths = " ".join(str(cfg_dir / f"{n}.yaml") for n in names)
    print(f"privtext compare {paths} --real {DATA / f'{a.dataset}-real.csv'} --out-dir {art(a.dataset) / 'runs'} "
          f"--seeds {a.seeds} --classifier embedding-logreg --mauve --csv {art(a.dataset) / 'table.csv'}")


if __name__ == "__main__":
    main()
