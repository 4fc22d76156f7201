"""Byte-identity of every method's release across a refactor (issue 37's acceptance).

Runs each method with ``privacy.reproducible_noise: true`` and a fixed seed on two set-ups and prints the BLAKE2b
digest of each run's ``synthetic.jsonl`` and ``privacy.json``:

* ``tiny`` — the toy corpora of :mod:`privtext.testing.tinyrun` with the scripted generator and the hashing
  embedder (seconds per method);
* ``demo`` — the demo's clinic notes with the default offline backends (the 4-gram, the packaged MiniLM; about a
  minute per method), the path users run.

    python benchmarks/identity.py --out artifacts/identity/before.json           # before the change
    python benchmarks/identity.py --check artifacts/identity/before.json         # after: exit 1 on any difference

``--setups tiny`` or ``--methods augpe,wasp`` run a part. The run folders stay under ``artifacts/identity/runs``
(``--runs DIR`` elsewhere, so that two people checking at once do not remove each other's runs) for a diff when a
digest differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from harness import ROOT, use_src

WORK = ROOT / "artifacts" / "identity"
METHODS = ("augpe", "secpe", "wasp", "dpkps", "dpft")
#: dpft with the tiny public LM (trained once into WORK/lm-cache, then a cache hit)
TINY_DPFT: dict[str, Any] = {"sampling_rate": 0.25, "epochs": 1, "max_length": 32, "max_new_tokens": 12,
                             "torch_threads": 1, "lm": {"size": "tiny", "max_length": 32, "epochs": 1.0,
                                                        "train_tokens": None, "validation": 0, "precision": "fp32",
                                                        "cache_dir": str(WORK / "lm-cache")}}


#: keys a change may add to privacy.json on purpose (issue 37: the method's description); everything else must
#: stay byte for byte
ADDED_KEYS = ("method_description",)


def _digest(path: Path) -> str:
    return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest() if path.exists() else "missing"


def _statement_digest(path: Path) -> str:
    """privacy.json's digest, and, when it holds keys of :data:`ADDED_KEYS`, the digest of the file with them
    removed in the form privtext writes it (so 'identical but for the added description' is checked exactly)."""
    if not path.exists():
        return "missing"
    obj = json.loads(path.read_text(encoding="utf-8"))
    if not any(k in obj for k in ADDED_KEYS):
        return _digest(path)
    from privtext.atomicio import dumps

    for k in ADDED_KEYS:
        obj.pop(k, None)
    indented = dumps(obj, indent=2) + "\n"  # what atomic_write_json writes, without the added keys
    return hashlib.blake2b(indented.encode("utf-8"), digest_size=16).hexdigest()


def _tiny(method: str, root: Path) -> Path:
    import numpy as np

    from privtext.data import Corpus
    from privtext.testing.tinyrun import tiny_run, toy_corpora

    priv, pub, _ = toy_corpora(rng=np.random.default_rng(7))
    common: dict[str, Any] = {"privacy": {"epsilon": 4.0, "delta": 1e-5, "reproducible_noise": True}}
    if method == "secpe":
        common["privacy"] = {"secret": {"p": 1e-3, "r": 2e-2}, "reproducible_noise": True}
        return tiny_run(root, private=priv, public=pub, method="secpe", iterations=2, **common)
    if method == "wasp":
        gens = [{"backend": "scripted", "name": "a", "vocabulary": ["pizza", "room", "store", "great", "menu"]},
                {"backend": "scripted", "name": "b", "vocabulary": ["thing", "stuff", "went", "okay"]}]
        return tiny_run(root, private=priv, public=pub, method="wasp", num_samples=40, iterations=3,
                        generators=gens, wasp={"q": 3, "in_context": 4}, **common)
    if method == "dpkps":
        common["privacy"] = {"epsilon": 6.0, "reproducible_noise": True}
        return tiny_run(root, private=priv, public=Corpus(pub.ids, pub.texts, {}, name="pool"), method="dpkps",
                        num_samples=16, data={"label_values": {"category": ["food", "hotel"],
                                                               "mood": ["good", "bad"]}},
                        evolution={"label_distribution": {"kind": "dp", "budget_fraction": 0.1}},
                        dpkps={"vocab_size": 20, "length": 4, "n_features": 32, "vocabulary_min_count": 3},
                        **common)
    if method == "dpft":
        return tiny_run(root, private=priv, public=pub, method="dpft", num_samples=8, dpft=TINY_DPFT, **common)
    return tiny_run(root, private=priv, public=pub, iterations=2, **common)


def _demo(method: str, root: Path) -> Path:
    from privtext.config import config_from_dict
    from privtext.demo import demo_config, make_demo_corpora, write_demo_files
    from privtext.runner import run_config

    folder = root.parent / "demo-data"
    if not (folder / "private.csv").exists():
        folder.mkdir(parents=True, exist_ok=True)
        private, public, patients = make_demo_corpora()
        write_demo_files(folder, private, public, patients)
    raw = demo_config(folder, method) if method != "dpft" else {**demo_config(folder, "augpe"), "method": "dpft",
                                                                "dpft": TINY_DPFT}
    raw["output"] = str(root)
    raw["privacy"] = {**raw["privacy"], "reproducible_noise": True}
    return run_config(config_from_dict(raw))


SETUPS = {"tiny": _tiny, "demo": _demo}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--setups", default="tiny,demo")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--out", type=Path, help="write the digests here")
    ap.add_argument("--check", type=Path, help="compare with digests written before; exit 1 on a difference")
    ap.add_argument("--runs", type=Path, default=WORK / "runs", help="where the run folders go (default %(default)s)")
    args = ap.parse_args(argv)
    use_src()
    digests: dict[str, dict[str, str]] = {}
    for setup in args.setups.split(","):
        for method in args.methods.split(","):
            root = args.runs.resolve() / setup / method
            if root.exists():
                shutil.rmtree(root)
            root.parent.mkdir(parents=True, exist_ok=True)
            try:
                run = SETUPS[setup](method, root)
                digests[f"{setup}:{method}"] = {"synthetic.jsonl": _digest(Path(run) / "synthetic.jsonl"),
                                                "privacy.json": _statement_digest(Path(run) / "privacy.json")}
            except Exception as e:  # recorded: a set-up a method refuses is a digest too
                digests[f"{setup}:{method}"] = {"error": f"{type(e).__name__}: {e}"[:200]}
            print(f"{setup}:{method} {json.dumps(digests[f'{setup}:{method}'])}", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(digests, indent=1), encoding="utf-8")
    if args.check:
        before = json.loads(args.check.read_text(encoding="utf-8"))
        diff = [k for k in digests if before.get(k) != digests[k]]
        print("identical" if not diff else f"DIFFERENT: {diff}")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
