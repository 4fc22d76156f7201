"""Checkpoints of a pretraining in progress, so an interrupted training continues where it stopped.

A training that will be cached (:mod:`.cache`) writes its state next to the entry it is building::

    <root>/.<entry>.partial/step_00000420/
        tokenizer.json      the trained tokenizer (loaded back, not retrained)
        model.safetensors   the current weights (each parameter once: the tied embedding is one tensor)
        best.safetensors    the weights of the best validation loss so far (early stopping keeps them)
        optimizer.safetensors  AdamW's moments and step count per parameter
        state.json          the step, the learning-rate schedule, the loss curve, the validation history,
                            torch's CPU RNG state (dropout), and the cache key it belongs to
        manifest.json       written last: size and BLAKE2b of each file (:func:`.cache.write_entry`)

A step folder is written into a temporary sibling and renamed into place, then older step folders are removed,
so the highest whole step folder is always a consistent state (a kill at any moment leaves the previous one).
The folder is written under the entry's training lock, removed when the entry is published, and holds public
text only (the tokenizer and a model of the public corpus), like the entry itself.

Every ``checkpoint_seconds`` of training (default 60), on Ctrl-C (``KeyboardInterrupt``: written, then raised
again), and where the test hook asks (``PRIVTEXT_FAULT=lm_pretrain:step_<N>``: written after step N, then the
process is killed with SIGKILL). The batches of a step are a function of the seed and the step alone, so a
resumed training reaches the same weights as one never interrupted (``tests/test_lm_pretrain.py``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from . import cache as lm_cache

STEP = re.compile(r"^step_(\d{8})$")
FAULT_ENV = "PRIVTEXT_FAULT"


def checkpoint_root(entry: Path) -> Path:
    """Where the checkpoints of the training of cache entry ``entry`` go."""
    return entry.parent / f".{entry.name}.partial"


def latest(root: Path) -> tuple[int, Path] | None:
    """(step, folder) of the newest whole checkpoint under ``root``, else None (a damaged one is skipped)."""
    if not root.is_dir():
        return None
    steps = sorted(((int(m.group(1)), p) for p in root.iterdir() if (m := STEP.match(p.name)) and p.is_dir()),
                   reverse=True)
    for step, p in steps:
        if lm_cache.read_entry(p) is not None:
            return step, p
    return None


def save(root: Path, step: int, write: Callable[[Path], Mapping[str, Any]]) -> Path:
    """Write the checkpoint of ``step`` (``write(tmp)`` writes its files), then remove the older ones."""
    folder = root / f"step_{step:08d}"
    if folder.exists():  # the same step again (an interrupt right after a timed checkpoint): keep the first
        shutil.rmtree(folder, ignore_errors=True)
    lm_cache.write_entry(folder, write)
    for p in root.iterdir():
        m = STEP.match(p.name)
        if m and int(m.group(1)) < step:
            shutil.rmtree(p, ignore_errors=True)
    return folder


def clear(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)


def fault(step: int) -> bool:
    """Whether the test hook asks to stop after ``step`` (1-based: the number of steps done)."""
    return os.environ.get(FAULT_ENV) == f"lm_pretrain:step_{step}"


def kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


# ------------------------------------------------------------------------------------------ tensors


def named_parameters(model: Any) -> dict[str, Any]:
    """Each distinct parameter once, by its first name (GPT-2's tied embedding: ``transformer.wte.weight``)."""
    return {n: p.detach().cpu().contiguous().clone() for n, p in model.named_parameters()}


def load_parameters(model: Any, tensors: Mapping[str, Any]) -> None:
    import torch

    params = dict(model.named_parameters())
    if set(params) != set(tensors):
        raise ValueError(f"checkpoint parameters {sorted(set(tensors) ^ set(params))[:4]} do not match the model")
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(tensors[n].to(p.device, p.dtype))


def optimizer_tensors(opt: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tensors, JSON) of a torch optimiser's state: each per-parameter state tensor as ``<index>.<name>``."""
    sd = opt.state_dict()
    tensors: dict[str, Any] = {}
    for idx, st in sd["state"].items():
        for k, v in st.items():
            tensors[f"{idx}.{k}"] = v.detach().cpu().contiguous().clone()
    return tensors, {"param_groups": sd["param_groups"]}


def load_optimizer(opt: Any, tensors: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
    state: dict[int, dict[str, Any]] = {}
    for name, v in tensors.items():
        idx, _, k = name.partition(".")
        state.setdefault(int(idx), {})[k] = v
    opt.load_state_dict({"state": state, "param_groups": meta["param_groups"]})


def write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, default=float), encoding="utf-8")


__all__ = ["checkpoint_root", "clear", "fault", "kill", "latest", "load_optimizer", "load_parameters",
           "named_parameters", "optimizer_tensors", "save"]
