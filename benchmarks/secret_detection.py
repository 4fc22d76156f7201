"""PII secret detectors scored against presidio-research's synthetic gold spans.

    python benchmarks/secret_detection.py [--data ../shared/data/pii/synth_dataset_v2.json]
                                          [--detectors regex,presidio] [--json OUT.json] [--limit N]

A detector spec may be a name or a JSON mapping, e.g. ``--detectors 'regex;{"name":"presidio","score_threshold":0.5}'``
(separate specs with ``;`` when any of them is JSON).

Matching (see :mod:`privtext.secrets.evaluate`): a predicted span counts when it overlaps (≥ 1 shared character) a
gold span of the mapped label. Type mapping, ours → presidio-research: EMAIL → EMAIL_ADDRESS, PHONE → PHONE_NUMBER,
CREDIT_CARD → CREDIT_CARD, US_SSN → US_SSN, IP_ADDRESS → IP_ADDRESS, IBAN → IBAN_CODE, URL → DOMAIN_NAME (the
dataset's DOMAIN_NAME values are URLs), DATE_OF_BIRTH and DATE → DATE_TIME, US_DRIVER_LICENSE → US_DRIVER_LICENSE.
Recall is per gold label, precision per predicted type; "exact" recall needs identical boundaries. The record line
scores the public/private decision for records holding an e-mail, phone, card, SSN, IP, IBAN or URL.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "pii" / "synth_dataset_v2.json"
# the gold labels a pattern detector can be held to (the others need NER: PERSON, STREET_ADDRESS, ...)
PATTERN_LABELS = ("EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "US_SSN", "IP_ADDRESS", "IBAN_CODE",
                  "DOMAIN_NAME", "DATE_TIME", "US_DRIVER_LICENSE")
# the record-level line: is a record holding an e-mail, phone, card, SSN, IP, IBAN or URL marked private?
RECORD_LABELS = ("EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "US_SSN", "IP_ADDRESS", "IBAN_CODE", "DOMAIN_NAME")


def _parse_specs(arg: str) -> list[Any]:
    parts = arg.split(";") if ";" in arg or arg.strip().startswith("{") else arg.split(",")
    out: list[Any] = []
    for p in parts:
        p = p.strip()
        if not p:
            continue
        out.append(json.loads(p) if p.startswith(("{", "[")) else p)
    return out


def _label(spec: Any) -> str:
    return spec if isinstance(spec, str) else json.dumps(spec, sort_keys=True)


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def run(data: Path, specs: list[Any], limit: int | None) -> list[dict[str, Any]]:
    from privtext.secrets import build_detector
    from privtext.secrets.evaluate import PRIVTEXT_TO_GOLD, load_presidio_research, score_spans

    texts, gold = load_presidio_research(data)
    if limit:
        texts, gold = texts[:limit], gold[:limit]
    results = []
    for spec in specs:
        t0 = time.perf_counter()
        det = build_detector(spec)
        t_build = time.perf_counter() - t0
        t0 = time.perf_counter()
        m = det.detect(texts)
        t_detect = time.perf_counter() - t0
        scores = score_spans(texts, gold, m, record_labels=RECORD_LABELS)
        results.append({
            "detector": _label(spec), "n_records": len(texts), "build_s": t_build, "detect_s": t_detect,
            "type_map": {t: PRIVTEXT_TO_GOLD.get(t, t) for t in sorted(set(m.types))},
            "summary": m.summary(), **scores,
        })
    return results


def print_tables(results: list[dict[str, Any]]) -> None:
    for r in results:
        print(f"\n## {r['detector']}  ({r['n_records']} records; build {r['build_s']:.1f} s, "
              f"detect {r['detect_s']:.1f} s)\n")
        print("| gold label | gold spans | recall | exact recall | our type(s) | predicted | precision |")
        print("|---|---:|---:|---:|---|---:|---:|")
        rec = r["recall"]
        prec = r["precision"]
        inv: dict[str, list[str]] = {}
        for t, g in r["type_map"].items():
            inv.setdefault(g, []).append(t)
        labels = [lab for lab in PATTERN_LABELS if lab in rec or lab in inv]
        for lab in labels:
            g = rec.get(lab, {"gold": 0, "recall": None, "exact_recall": None})
            ours = inv.get(lab, [])
            n_pred = sum(prec[t]["predicted"] for t in ours)
            tp = sum(prec[t]["tp"] for t in ours)
            p = tp / n_pred if n_pred else None
            rcl = g["recall"] if ours else None
            ex = g["exact_recall"] if ours else None
            print(f"| {lab} | {g['gold']} | {_fmt(rcl)} | {_fmt(ex)} | {', '.join(ours) or '—'} | {n_pred} | "
                  f"{_fmt(p)} |")
        extra = [t for t in prec if r["type_map"].get(t, t) not in PATTERN_LABELS]
        for t in extra:
            print(f"| (no gold label) | — | — | — | {t} | {prec[t]['predicted']} | {_fmt(prec[t]['precision'])} |")
        rr = r["records"]
        print(f"\nrecords holding {', '.join(RECORD_LABELS)}: precision {_fmt(rr['precision'])}, recall {_fmt(rr['recall'])} "
              f"(tp {rr['tp']}, fp {rr['fp']}, fn {rr['fn']})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--detectors", default="regex,presidio")
    ap.add_argument("--json", type=Path, default=None, help="also write the full scores as JSON")
    ap.add_argument("--limit", type=int, default=None, help="score only the first N records")
    args = ap.parse_args(argv)
    if not args.data.is_file():
        print(f"data file {args.data} not found (see ../shared/data/README.md)", file=sys.stderr)
        return 2
    results = run(args.data, _parse_specs(args.detectors), args.limit)
    print_tables(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
