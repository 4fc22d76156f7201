"""The run guard's cost: building it from a private and a public corpus, and scanning prompts.

Private: Yelp dev.csv (5000 reviews); public: Yelp test.csv (5000 reviews); prompts: ``--prompts`` public reviews
each wrapped in a rephrase instruction (what Aug-PE's variation prompts look like), half of them with a private
record pasted in (so the long-record path runs). With ``--secrets`` the guard also holds the regex detector's
values found in the private corpus and scans for them. ``--old PATH`` times another guard.py (e.g. main's) in
the same process, for a ratio measured within one run (the machine is shared: compare ratios, not seconds).

    python benchmarks/guard.py --prompts 2000 --secrets --old /work/main/src/privtext/guard.py
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time

from harness import SHARED, read_texts

DATA = SHARED / "yelp"


def _load(path: str, name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _time(guard_cls, private, public, prompts, **kw):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    g = guard_cls(private, public, **kw)
    t1 = time.perf_counter()
    res = g.scan(prompts)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=2000)
    ap.add_argument("--secrets", action="store_true", help="scan for the regex detector's values too")
    ap.add_argument("--old", help="path of another guard.py to time in the same run")
    args = ap.parse_args()
    from privtext.guard import PrivateGuard

    private, public = read_texts(DATA / "dev.csv"), read_texts(DATA / "test.csv")
    prompts = []
    for k in range(args.prompts):
        body = public[k % len(public)]
        if k % 2:
            body += "\n" + private[k % len(private)]
        prompts.append([{"role": "user", "content": f"Rephrase this review:\n{body}"}])
    words = sum(len(str(p[0]["content"]).split()) for p in prompts)
    kw = {}
    if args.secrets:
        from privtext.secrets import build_detector

        kw["secret_values"] = build_detector("regex").detect(private)
    build, scan, res = _time(PrivateGuard, private, public, prompts, **kw)
    print(f"private {len(private)} records, public {len(public)}, prompts {len(prompts)} ({words} words)")
    print(f"this guard{' + secrets' if args.secrets else ''}: build {build:.2f} s, scan {scan:.2f} s "
          f"({words / scan / 1e3:.0f}k words/s); flagged {len(res.flagged)} "
          f"(records {res.record_hits}, n-grams {res.ngram_hits}, secrets {res.secret_hits})")
    if args.old:
        old = _load(args.old, "privtext._old_guard")  # inside the package: its relative imports work
        b2, s2, r2 = _time(old.PrivateGuard, private, public, prompts)
        print(f"old guard: build {b2:.2f} s, scan {s2:.2f} s ({words / s2 / 1e3:.0f}k words/s); flagged "
              f"{len(r2.flagged)} (records {r2.record_hits}, n-grams {r2.ngram_hits}); "
              f"scan ratio this/old {scan / s2:.2f}")


if __name__ == "__main__":
    main()
