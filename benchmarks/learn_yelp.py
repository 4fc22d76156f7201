"""Learning from the released votes on Yelp (issue 38): Aug-PE and SecPE with the offline ``lm`` generator, each
without learning and with ``evolution.learn: {kind: dpo}``, at ε = 4, run by ``privtext compare`` over seeds.

    PYTHONPATH=src python benchmarks/learn_yelp.py                 # writes the configurations, prints the command
    PYTHONPATH=src python benchmarks/learn_yelp.py --table CSV     # the table of docs/compare.md, with gap closed

Data (benchmarks/compare_methods.py's splits, written by ``prepare_data``): the 5 000 Yelp reviews of
yelp/dev.csv are private, yelp/test.csv rows 0–3 999 public (with their labels: the lm's training text), rows
4 000–4 999 the real held-out set. The ``lm`` generator is the small GPT-2 privtext trains on the public split,
here with sequences of 192 tokens and a cap of 1.2 M training tokens (the default 6 M costs 16+ minutes on the
2-core CPU); it writes at most 128 new tokens. N = 150 synthetic reviews, T = 2 iterations, both label columns
(category, stars), a DP label histogram; SecPE at the (p, r) whose μ is that of (4, 10⁻⁵), random-word secrets,
100 public clusters (compare_methods.py's set-up). DPO at the defaults of docs/learn.md (β 0.01, LoRA rank 8, one
epoch a round, the middle rank rejected) with 160 tokens a pair.

**Gap closed** is POPri's measure: (run − public-only control) / (real data − control), per metric, with the
control the zero-shot baseline of ``privtext compare`` (the generator's own samples, no private signal) and "real
data" the OnlyPrivate baseline (the classifier trained on the private records themselves; for FID and MAUVE the
private records scored against the real set). A value above 0 means the run moved toward the real data; the sd
over seeds says how much of that is noise.
"""

from __future__ import annotations

import argparse
import copy
import csv
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
    return out


def _num(x: str) -> float | None:
    try:
        v = float(x.strip().rstrip("%"))
    except (ValueError, AttributeError):
        return None
    return v if math.isfinite(v) else None


def table(path: Path) -> None:
    """Mean ± sd per configuration over seeds, and the gap closed per metric, from ``privtext compare --csv``."""
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    if not rows:
        raise SystemExit(f"{path}: no rows")
    name_col = next(c for c in ("config", "name", "run") if c in rows[0])
    metrics = [c for c in rows[0] if c != name_col and _num(rows[0][c]) is not None]
    lower_better = {m for m in metrics if "fid" in m.lower() or "wall" in m.lower()}
    by: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        by.setdefault(r[name_col].rsplit("-s", 1)[0] if "-s" in r[name_col] else r[name_col], []).append(r)
    ctrl = next((k for k in by if "zero" in k.lower()), None)
    real = next((k for k in by if "onlyprivate" in k.lower().replace("-", "").replace("_", "")), None)

    def mean(k: str, m: str) -> float | None:
        vals = [v for v in (_num(r[m]) for r in by[k]) if v is not None]
        return statistics.fmean(vals) if vals else None

    print("| config | n | " + " | ".join(metrics) + " | " + " | ".join(f"gap closed ({m})" for m in metrics
                                                                          if m not in lower_better or "fid" in m.lower())
          + " |")
    for k, rs in by.items():
        cells = []
        for m in metrics:
            vals = [v for v in (_num(r[m]) for r in rs) if v is not None]
            if not vals:
                cells.append("—")
            elif len(vals) == 1:
                cells.append(f"{vals[0]:.4g}")
            else:
                cells.append(f"{statistics.fmean(vals):.4g} ± {statistics.stdev(vals):.2g}")
        gaps = []
        for m in metrics:
            if m in lower_better and "fid" not in m.lower():
                continue
            c, r_, v = (mean(ctrl, m) if ctrl else None), (mean(real, m) if real else None), mean(k, m)
            gaps.append("—" if None in (c, r_, v) or r_ == c else f"{(v - c) / (r_ - c):+.2f}")
        print(f"| {k} | {len(rs)} | " + " | ".join(cells) + " | " + " | ".join(gaps) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", type=Path, default=None, help="print the table from a `privtext compare --csv` file")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--only", default="", help="comma-separated configuration names")
    a = ap.parse_args()
    if a.table:
        table(a.table)
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
