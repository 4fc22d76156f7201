"""Share of review words and of medical words in the texts of runs (a rough domain indicator for docs/dpft.md's
out-of-domain dpft runs: did fine-tuning on Yelp reviews move a PubMed model's samples away from abstracts and
towards reviews?), next to the same shares in the real Yelp split and the PubMed public split.

    python benchmarks/domain_words.py artifacts/compare/runs/yelp-ood-sgd/*/ [--real artifacts/compare/data/yelp-real.csv]

Both lists are fixed here and were not chosen from the private rows; shares are of all lower-cased word tokens.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
from pathlib import Path

REVIEW = {"i", "my", "we", "was", "great", "place", "food", "good", "service", "you", "me", "they", "were", "it",
          "had", "here", "love", "staff", "time", "like"}
MEDICAL = {"patients", "study", "cells", "clinical", "cancer", "disease", "results", "treatment", "methods",
           "analysis", "expression", "protein", "associated", "studies", "patient"}


def shares(texts: list[str]) -> tuple[float, float, float]:
    """(% review words, % medical words, mean words per text)."""
    toks = [re.findall(r"[a-z]+", t.lower()) for t in texts]
    total = max(sum(map(len, toks)), 1)
    return (100 * sum(w in REVIEW for t in toks for w in t) / total,
            100 * sum(w in MEDICAL for t in toks for w in t) / total,
            statistics.mean(len(t.split()) for t in texts) if texts else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--real", type=Path, action="append", default=[], help="CSV files with a text column")
    args = ap.parse_args()
    print(f"{'texts':60s} {'review %':>9s} {'medical %':>10s} {'words':>6s}")
    for run in args.runs:
        texts = [json.loads(line)["text"] for line in (run / "synthetic.jsonl").open(encoding="utf-8")]
        r, m, w = shares(texts)
        print(f"{run!s:60s} {r:9.2f} {m:10.2f} {w:6.1f}")
    for path in args.real:
        with path.open(encoding="utf-8", newline="") as f:
            texts = [r["text"] for r in csv.DictReader(f)]
        r, m, w = shares(texts)
        print(f"{path!s:60s} {r:9.2f} {m:10.2f} {w:6.1f}")


if __name__ == "__main__":
    main()
