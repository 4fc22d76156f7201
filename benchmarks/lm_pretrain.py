"""dpft's default public-model pretraining (the lm generator's) on a public corpus: steps, tokens, wall and CPU
seconds, the validation loss, a few samples; optionally interrupted and resumed.

    PYTHONPATH=src python benchmarks/lm_pretrain.py [--corpus artifacts/corpora/tickets/public.csv]
        [--column message] [--set key=value ...] [--samples 8] [--interrupt-after SECONDS] [--keep-cache]

Trains the model ``method: dpft`` builds by default (``dpft.lm`` empty: the lm generator's defaults, no public
labels) on the corpus's texts, in a fresh cache folder under ``artifacts/lm_pretrain/`` (the user's cache is
left alone; ``--keep-cache`` reuses it). The default corpus is the support-ticket set-up of issue 35: 4,000 short
unlabelled messages (``benchmarks/corpora.py`` writes it).

``--interrupt-after S`` runs the training in a child process, sends it SIGINT (Ctrl-C) after S seconds, then
builds again in this process: the second build must continue from the checkpoint the interrupt wrote (its step is
printed), and the figures are the two parts together.

Printed: ``uptime`` and the load average before and after (the machine is shared: compare CPU seconds across
loads), the torch threads used, the model, the budget (planned steps and epochs) and where it stopped (early on
the validation split, or the budget), the steps, tokens, epochs, wall and CPU seconds of the training and of the
whole build (tokenizer and keyphrases included), the validation loss before, at each evaluation and after, and
``--samples`` texts sampled from the model (free format, no codes) with the count holding U+FFFD (always 0).
Writes ``artifacts/lm_pretrain/result.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness import ROOT, key_values, read_rows, uptime

OUT = ROOT / "artifacts" / "lm_pretrain"


def _texts(path: Path, column: str | None) -> list[str]:
    rows = read_rows(path)
    if not rows:
        raise SystemExit(f"{path}: no rows")
    col = column or ("message" if "message" in rows[0] else "text" if "text" in rows[0] else next(iter(rows[0])))
    return [r[col] for r in rows if r[col] and r[col].strip()]


CHILD = """
import json, sys
from privtext.generate.lm import build_public_lm
from privtext.generate.lm.backend import LMOptions
a = json.loads(sys.argv[1])
texts = json.load(open(a["texts"]))
o = LMOptions(**a["options"])
build_public_lm(texts, settings=o.settings(), cache_dir=a["cache_dir"])
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "artifacts" / "corpora" / "tickets" / "public.csv")
    ap.add_argument("--column", default=None, help="the text column (default: message, else text)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an lm option (dpft.lm)")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--interrupt-after", type=float, default=None, metavar="SECONDS")
    ap.add_argument("--keep-cache", action="store_true")
    ap.add_argument("--out", type=Path, default=OUT / "result.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if not args.corpus.exists():
        print(f"{args.corpus} not found (benchmarks/corpora.py writes it); nothing to do", file=sys.stderr)
        return 0
    import torch

    from privtext.generate.lm import build_public_lm
    from privtext.generate.lm.backend import LMOptions
    from privtext.generate.lm.sample import SamplingSettings

    texts = _texts(args.corpus, args.column)
    options: dict[str, Any] = key_values(args.set)
    o = LMOptions(**options)
    cache_dir = OUT / "cache"
    if not args.keep_cache:
        shutil.rmtree(cache_dir, ignore_errors=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    up0, load0 = uptime(), os.getloadavg()
    print(f"before: {up0}")
    print(f"corpus: {args.corpus} ({len(texts)} texts, {np.mean([len(t.split()) for t in texts]):.1f} words each); "
          f"{os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}")
    t0, c0 = time.perf_counter(), time.process_time()
    child_cpu = 0.0
    if args.interrupt_after is not None:
        OUT.mkdir(parents=True, exist_ok=True)
        tpath = OUT / "texts.json"
        tpath.write_text(json.dumps(texts), encoding="utf-8")
        payload = json.dumps({"texts": str(tpath), "options": options, "cache_dir": str(cache_dir)})
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
        # SIGINT back to its default in the child: a shell that starts this in the background ignores it, the
        # child would inherit that and Python would then never raise KeyboardInterrupt
        child = subprocess.Popen([sys.executable, "-c", CHILD, payload], env=env,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            child.wait(timeout=args.interrupt_after)
            print("the training ended before the interrupt")
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGINT)
            child.wait()
            print(f"interrupted (SIGINT) after {args.interrupt_after:.0f} s; exit code {child.returncode}; "
                  f"checkpoints: {[p.name for p in sorted(cache_dir.glob('.*.partial/step_*'))]}")
        child_cpu = _children_cpu()
    lm = build_public_lm(texts, settings=o.settings(), cache_dir=cache_dir)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0 + child_cpu
    info = lm.info
    tr = info["train"]
    up1, load1 = uptime(), os.getloadavg()
    with torch.no_grad():
        ids = lm.sample([lm.encoder.free([], None)] * args.samples, np.random.default_rng(0),
                        settings=SamplingSettings(max_new_tokens=o.max_new_tokens))
    samples = [lm.encoder.decode(x) for x in ids]
    print(f"model: {info['parameters'] / 1e6:.2f} M parameters {info['shape']}, {info['precision']}, "
          f"{info.get('threads')} thread(s), cache {info['cache']}")
    print(f"budget: {info['planned_steps']} steps ({info['planned_epochs']} epochs; epochs {o.epochs:g}, "
          f"train_tokens {o.train_tokens}), validation every {info['eval_every']} steps on "
          f"{info['validation_texts']} public texts")
    if info.get("resumed_from_step"):
        print(f"resumed: continued at step {info['resumed_from_step']} from the interrupted training's checkpoint")
    print(f"training: {tr['steps']} steps, {tr['tokens']:,} tokens ({info['epochs']} epochs), stopped: "
          f"{info['stopped']} (best step {info['best_step']}); {tr['seconds']:.0f} s wall / {tr['cpu_seconds']:.0f} "
          f"CPU-s in the training loop")
    print(f"whole build: {wall:.0f} s wall / {cpu:.0f} CPU-s (tokenizer, keyphrases, training, validation"
          + (", both processes" if args.interrupt_after is not None else "") + ")")
    hist = " ".join(f"{s}:{v:.3f}" for s, v in info["validation_history"])
    print(f"validation loss (nats/token): {info['validation_loss_before']:.3f} untrained → "
          f"{info['validation_loss_after']:.3f} kept; history {hist}")
    print(f"after: {up1}")
    bad = sum("\ufffd" in s for s in samples)
    print(f"samples ({len(samples)}, {bad} with U+FFFD):")
    for s in samples:
        print(f"  | {s[:160]}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "corpus": str(args.corpus), "texts": len(texts), "options": options, "uptime_before": up0,
        "uptime_after": up1, "load_before": load0, "load_after": load1, "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1), "info": info, "samples": samples, "samples_with_fffd": bad},
        indent=1, default=float), encoding="utf-8")
    if not args.keep_cache:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return 0


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return float(r.ru_utime + r.ru_stime)


if __name__ == "__main__":
    raise SystemExit(main())
