"""Hostile inputs through the command line: for each, the exit code, the one-line message, and whether anything
was left behind.

    python benchmarks/hostile_inputs.py [--out /tmp/hostile]

Every case runs ``privtext run`` (or ``resume``) as a user would, with the offline n-gram generator and the hashing
embedder (fast). Expected: exit 0 (the input is odd but valid: the run completes) or 2 (a typed error, one line,
naming the bad value), never 1 (an unexpected exception), and a failed start leaves no run directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from harness import write_rows


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    write_rows(path, rows, ["text", "label"])


def _base(tmp: Path, private: Path, out: Path, **kw: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "method": "augpe", "seed": 0,
        "data": {"private": str(private), "public": str(tmp / "public.csv"), "label_columns": ["label"]},
        "generator": {"backend": "ngram", "order": 3}, "embedder": {"backend": "hashing", "dim": 64},
        "privacy": {"epsilon": 4.0, "delta": 1e-6},
        "evolution": {"num_samples": 8, "iterations": 2, "variations": 2},
        "output": str(out),
    }
    for k, v in kw.items():
        if isinstance(v, dict) and isinstance(raw.get(k), dict) and k != "privacy":
            raw[k] = {**raw[k], **v}
        else:
            raw[k] = v
    return raw


def cases(tmp: Path) -> list[tuple[str, dict[str, Any] | None, list[str]]]:
    """(name, config or None, extra CLI args)."""
    words = "the soup was warm and the staff kind the bread fresh and the room quiet".split()
    good = [{"text": " ".join(words[i % 7: i % 7 + 8]) + f" visit {i}", "label": "a" if i % 2 else "b"}
            for i in range(60)]
    priv = [{"text": f"a private note {i} about the {w} we had", "label": "a" if i % 2 else "b"}
            for i, w in enumerate(words * 3)]
    _write_csv(tmp / "public.csv", good)
    _write_csv(tmp / "private.csv", priv[:40])
    _write_csv(tmp / "overlap.csv", good[:5] + priv[:20])
    _write_csv(tmp / "empty.csv", [])
    _write_csv(tmp / "one.csv", priv[:1])
    _write_csv(tmp / "dupes.csv", [priv[0]] * 50)
    _write_csv(tmp / "huge.csv", [{"text": ("word " * 200_000).strip(), "label": "a"},
                                  {"text": ("other " * 170_000).strip(), "label": "b"}])
    (tmp / "nan.csv").write_text("text,label\nfine text here,a\n,b\nNaN,a\n", encoding="utf-8")
    _write_csv(tmp / "unknown_labels.csv", [{**r, "label": "zzz"} for r in priv[:20]] + priv[20:40])
    p = tmp / "private.csv"
    (tmp / "failed").mkdir(exist_ok=True)
    (tmp / "failed" / "config.yaml").write_text("method: augpe\n")
    (tmp / "failed" / "private").mkdir(exist_ok=True)
    (tmp / "failed" / "private" / "ledger.jsonl").write_text("")
    (tmp / "a_file").write_text("not a folder")
    return [
        ("empty corpus", _base(tmp, tmp / "empty.csv", tmp / "o1"), []),
        ("one record", _base(tmp, tmp / "one.csv", tmp / "o2", privacy={"epsilon": 4.0, "delta": 1e-6}), []),
        ("all duplicates", _base(tmp, tmp / "dupes.csv", tmp / "o3"), []),
        ("1 MB documents", _base(tmp, tmp / "huge.csv", tmp / "o4"), []),
        ("NaN / empty texts", _base(tmp, tmp / "nan.csv", tmp / "o5"), []),
        ("unknown labels", _base(tmp, tmp / "unknown_labels.csv", tmp / "o6"), []),
        ("r ≤ p", _base(tmp, p, tmp / "o7", method="secpe", privacy={"secret": {"p": 1e-3, "r": 1e-3}}), []),
        ("p ≥ 1", _base(tmp, p, tmp / "o8", method="secpe", privacy={"secret": {"p": 1.0, "r": 1.0}}), []),
        ("ε ≤ 0", _base(tmp, p, tmp / "o9", privacy={"epsilon": 0.0, "delta": 1e-6}), []),
        ("δ ≥ 1", _base(tmp, p, tmp / "o10", privacy={"epsilon": 4.0, "delta": 1.0}), []),
        ("δ ≥ 1/N", _base(tmp, p, tmp / "o11", privacy={"epsilon": 4.0, "delta": 0.05}), []),
        ("unknown key", _base(tmp, p, tmp / "o12", evolution={"num_sampels": 8}), []),
        ("missing file", _base(tmp, tmp / "nope.csv", tmp / "o13"), []),
        ("public text equal to private", _base(tmp, tmp / "overlap.csv", tmp / "o14"), []),
        ("unwritable output", _base(tmp, p, tmp / "a_file" / "run"), []),
        ("output of a failed run", _base(tmp, p, tmp / "failed"), []),
        ("... replaced with --force", _base(tmp, p, tmp / "failed"), ["--force"]),
    ]


def run_case(tmp: Path, name: str, raw: dict[str, Any], extra: list[str]) -> dict[str, Any]:
    cfg = tmp / f"case-{abs(hash(name))}.yaml"
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    out = Path(raw["output"])
    before = out.exists()
    env = {**os.environ, "PRIVTEXT_QUIET": "1"}
    r = subprocess.run([sys.executable, "-m", "privtext", "run", str(cfg), *extra], env=env, capture_output=True,
                       text=True, timeout=600)
    lines = [x for x in (r.stderr or "").strip().splitlines() if x.strip()]
    message = lines[-1] if lines else ("ok: " + (r.stdout.splitlines()[0] if r.stdout else ""))
    staged = [p.name for p in out.parent.glob(f".{out.name}.starting-*")] if out.parent.exists() else []
    left = "-"
    if r.returncode != 0:
        left = "nothing" if (not out.exists() or before) and not staged else f"LEFT {out}"
    return {"case": name, "exit": r.returncode, "message": message[:160], "left_behind": left,
            "traceback": "Traceback" in (r.stderr or "")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("/tmp/privtext-hostile"))
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    rows = [run_case(args.out, name, raw, extra) for name, raw, extra in cases(args.out) if raw is not None]
    print("| input | exit | message | left behind |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['exit']} | {r['message'].replace('|', '/')} | {r['left_behind']} |")
    bad = [r for r in rows if r["exit"] not in (0, 2) or r["traceback"] or r["left_behind"].startswith("LEFT")]
    print(f"\n{len(rows)} inputs; {len(bad)} ended badly (exit 1, a traceback, or something left behind)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
