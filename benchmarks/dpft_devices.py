"""DP-SGD on one process or on several (``dpft.devices``): records per second of the same steps, and a cross-check
that the parameters agree.

    PYTHONPATH=src python benchmarks/dpft_devices.py                       # small GPT-2 (4.2 M), 1 vs 2 CPU procs
    PYTHONPATH=src python benchmarks/dpft_devices.py --size tiny --steps 6
    PYTHONPATH=src python benchmarks/dpft_devices.py --devices cuda:0,cuda:1   # on a machine with two GPUs

The model is the small GPT-2 of ``privtext.generate.lm`` (``--size``; random weights: the time of a step does not
depend on them), the records random token sequences of ``--length`` tokens, q·N of them expected per step. Every
configuration runs the same ``--steps`` steps from the same weights with the same Poisson samples and noise
(a fixed seed: a benchmark, not a release), full fine-tuning, AdamW. Printed per configuration: processes ×
threads each, seconds for the steps (after one warm-up step; the workers' start is timed apart), records/s, the
ratio to the first configuration, and the largest parameter difference from it (float summation order only).
Compare ratios within one run: the machine may be shared.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any

import numpy as np


def build(size: str, length: int) -> Any:
    from privtext.generate.lm.model import build_model, model_shape

    shape = model_shape(size, n_positions=length)
    return build_model(shape, vocab_size=shape.vocab_size, bos_id=1, eos_id=2, pad_id=0)


def run(model_state: dict[str, Any], args: argparse.Namespace, devices: list[str] | None, threads: int,
        primary: str) -> tuple[float, float, dict[str, np.ndarray]]:
    import torch

    from privtext.mechanisms.dpsgd import dpsgd_steps, make_private, unwrap
    from privtext.mechanisms.dpsgd_workers import GradientWorkers
    from privtext.methods.dpft.models import SequenceLoss

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build(args.size, args.length)
    model.load_state_dict(model_state)
    model.to(primary)
    rng = np.random.default_rng(1)
    vocab = model.config.vocab_size
    seqs = [rng.integers(3, vocab, size=args.length).tolist() for _ in range(args.records)]
    loss = SequenceLoss(seqs, 0)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = [p for p in model.parameters() if p.requires_grad]
    q = args.batch / args.records
    start = 0.0
    with contextlib.ExitStack() as stack:
        workers = None
        if devices and len(devices) > 1:
            t0 = time.perf_counter()
            workers = stack.enter_context(GradientWorkers(model, names, loss, devices=devices, max_grad_norm=1.0,
                                                          physical_batch_size=args.physical, threads=threads))
            start = time.perf_counter() - t0
        gs, opt = make_private(model, torch.optim.AdamW(params, lr=1e-3), max_grad_norm=1.0, normaliser=args.batch)
        stack.callback(unwrap, gs)
        loss_of = loss.make(gs, torch.device(primary))
        kw = dict(n_records=args.records, loss_of=loss_of, sampling_rate=q, noise_std=1.0, sensitivity=1.0,
                  physical_batch_size=args.physical, workers=workers)
        dpsgd_steps(gs, opt, steps=1, rng=np.random.default_rng(2), **kw)  # warm-up
        t0 = time.perf_counter()
        stats, _ = dpsgd_steps(gs, opt, steps=args.steps, rng=np.random.default_rng(3), **kw)
        seconds = time.perf_counter() - t0
        out = {n: p.detach().cpu().numpy().copy() for n, p in zip(names, params, strict=True)}
    return seconds, stats.records / seconds, {"start": start, **out}  # type: ignore[dict-item]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="small")
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=64, help="expected records per step (q·N)")
    ap.add_argument("--physical", type=int, default=16)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--devices", default="cpu,cpu", help="the several-process configuration, e.g. cuda:0,cuda:1")
    args = ap.parse_args()
    import torch

    torch.manual_seed(0)
    state = build(args.size, args.length).state_dict()
    n_params = sum(v.numel() for v in state.values())
    several = args.devices.split(",")
    cpu = several[0] == "cpu"
    configs: list[tuple[str, list[str] | None, int]] = [("1 process x 1 thread", None, 1)]
    if cpu:
        configs.append((f"1 process x {len(several)} threads", None, len(several)))
    configs.append((f"{len(several)} processes x 1 thread ({args.devices})", several, 1))
    print(f"size {args.size} ({n_params / 1e6:.2f} M parameters), {args.records} records of {args.length} tokens, "
          f"{args.batch} expected per step, {args.steps} timed steps, physical batch {args.physical}")
    base: tuple[float, dict[str, Any]] | None = None
    print(f"{'configuration':42s} {'start s':>8s} {'steps s':>8s} {'records/s':>10s} {'speed-up':>9s} "
          f"{'max |Δθ|':>10s}")
    for name, devices, threads in configs:
        seconds, rate, out = run(state, args, devices, threads, several[0])
        start = out.pop("start")
        if base is None:
            base = (rate, out)
        diff = max(float(np.abs(out[k] - base[1][k]).max()) for k in out)
        print(f"{name:42s} {start:8.1f} {seconds:8.1f} {rate:10.1f} {rate / base[0]:8.2f}x {diff:10.2e}")


if __name__ == "__main__":
    main()
