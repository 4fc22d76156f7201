"""Scale-out on one machine: generation fanned out over 1, 2, 3 OpenAI-compatible servers, and Ray Data embedding
against a single process.

    python benchmarks/fanout.py [--prompts 240] [--latency 0.05] [--per-server 4]
                                [--embed-n 1500] [--skip-embed] [--skip-fanout] [--minilm]

**Fan-out.** Each fake server (``privtext.testing.OpenAIServer`` in its own process, so the servers do not share
the benchmark's GIL) answers every request after a fixed ``--latency``, like a model server whose time per request
is the generation. The openai generator sends ``--prompts`` variation prompts with ``max_concurrency =
--per-server`` over 1, 2 and 3 servers (``base_urls``). Ideal throughput is servers × per-server / latency; what
is lost is the client's own overhead (HTTP, JSON, threads on a shared 2-core machine).

**Ray Data embedding.** ``--embed-n`` Yelp reviews (``$PRIVTEXT_SHARED_DATA/yelp/dev.csv``; synthetic text when
absent) embedded by the hashing embedder (and, with ``--minilm``, the packaged MiniLM) in this process, then by
:class:`privtext.embed.distributed.RayDataEmbedder` on a local Ray cluster of ``num_cpus = os.cpu_count()``
(first call: worker processes start and load the model; warm: the best of the next two calls). Vectors are checked against the
single process's (exact for hashing; min cosine for MiniLM). On a 2-core machine expect parity at best: Ray
parallelises over cores the single process's BLAS threads were already using, and adds serialisation.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from harness import SHARED

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local benchmark cluster only
DATA = SHARED / "yelp" / "dev.csv"
ENV = "PRIVTEXT_FANOUT_BENCH_KEY"


def serve(latency: float) -> None:
    """Child process: one fake server with a fixed latency per request; prints its URL, serves until stdin
    closes."""
    from privtext.testing import OpenAIServer
    from privtext.testing.openai_server import default_reply

    def slow(prompt: str, *, seed, model: str, index: int = 0) -> str:
        time.sleep(latency)
        return default_reply(prompt, seed=seed, model=model, index=index)

    with OpenAIServer(reply=slow) as srv:
        print(srv.url, flush=True)
        sys.stdin.read()


def fanout(prompts: int, latency: float, per_server: int) -> None:
    import privtext
    from privtext.generate import GeneratorContext, VariationSpec, build_generator

    env = {**os.environ, "PYTHONPATH": str(Path(privtext.__file__).parents[1])}
    procs = [subprocess.Popen([sys.executable, __file__, "--serve", str(latency)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    try:
        urls = [p.stdout.readline().strip() for p in procs]  # type: ignore[union-attr]
        os.environ.setdefault(ENV, "local")
        texts = [f"review {i}: the soup was cold but the staff were lovely" for i in range(prompts)]
        print(f"fan-out: {prompts} prompts, {latency * 1000:.0f} ms per request, max_concurrency {per_server} "
              "per server")
        print(f"{'servers':>8} {'prompts/s':>10} {'ideal':>8} {'of ideal':>9} {'speed-up':>9}  sent per server")
        base = None
        ref: list[str] | None = None
        for k in (1, 2, 3):
            g = build_generator({"backend": "openai", "model": "test-model", "base_urls": urls[:k],
                                 "api_key_env": ENV, "max_concurrency": per_server}, GeneratorContext())
            g.variation(texts[: per_server * k], None, VariationSpec(kind="paraphrase"),
                        rng=np.random.default_rng(1))  # warm: connections open
            t0 = time.perf_counter()
            out = g.variation(texts, None, VariationSpec(kind="paraphrase"), rng=np.random.default_rng(0))
            dt = time.perf_counter() - t0
            ref = ref or out
            assert out == ref, "fan-out changed the outputs"
            rate = prompts / dt
            base = base or rate
            ideal = k * per_server / latency if latency > 0 else float("inf")
            sent = [d["sent"] for d in g.client.server_stats()]
            print(f"{k:>8} {rate:>10.1f} {ideal:>8.0f} {rate / ideal:>8.0%} {rate / base:>8.2f}×  {sent}")
            g.close()
    finally:
        for p in procs:
            p.stdin.close()  # type: ignore[union-attr]
            p.wait(timeout=10)


def embed(n: int, minilm: bool) -> None:
    import ray

    from privtext.embed import build_embedder
    from privtext.embed.distributed import RayDataEmbedder

    if DATA.exists():
        import pandas as pd

        texts = pd.read_csv(DATA)["text"].astype(str).tolist()[:n]
        src = "yelp dev"
    else:
        rng = np.random.default_rng(0)
        words = "the soup staff room quiet lovely rude price menu bed great awful".split()
        texts = [" ".join(rng.choice(words, size=int(rng.integers(5, 120)))) for _ in range(n)]
        src = "synthetic"
    cpus = os.cpu_count() or 1
    print(f"\nRay Data embedding: {len(texts)} {src} texts, local cluster num_cpus={cpus}")
    print(f"{'embedder':>10} {'variant':>22} {'texts/s':>9} {'seconds':>8}  check")
    configs = [("hashing", {"backend": "hashing", "dim": 256, "cache": False})]
    if minilm:
        configs.append(("MiniLM", {"backend": "sentence-transformers", "cache": False}))
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}})
    try:
        for label, cfg in configs:
            local = build_embedder(cfg)
            local.embed(texts[:16])
            t0 = time.perf_counter()
            want = local.embed(texts)
            dt = time.perf_counter() - t0
            print(f"{label:>10} {'single process':>22} {len(texts) / dt:>9.1f} {dt:>8.2f}")
            emb = RayDataEmbedder(cfg, batch_size=128)
            for variant, reps in (("ray, first call", 1), ("ray, warm (best of 2)", 2)):
                dt = np.inf
                for _ in range(reps):
                    t0 = time.perf_counter()
                    got = emb.embed(texts)
                    dt = min(dt, time.perf_counter() - t0)
                if label == "hashing":
                    check = "identical" if np.array_equal(got, want) else "DIFFERENT"
                else:
                    check = f"min cosine {float(np.sum(got * want, axis=1).min()):.6f}"
                print(f"{label:>10} {variant:>22} {len(texts) / dt:>9.1f} {dt:>8.2f}  {check}")
    finally:
        ray.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--prompts", type=int, default=240)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--per-server", type=int, default=4)
    ap.add_argument("--embed-n", type=int, default=1500)
    ap.add_argument("--minilm", action="store_true", help="also time the packaged MiniLM (slow on 2 cores)")
    ap.add_argument("--skip-fanout", action="store_true")
    ap.add_argument("--skip-embed", action="store_true")
    a = ap.parse_args()
    if a.serve is not None:
        serve(a.serve)
        return
    with open("/proc/loadavg") as fh:
        print(f"machine: {os.cpu_count()} CPUs, load average {fh.read().split()[0]}")
    if not a.skip_fanout:
        fanout(a.prompts, a.latency, a.per_server)
    if not a.skip_embed:
        embed(a.embed_n, a.minilm)


if __name__ == "__main__":
    main()
