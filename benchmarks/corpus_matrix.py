"""The corpus matrix (issue 35): every method with its default configuration on corpora of different shapes.

Corpora (``benchmarks/corpora.py`` writes them under ``artifacts/corpora/``): short support messages (Banking77,
10 intents), short clinic notes with planted secrets (the demo's generator), reviews (Yelp), long unlabelled
abstracts (PubMed). Set-ups:

* ``labelled`` — the public text has the label columns;
* ``declared`` — unlabelled public text, the label values declared in ``data.label_values``;
* ``none`` — no labels at all.

Every cell is a real ``privtext run`` of a configuration that names only what a user must (the files, the columns,
the label declaration, the budget: ε = 4, δ = 1e-5; DP-KPS pure ε = 4; SecPE (p, r) = (1e-4, 1e-2) with the
default secret detector, plus the demo's declared name and record-number lists on the clinic corpus), so every
other setting is the default. It records:

* ``outcome`` — ``finished``, or ``refused`` (exit code 2 with its one-line message, and whether the run folder was
  left behind: it must not be);
* ``private`` and the statement's first words (a false NOT PRIVATE is a bug);
* the wall time of the run on this machine, and the load average while it ran (the machine is shared);
* downstream accuracy per label column (``embedding-logreg`` trained on the synthetic set, tested on the corpus's
  real held-out rows), with the real rows' majority class beside it; FID to the real rows.

    python benchmarks/corpora.py                                   # the corpora (seconds)
    python benchmarks/corpus_matrix.py                             # every cell (hours on 2 cores)
    python benchmarks/corpus_matrix.py --cells tickets:declared --methods augpe,wasp
    python benchmarks/corpus_matrix.py --table                     # the table of the results so far (markdown)

Results go to ``artifacts/corpus_matrix/results.json`` (one entry per cell, kept across invocations);
``--table`` prints the markdown table docs/corpus-matrix.md holds.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from harness import ROOT, read_rows, use_src

CORPORA = ROOT / "artifacts" / "corpora"
OUT = ROOT / "artifacts" / "corpus_matrix"
METHODS = ("augpe", "secpe", "wasp", "dpkps", "dpft")

#: corpus → (text column, label columns, id column)
SHAPES: dict[str, tuple[str, list[str], str | None]] = {
    "tickets": ("message", ["intent"], "ticket_id"),
    "clinic": ("text", ["department"], None),
    "yelp": ("text", ["label1", "label2"], None),
    "pubmed": ("text", [], None),
}
#: corpus:set-up cells (pubmed has no labels)
CELLS = ("tickets:labelled", "tickets:declared", "tickets:none", "clinic:labelled", "clinic:declared",
         "clinic:none", "yelp:labelled", "yelp:declared", "yelp:none", "pubmed:none")



def _unlabelled_copy(src: Path, text_column: str, dest: Path) -> Path:
    """The public file without its label columns (the ``declared`` set-up on a labelled corpus)."""
    if not dest.exists():
        rows = read_rows(src)
        with open(dest, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=[text_column])
            w.writeheader()
            w.writerows({text_column: r[text_column]} for r in rows)
    return dest


def cell_config(corpus: str, setup: str, method: str, out: Path) -> dict[str, Any]:
    """The configuration a user writes for one cell (module docstring): files, columns, labels, budget."""
    text, labels, id_col = SHAPES[corpus]
    folder = CORPORA / ("tickets-labelled" if (corpus, setup) == ("tickets", "labelled") else corpus)
    public = folder / "public.csv"
    private_rows = read_rows(folder / "private.csv")
    data: dict[str, Any] = {"private": str(folder / "private.csv"), "public": str(public), "text_column": text}
    if id_col:
        data["id_column"] = id_col
    if setup == "labelled":
        data["label_columns"] = labels
    elif setup == "declared":
        if corpus != "tickets":
            data["public"] = str(_unlabelled_copy(public, text, folder / "public-unlabelled.csv"))
        # the schema a user knows: the label values (here read off the private file, as its owner would list them)
        data["label_columns"] = labels
        data["label_values"] = {c: sorted({r[c] for r in private_rows}) for c in labels}
    privacy: dict[str, Any] = {"epsilon": 4.0, "delta": 1e-5}
    if method == "dpkps":
        privacy = {"epsilon": 4.0}
    elif method == "secpe":
        privacy = {"secret": {"p": 1e-4, "r": 1e-2}}
    cfg: dict[str, Any] = {"method": method, "data": data, "privacy": privacy, "output": str(out)}
    if method == "secpe" and corpus == "clinic":
        cfg["secpe"] = {"detector": ["regex",
                                     {"name": "explicit", "file": str(folder / "patient_names.txt"),
                                      "type": "PATIENT_NAME"},
                                     {"name": "explicit", "file": str(folder / "record_numbers.txt"),
                                      "type": "MRN"}]}
    return cfg


def _majority(real: Path, column: str) -> float:
    counts = Counter(r[column] for r in read_rows(real))
    return max(counts.values()) / sum(counts.values())


def run_cell(corpus: str, setup: str, method: str, *, evaluate: bool = True) -> dict[str, Any]:
    """Run one cell with ``privtext run`` (and evaluate it); returns its record."""
    work = OUT / "runs" / f"{corpus}-{setup}-{method}"
    out = work / "run"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    cfg = cell_config(corpus, setup, method, out)
    cfg_path = work / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "privtext", "-q", "run", str(cfg_path)], capture_output=True,
                          text=True, env=env, cwd=work)
    wall = time.perf_counter() - t0
    rec: dict[str, Any] = {"corpus": corpus, "setup": setup, "method": method, "wall_seconds": round(wall, 1),
                           "load": round((load0 + os.getloadavg()[0]) / 2, 1), "exit_code": proc.returncode}
    if proc.returncode not in (0, 3) or not (out / "privacy.json").exists():  # 3: finished, an audit failed
        msg = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["(no message)"])[-1]
        rec.update(outcome="refused" if proc.returncode == 2 else "failed", message=msg[:400],
                   folder_left=out.exists())
        return rec
    st = json.loads((out / "privacy.json").read_text(encoding="utf-8"))
    rec.update(outcome="finished", private=st.get("private"), headline=st.get("headline", "")[:160],
               prompt_audit=(st.get("prompt_audit") or {}).get("passed"),
               records=sum(1 for _ in open(out / "synthetic.jsonl", encoding="utf-8")))
    real = CORPORA / ("tickets-labelled" if (corpus, setup) == ("tickets", "labelled") else corpus) / "real.csv"
    if evaluate:
        from privtext.evaluate.suite import evaluate_run, headline

        try:
            ev = evaluate_run(out, real=real, classifiers=("embedding-logreg",), baselines=False,
                              per_iteration=False, quiet=True)
            h = headline(ev)
            rec["fid"] = None if h.get("fid") is None else round(float(h["fid"]), 4)
            rec["accuracy"] = {k[4:]: round(float(v), 4) for k, v in h.items() if k.startswith("acc:") and
                               v is not None}
            rec["next_word"] = h.get("next_word")
        except Exception as e:  # an evaluation failure is recorded, not fatal to the matrix
            rec["evaluation_error"] = f"{type(e).__name__}: {e}"[:300]
    labels = SHAPES[corpus][1] if setup != "none" else []
    rec["majority"] = {c: round(_majority(real, c), 4) for c in labels}
    return rec


def _load_results() -> dict[str, Any]:
    p = OUT / "results.json"
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}


def _save_results(res: dict[str, Any]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = OUT / "results.json.tmp"
    tmp.write_text(json.dumps(res, indent=1), encoding="utf-8")
    os.replace(tmp, OUT / "results.json")


def table(res: dict[str, Any]) -> str:
    """The markdown table of the results (one row per cell)."""
    rows = ["| corpus | set-up | method | outcome | statement | accuracy (majority) | FID | wall s (load) |",
            "|---|---|---|---|---|---|---|---|"]
    for key in sorted(res, key=lambda k: (CELLS.index(":".join(k.split(":")[:2])) if ":".join(k.split(":")[:2])
                                           in CELLS else 99, METHODS.index(k.split(":")[2]))):
        r = res[key]
        if r["outcome"] != "finished":
            stmt = f"{r['outcome']}: {r.get('message', '')}" + (" (folder left!)" if r.get("folder_left") else "")
            acc = fid = "—"
        else:
            stmt = "private" if r.get("private") else f"**{r.get('headline', '')[:60]}**"
            acc = ", ".join(f"{c} {100 * a:.1f} % ({100 * r['majority'].get(c, 0):.1f} %)"
                            for c, a in (r.get("accuracy") or {}).items()) or "—"
            fid = "—" if r.get("fid") is None else f"{r['fid']:.3f}"
        rows.append(f"| {r['corpus']} | {r['setup']} | {r['method']} | {r['outcome']} | {stmt} | {acc} | {fid} | "
                    f"{r['wall_seconds']:.0f} ({r['load']}) |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", default=",".join(CELLS), help="comma-separated corpus:set-up cells")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--no-evaluate", action="store_true")
    ap.add_argument("--table", action="store_true", help="print the table of the results so far and stop")
    args = ap.parse_args(argv)
    use_src()
    res = _load_results()
    if args.table:
        print(table(res))
        return 0
    if not (CORPORA / "tickets" / "private.csv").exists():
        raise SystemExit("run `python benchmarks/corpora.py` first")
    for cell in args.cells.split(","):
        corpus, setup = cell.split(":")
        for method in args.methods.split(","):
            rec = run_cell(corpus, setup, method, evaluate=not args.no_evaluate)
            # re-read before writing: another invocation may have saved cells meanwhile (a cell takes minutes)
            res = {**_load_results(), f"{corpus}:{setup}:{method}": rec}
            _save_results(res)
            print(json.dumps(rec), flush=True)
    print(table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
