"""Checkpoint and restore the LoRA adapter a learning run trains (NumPy + JSON, never pickle).

A checkpoint is a folder with two files, written atomically in this order:

* ``adapter.npz`` — every adapter weight (peft's ``get_peft_model_state_dict``) as float32;
* ``adapter.json`` — written last, so its presence marks a whole checkpoint: the LoRA configuration, the caller's
  ``meta`` (the iteration, the pairs' count, the options) and the BLAKE2b digest of ``adapter.npz``.

:func:`load_adapter` refuses a folder without ``adapter.json``, a digest that does not match, or a model whose
adapters are configured differently (rank, α, target modules), and copies the weights into the model's adapters in
their dtype and on their device. The weights are functions of released values and public text only
(post-processing), so a checkpoint holds nothing private; the resume rule that uses it is in docs/learn.md.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..atomicio import atomic_path, atomic_write_json
from ..errors import ConfigError, ResumeError
from .dpo import _peft, _torch, is_lora_model

NPZ = "adapter.npz"
META = "adapter.json"
#: the LoRA settings that must agree between a checkpoint and the model it is loaded into
_CHECKED = ("r", "lora_alpha", "target_modules", "bias")


def _digest(path: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _config(model: Any) -> dict[str, Any]:
    cfg = model.peft_config["default"]
    out: dict[str, Any] = {}
    for k in _CHECKED:
        v = getattr(cfg, k, None)
        out[k] = sorted(v) if isinstance(v, (set, frozenset, list, tuple)) else v
    return out


def save_adapter(model: Any, folder: str | Path, *, meta: dict[str, Any] | None = None) -> Path:
    """Write ``model``'s LoRA weights and configuration to ``folder`` (created); returns the folder."""
    if not is_lora_model(model):
        raise ConfigError("save_adapter needs a model with LoRA adapters (privtext.learn.dpo.attach_lora)")
    peft = _peft()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = peft.get_peft_model_state_dict(model)
    arrays = {k: v.detach().float().cpu().numpy() for k, v in state.items()}
    with atomic_path(folder / NPZ) as tmp, open(tmp, "wb") as f:
        np.savez(f, **arrays)
    atomic_write_json(folder / META, {"format": 1, "config": _config(model), "meta": dict(meta or {}),
                                      "tensors": len(arrays), "digest": _digest(folder / NPZ)})
    return folder


def adapter_meta(folder: str | Path) -> dict[str, Any] | None:
    """The ``meta`` of a whole checkpoint in ``folder``, or None when it holds none."""
    p = Path(folder) / META
    if not p.exists():
        return None
    return dict(json.loads(p.read_text(encoding="utf-8")).get("meta") or {})


def load_adapter(model: Any, folder: str | Path) -> dict[str, Any]:
    """Copy the adapter weights kept in ``folder`` into ``model``'s adapters; returns the checkpoint's ``meta``."""
    if not is_lora_model(model):
        raise ConfigError("load_adapter needs a model with LoRA adapters (privtext.learn.dpo.attach_lora)")
    peft = _peft()
    torch = _torch()
    folder = Path(folder)
    meta_path, npz_path = folder / META, folder / NPZ
    if not meta_path.exists() or not npz_path.exists():
        raise ResumeError(f"no whole adapter checkpoint in {folder} (adapter.json is written last)")
    doc = json.loads(meta_path.read_text(encoding="utf-8"))
    if doc.get("digest") != _digest(npz_path):
        raise ResumeError(f"{npz_path} does not match the digest recorded in {meta_path}: the checkpoint is damaged")
    want, have = doc.get("config", {}), _config(model)
    if want != have:
        raise ConfigError(f"the adapter in {folder} was trained with LoRA {want}, the model has {have}")
    current = peft.get_peft_model_state_dict(model)
    with np.load(npz_path, allow_pickle=False) as z:
        names = set(z.files)
        if names != set(current):
            missing, extra = sorted(set(current) - names), sorted(names - set(current))
            raise ResumeError(f"the adapter in {folder} does not fit the model: missing {missing[:3]}, "
                              f"unexpected {extra[:3]}")
        state = {k: torch.from_numpy(np.asarray(z[k])).to(dtype=current[k].dtype, device=current[k].device)
                 for k in z.files}
    peft.set_peft_model_state_dict(model, state)
    return dict(doc.get("meta") or {})


__all__ = ["META", "NPZ", "adapter_meta", "load_adapter", "save_adapter"]
