"""One DPO round of a Hugging Face causal LM as its own program, so that it can run on several GPUs.

A privtext run is one process. trl's DPOTrainer spreads a round over K GPUs when it is started by accelerate (one
process per GPU, data-parallel, gradients averaged), so the learning step writes its inputs to files and starts::

    accelerate launch --num_processes K -m privtext.learn.worker \\
        --model MODEL --records ITER/learn/records.jsonl --options ITER/learn/options.json \\
        [--adapter-in PREV/learn] --adapter-out ITER/learn --seed SEED

* ``--records``: one ``{"prompt", "chosen", "rejected"}`` per line (:func:`privtext.learn.pairs.pair_records`: the
  generator's rendered prompt and two generated texts — nothing private);
* ``--options``: the :class:`~privtext.learn.options.DPOOptions` as JSON (``batch_size`` is per GPU: the round's
  batch is K × batch_size);
* ``--adapter-in``: the previous round's adapter (:mod:`privtext.learn.adapter`), absent for the first round;
* ``--adapter-out``: where the trained adapter is written (by the main process only, after every process is done);
* ``--peft-out``: also the adapter in peft's format (what vLLM's ``LoRARequest`` loads: :mod:`privtext.learn.vllm`);
* ``--merged-out``: also the adapter merged into a copy of the weights (the base checkpoint's dtype, with its
  tokenizer), for a vLLM engine restarted on it (``learn.dpo.serve: merge``).

The reference is the base model (:func:`privtext.learn.trl_backend._base_reference`). Without ``accelerate
launch`` the same command trains in one process (CPU or one GPU): ``tests/test_learn_worker.py`` runs it that way.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m privtext.learn.worker", description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="hub name (local cache) or folder of the base model")
    ap.add_argument("--records", type=Path, required=True)
    ap.add_argument("--options", type=Path, default=None)
    ap.add_argument("--adapter-in", type=Path, default=None)
    ap.add_argument("--adapter-out", type=Path, required=True)
    ap.add_argument("--peft-out", type=Path, default=None)
    ap.add_argument("--merged-out", type=Path, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..atomicio import read_jsonl
    from .adapter import load_adapter, save_adapter
    from .dpo import attach_lora
    from .options import DPOOptions
    from .trl_backend import train_dpo_trl
    from .vllm import base_dtype, export_peft, merge_adapter

    options = DPOOptions.model_validate(json.loads(args.options.read_text(encoding="utf-8")) if args.options else {})
    records = [{k: str(r[k]) for k in ("prompt", "chosen", "rejected")} for r in read_jsonl(args.records)]
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    base = AutoModelForCausalLM.from_pretrained(args.model)
    dtype = base_dtype(base)
    model = attach_lora(base, options, rng=np.random.default_rng(args.seed))
    if args.adapter_in is not None:
        load_adapter(model, args.adapter_in)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    result = train_dpo_trl(model, tokenizer, records, options, seed=args.seed, device=device)
    from accelerate import PartialState

    state = PartialState()
    state.wait_for_everyone()
    meta = {"pairs": len(records), "processes": state.num_processes, "result": result.to_dict()}
    if state.is_main_process:
        if args.peft_out is not None:
            export_peft(model, args.peft_out)
        save_adapter(model, args.adapter_out, meta=meta)
        if args.merged_out is not None:  # consumes the model's adapter: last
            merge_adapter(model, args.merged_out, tokenizer=tokenizer, dtype=dtype)
    return 0


if __name__ == "__main__":
    sys.exit(main())
