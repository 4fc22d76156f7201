"""Embedding throughput of the packaged MiniLM on the CPU: torch fp32 (the default) against bf16 weights, length
sorting, and the ONNX runtimes (ONNX Runtime, OpenVINO) running a local export of the same weights.

    HF_HUB_OFFLINE=1 python benchmarks/embed_speed.py [--n 600] [--offset 0] [--reps 2] [--batch-size 64] [--threads N]
        [--resplits 20] [--variants fp32,bf16,ort-fp32,ov-fp32,ov-bf16,ov-mixed-2,...]

Texts: Yelp reviews from ``$PRIVTEXT_SHARED_DATA/yelp/dev.csv`` (default ../shared/data) — after ``--offset``,
the first ``--n`` as "private", the next ``--n`` as "candidates". Variants, timed alternately in one process (best of ``--reps``):

* ``fp32``: SentenceTransformerEmbedder() — sentence-transformers sorts each call's texts by length;
* ``fp32-unsorted``: the same model fed one batch per ``encode`` call in input order (what no sorting costs);
* ``bf16``: SentenceTransformerEmbedder(precision="bf16") — torch, weights cast to bfloat16;
* ``ort-fp32``: runtime="onnxruntime" (the export, ORT's own graph optimisations at ORT_ENABLE_ALL);
* ``ort-fused``: the export rewritten by onnxruntime.transformers' BERT optimizer (fused Attention,
  EmbedLayerNormalization, SkipLayerNormalization, BiasGelu) — benchmark only;
* ``ort-int8``: the export with dynamic int8 weights (per channel; onnxruntime.quantization) — benchmark only;
* ``ov-fp32`` / ``ov-bf16``: runtime="openvino", precision fp32 / bf16 (bf16 needs AVX512_BF16 or AMX);
* ``ov-mixed-K`` (K = 1 .. layers - 1; ``ov-mixed-2`` by default): OpenVINO mixed precision — the embeddings and
  the first layers in bf16, the last K transformer layers and the pooling in fp32, as two compiled models with the
  hidden state passed between them — benchmark only. (One graph does not work: the CPU plugin drops the
  per-node "keep fp32" mark, ``DisablePrecisionConversion``, when it fuses a MatMul's bias into its
  FullyConnected, and Python cannot set that mark at all: it must come from an IR file's rt_info.)

Prints throughput (texts/s) and its ratio to fp32, mean and minimum cosine to the fp32 vectors, and vote agreement:
the fraction of private texts whose nearest candidate (exact search, privtext.search) is the same with the
variant's vectors as with fp32's, and the flip margin: the largest fp32 similarity gap between a changed vote's fp32
winner and the variant's choice (how near a tie the changed votes were). Goal for a fast path: ≥ 2× at mean cosine
≥ 0.999 and agreement ≥ 99 %. One sample's agreement is a noisy figure (its changed votes are a handful of
near-ties, so the same variant scores 98.3-99.6 % on different samples of 1200-2500 reviews): ``--resplits R``
also deals the same 2n texts into n private and n candidates R more times at random (seed 0, the same splits for
every variant) and prints the mean and lowest agreement over them and the share of splits at ≥ 99 %. Then the
share of fp32 time that is tokenisation (sentence-transformers' tokenizer on the same sorted batches).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # harness.py, also when a test loads this file by path
from harness import SHARED

os.environ.setdefault("HF_HUB_OFFLINE", "1")
DATA = SHARED / "yelp"
ALL = ("fp32", "fp32-unsorted", "bf16", "ort-fp32", "ort-fused", "ort-int8", "ov-fp32", "ov-bf16", "ov-mixed-2")


class MixedSession:
    """OpenVINO mixed precision on the embedder's ONNX export: embeddings and layers ``0 .. L-K-1`` compiled with
    bf16 inference precision, the last ``K`` layers and the mean pooling compiled in fp32; ``run`` feeds the first
    part's hidden state to the second. The cut is the output LayerNorm of layer ``L-K-1`` as torch's exporter
    names it. ``parts`` holds the two compiled models (their runtime graphs say which precision each node ran in)."""

    def __init__(self, emb, fp32_layers: int, threads: int | None):  # type: ignore[no-untyped-def]
        import openvino as ov
        import openvino.opset13 as ops

        from privtext.errors import ConfigError

        cfg = emb.model[0].auto_model.config
        layers, hidden = int(cfg.num_hidden_layers), int(cfg.hidden_size)
        if not 1 <= fp32_layers < layers:
            raise ConfigError(f"ov-mixed-{fp32_layers}: the model has {layers} layers; keep 1 to {layers - 1} "
                              "in fp32 (all of them is ov-fp32)")
        cut = f"/hf/encoder/layer.{layers - fp32_layers - 1}/output/LayerNorm/LayerNormalization"
        core = ov.Core()
        head, tail = core.read_model(str(emb.onnx_path)), core.read_model(str(emb.onnx_path))
        found = [next((o for o in m.get_ops() if o.get_friendly_name() == cut), None) for m in (head, tail)]
        if found[0] is None or found[1] is None:
            raise ConfigError(f"ov-mixed-{fp32_layers}: no node {cut!r} in {emb.onnx_path} to cut at")
        first = ov.Model([ops.result(found[0].output(0), name="hidden")], head.get_parameters(), "bf16_part")
        h = ops.parameter([-1, -1, hidden], ov.Type.f32, name="hidden")
        for target in list(found[1].output(0).get_target_inputs()):
            target.replace_source_output(h.output(0))
        second = ov.Model(tail.get_results(), [h, *tail.get_parameters()], "fp32_part")
        config: dict[str, object] = {"PERFORMANCE_HINT": "LATENCY"}
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        self.parts = (core.compile_model(first, "CPU", {**config, "INFERENCE_PRECISION_HINT": "bf16"}),
                      core.compile_model(second, "CPU", {**config, "INFERENCE_PRECISION_HINT": "f32"}))
        got = str(self.parts[0].get_property("INFERENCE_PRECISION_HINT")).lower()
        if "bf16" not in got and "bfloat16" not in got:
            raise ConfigError(f"ov-mixed-{fp32_layers}: this CPU runs bf16 as {got} (needs AVX512_BF16 or AMX)")
        self._reqs = [c.create_infer_request() for c in self.parts]
        self.input_names = [p.get_any_name() for p in self.parts[0].inputs]
        self._second_inputs = [p.get_any_name() for p in self.parts[1].inputs]

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        hidden = self._reqs[0].infer(feeds)[0]
        out = self._reqs[1].infer({k: hidden if k == "hidden" else feeds[k] for k in self._second_inputs})[0]
        return np.array(out, dtype=np.float32, copy=True)


def _is_variant(name: str) -> bool:
    return name in ALL or (name.startswith("ov-mixed-") and name[9:].isdigit())


def _derived_session(ort_emb, kind: str, workdir: Path, threads: int | None):  # type: ignore[no-untyped-def]
    """An OnnxSession on a fused or int8 rewrite of the embedder's export."""
    import onnx

    from privtext.embed.st_export import OnnxSession

    src, dst = str(ort_emb.onnx_path), workdir / f"{kind}.onnx"
    if kind == "ort-fused":
        from onnxruntime.transformers import optimizer

        cfg = ort_emb.model[0].auto_model.config
        m = optimizer.optimize_model(src, model_type="bert", num_heads=cfg.num_attention_heads,
                                     hidden_size=cfg.hidden_size, opt_level=0)
        print(f"ort-fused: {({k: v for k, v in m.get_fused_operator_statistics().items() if v})}")
        m.save_model_to_file(str(dst))
    else:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(src, str(dst), weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    return OnnxSession(dst, runtime="onnxruntime", precision="fp32", threads=threads)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--offset", type=int, default=0, help="skip this many reviews first (another sample)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None, help="torch_threads for every variant (default: each "
                    "library's own)")
    ap.add_argument("--variants", default=",".join(ALL), help=f"comma-separated, from {','.join(ALL)}")
    ap.add_argument("--export-dir", default=None, help="ONNX export cache (default: privtext's)")
    ap.add_argument("--resplits", type=int, default=20, help="random re-splits of the texts into private and "
                    "candidates for the agreement spread (0: none)")
    a = ap.parse_args()
    wanted = [v.strip() for v in a.variants.split(",") if v.strip()]
    if unknown := sorted(v for v in wanted if not _is_variant(v)):
        ap.error(f"unknown variant(s) {unknown}; choose from {', '.join(ALL)} (ov-mixed-K for any K)")
    import pandas as pd

    from privtext.embed.st import SentenceTransformerEmbedder
    from privtext.embed.st_export import _preprocess
    from privtext.search import nearest

    texts = pd.read_csv(DATA / "dev.csv")["text"].astype(str).tolist()[a.offset: a.offset + 2 * a.n]
    common = {"batch_size": a.batch_size, "torch_threads": a.threads}
    fp32 = SentenceTransformerEmbedder(**common)

    def unsorted(t: list[str]) -> np.ndarray:
        return np.concatenate([fp32.embed(t[i:i + a.batch_size]) for i in range(0, len(t), a.batch_size)])

    variants: dict[str, Callable[[list[str]], np.ndarray]] = {"fp32": fp32.embed}
    workdir = Path(tempfile.mkdtemp(prefix="embed_speed."))
    ort_emb = None
    for k in wanted:
        if k == "fp32-unsorted":
            variants[k] = unsorted
        elif k == "bf16":
            variants[k] = SentenceTransformerEmbedder(**common, precision="bf16").embed
        elif k.startswith("ort-"):
            t0 = time.perf_counter()
            emb = SentenceTransformerEmbedder(**common, runtime="onnxruntime", export_dir=a.export_dir)
            if ort_emb is None:
                print(f"ONNX export ready in {time.perf_counter() - t0:.1f} s: {emb.onnx_path}")
                ort_emb = emb
            if k != "ort-fp32":
                emb.session = _derived_session(emb, k, workdir, a.threads)
            variants[k] = emb.embed
        elif k.startswith("ov-mixed-"):
            emb = SentenceTransformerEmbedder(**common, runtime="openvino", export_dir=a.export_dir)
            emb.session = MixedSession(emb, int(k[9:]), a.threads)  # type: ignore[assignment]
            variants[k] = emb.embed
        elif k.startswith("ov-"):
            variants[k] = SentenceTransformerEmbedder(**common, runtime="openvino", precision=k[3:],
                                                      export_dir=a.export_dir).embed
    for f in variants.values():
        f(texts[:32])
    best = dict.fromkeys(variants, np.inf)
    vecs: dict[str, np.ndarray] = {}
    tok_best = np.inf
    for _ in range(a.reps):
        for k, f in variants.items():
            t0 = time.perf_counter()
            vecs[k] = f(texts)
            best[k] = min(best[k], time.perf_counter() - t0)
        t0 = time.perf_counter()  # tokenisation alone, on the batches fp32 makes (longest first)
        ordered = sorted(texts, key=len, reverse=True)
        for i in range(0, len(ordered), a.batch_size):
            _preprocess(fp32.model, ordered[i:i + a.batch_size])
        tok_best = min(tok_best, time.perf_counter() - t0)
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    print(f"{len(texts)} Yelp reviews (mean {np.mean([len(t) for t in texts]):.0f} chars), batch {a.batch_size}, "
          f"threads {a.threads or 'default'}, {os.cpu_count()} CPUs, load {load}")
    ref = vecs["fp32"]
    votes_ref = nearest(ref[: a.n], ref[a.n:], backend="numpy")
    sims = ref[: a.n] @ ref[a.n:].T
    rng = np.random.default_rng(0)
    splits = [rng.permutation(len(texts)) for _ in range(a.resplits)]
    split_ref = [nearest(ref[s[: a.n]], ref[s[a.n:]], backend="numpy") for s in splits]
    print(f"{'variant':14} {'texts/s':>8} {'× fp32':>7} {'mean cos':>9} {'min cos':>9} {'vote agree':>10} "
          f"{'flip margin':>11}" + (f"  over {a.resplits} re-splits: mean, lowest, share >= 0.99" if splits else ""))
    for k, v in vecs.items():
        cos = (v * ref).sum(1)
        votes = nearest(v[: a.n], v[a.n:], backend="numpy")
        flipped = np.flatnonzero(votes != votes_ref)
        # how close a call each changed vote was under fp32: its winner's similarity minus the new choice's
        margin = (sims[flipped, votes_ref[flipped]] - sims[flipped, votes[flipped]]).max() if len(flipped) else 0.0
        spread = ""
        if splits:
            agree = np.array([(nearest(v[s[: a.n]], v[s[a.n:]], backend="numpy") == r).mean()
                              for s, r in zip(splits, split_ref, strict=True)])
            spread = f"  {agree.mean():.4f} {agree.min():.4f} {(agree >= 0.99).mean():4.0%}"
        print(f"{k:14} {len(texts) / best[k]:8.1f} {best['fp32'] / best[k]:7.2f} {cos.mean():9.6f} {cos.min():9.6f} "
              f"{1 - len(flipped) / a.n:10.4f} {margin:11.2e}{spread}")
    print(f"tokenisation alone: {len(texts) / tok_best:.0f} texts/s = {tok_best / best['fp32']:.1%} of the fp32 time")


if __name__ == "__main__":
    main()
