"""Sampling given control codes: batched ancestral sampling with a key/value cache and the format's constraints.

A prompt is a token list ending with ``<|text|>`` (free format: write until ``<|eos|>``) or ``<|sep|>`` (infill:
write ``n_blanks`` fills, each closed by ``<|answer|>``). At every step the control codes the format does not
allow are masked before temperature, top-k and nucleus (top-p) filtering:

* never: ``<|bos|>``, ``<|pad|>``, ``<|text|>``, ``<|infill|>``, ``<|blank|>``, ``<|sep|>``, label codes;
* free: no ``<|answer|>``; no ``<|eos|>`` before ``min_new_tokens``;
* infill: no ``<|eos|>`` before the last fill is closed; no ``<|answer|>`` right after ``<|sep|>`` or another
  ``<|answer|>`` (a fill is never empty); the row stops when its ``n_blanks``-th fill is closed.

Prompts are sorted by length and batched with left padding (explicit position ids, so padding does not shift
positions). The draws come from a ``torch.Generator`` seeded from the caller's ``numpy`` generator
(:func:`privtext.rng.spawn_seed`), so neither torch's nor numpy's global state is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...rng import spawn_seed
from .codes import ANSWER, EOS, PAD


@dataclass(frozen=True)
class SamplingSettings:
    """How the lm generator samples: softmax temperature, nucleus ``top_p``, ``top_k`` (0: off), at most
    ``max_new_tokens`` and (free text) at least ``min_new_tokens`` tokens before ``<|eos|>``, and ``batch_size``
    prompts per forward pass. Raises :class:`~privtext.errors.ConfigError` on a value out of range."""

    temperature: float = 1.0
    top_p: float = 0.95
    top_k: int = 0
    max_new_tokens: int = 256
    min_new_tokens: int = 4
    batch_size: int = 64

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be > 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0 or self.max_new_tokens < 1 or self.min_new_tokens < 0 or self.batch_size < 1:
            raise ConfigError("top_k >= 0, max_new_tokens >= 1, min_new_tokens >= 0 and batch_size >= 1 required")


NUCLEUS_CANDIDATES = 256  # top-p looks at this many most likely tokens first (a full sort only when needed)


def _draw(logits: Any, s: SamplingSettings, gen: Any) -> Any:
    """One token per row of (rows, vocab) float logits (-inf marks a banned token): temperature, top-k, nucleus
    (top-p) truncation, then an inverse-CDF draw of one uniform per row.

    Top-p keeps the most likely tokens while the mass of the strictly more likely ones is at most ``top_p``. It is
    computed on the ``NUCLEUS_CANDIDATES`` most likely tokens (``torch.topk``), which is exact whenever their mass
    exceeds ``top_p`` (every later token then has more than ``top_p`` before it); otherwise on a full sort. Without
    top-k and top-p no sort is needed: the draw runs on the unsorted probabilities."""
    import torch

    logits = logits / s.temperature
    V = logits.shape[-1]
    if s.top_k and s.top_k < V:
        vals, idx = torch.topk(logits, s.top_k, dim=-1)
    elif s.top_p < 1.0:
        k = min(NUCLEUS_CANDIDATES, V)
        vals, idx = torch.topk(logits, k, dim=-1)
        if k < V:
            mass = torch.exp(vals - torch.logsumexp(logits, dim=-1, keepdim=True)).sum(-1)
            if bool((mass <= s.top_p).any()):
                vals, idx = torch.sort(logits, descending=True, dim=-1)
    else:
        vals, idx = logits, None
    probs = torch.softmax(vals, dim=-1)
    if s.top_p < 1.0:
        before = torch.cumsum(probs, dim=-1) - probs  # mass of the strictly more likely tokens
        probs = probs.masked_fill(before > s.top_p, 0.0)
    cdf = torch.cumsum(probs, dim=-1)
    u = torch.rand((cdf.shape[0], 1), generator=gen, device=cdf.device, dtype=cdf.dtype)
    u = u.clamp(min=torch.finfo(cdf.dtype).tiny) * cdf[:, -1:]  # u > 0: a leading zero-mass token is never hit
    j = torch.searchsorted(cdf, u).clamp(max=cdf.shape[-1] - 1)
    # a zero-probability token (banned, -inf) never gets the draw: searchsorted returns the first index whose
    # cumulative mass reaches u, which carries mass itself
    return (j if idx is None else idx.gather(1, j)).squeeze(1)


def _select_rows(past: Any, rows: Any) -> Any:
    """The key/value cache of the batch rows ``rows`` (a Cache object or the legacy tuple of (key, value))."""
    if hasattr(past, "batch_select_indices"):
        past.batch_select_indices(rows)
        return past
    return tuple(tuple(t[rows] for t in layer) for layer in past)


def _cache_kwargs(model: Any) -> tuple[str, dict[str, int]]:
    """(the forward argument that takes the key/value cache, extra arguments for the prompt pass): transformers
    renamed ``past_key_values`` to ``cache``; ``logits_to_keep`` (``num_logits_to_keep`` before 4.50) skips the
    output layer on all but the last prompt position."""
    import inspect

    params = inspect.signature(model.forward).parameters
    name = "cache" if "cache" in params else "past_key_values"
    extra = {k: 1 for k in ("logits_to_keep", "num_logits_to_keep") if k in params}
    return name, dict(list(extra.items())[:1])


def _past(res: Any) -> Any:
    cache = getattr(res, "cache", None) if "cache" in getattr(res, "keys", lambda: ())() else None
    return cache if cache is not None else res.past_key_values


def sample(model: Any, prompts: Sequence[Sequence[int]], rng: np.random.Generator, *, n_special: int,
           n_blanks: Sequence[int] | None = None, settings: SamplingSettings | None = None,
           stats: dict[str, int] | None = None) -> list[list[int]]:
    """New token ids for each prompt (without the prompt; free rows end with ``<|eos|>`` when they finished,
    infill rows hold the fills and their ``<|answer|>`` codes). ``n_blanks[i] = 0`` marks a free-format prompt."""
    s = settings or SamplingSettings()
    blanks = [0] * len(prompts) if n_blanks is None else [int(b) for b in n_blanks]
    if len(blanks) != len(prompts):
        raise ConfigError(f"{len(blanks)} blank counts for {len(prompts)} prompts")
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out: list[list[int]] = [[] for _ in prompts]
    for b in range(0, len(order), s.batch_size):
        rows = order[b:b + s.batch_size]
        new = _sample_batch(model, [list(prompts[i]) for i in rows], [blanks[i] for i in rows],
                            spawn_seed(rng), n_special=n_special, s=s)
        for i, ids in zip(rows, new, strict=True):
            out[i] = ids
        if stats is not None:
            stats["calls"] = stats.get("calls", 0) + 1
            stats["prompt_tokens"] = stats.get("prompt_tokens", 0) + sum(len(prompts[i]) for i in rows)
            stats["completion_tokens"] = stats.get("completion_tokens", 0) + sum(len(x) for x in new)
    return out


def _sample_batch(model: Any, prompts: list[list[int]], blanks: list[int], seed: int, *, n_special: int,
                  s: SamplingSettings) -> list[list[int]]:
    import torch

    device = next(model.parameters()).device
    n_pos = int(model.config.n_positions)
    width = max(len(p) for p in prompts)
    if width >= n_pos:
        raise ConfigError(f"a prompt of {width} tokens leaves no room to generate (the model has {n_pos} positions)")
    steps = min(s.max_new_tokens, n_pos - width)
    B = len(prompts)
    ids = torch.full((B, width), PAD, dtype=torch.long)
    mask = torch.zeros((B, width), dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, width - len(p):] = torch.as_tensor(p)
        mask[r, width - len(p):] = 1
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    infill = torch.tensor([b > 0 for b in blanks], device=device)
    need = torch.tensor(blanks, device=device)
    answers = torch.zeros(B, dtype=torch.long, device=device)
    last_answer = infill.clone()  # after <|sep|>: no empty fill
    done = torch.zeros(B, dtype=torch.bool, device=device)
    generated = torch.zeros(B, dtype=torch.long, device=device)
    gen = torch.Generator(device=device).manual_seed(seed)
    out = torch.full((B, steps), PAD, dtype=torch.long, device=device)
    cache_kw, extra = _cache_kwargs(model)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            res = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **extra)
            past, logits = _past(res), res.logits[:, -1].float()
            next_pos = pos[:, -1] + 1
            rows = torch.arange(B, device=device)  # original row of each row still in the batch
            for t in range(steps):
                eos_l, ans_l = logits[:, EOS].clone(), logits[:, ANSWER].clone()
                logits[:, :n_special] = float("-inf")
                allow_eos = torch.where(infill, answers >= need, generated >= s.min_new_tokens)
                logits[:, EOS] = torch.where(allow_eos, eos_l, float("-inf"))
                logits[:, ANSWER] = torch.where(infill & ~last_answer, ans_l, float("-inf"))
                nxt = _draw(logits, s, gen)
                nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
                out[rows, t] = nxt
                live = ~done
                generated += live.long()
                is_answer = (nxt == ANSWER) & live
                answers += is_answer.long()
                last_answer = torch.where(live, is_answer, last_answer)
                done = done | (nxt == EOS) | (infill & (answers >= need))
                if bool(done.all()) or t == steps - 1:
                    break
                n_live = int((~done).sum())
                if n_live <= len(rows) // 2:  # drop finished rows: the step cost follows the rows still writing
                    keep = torch.nonzero(~done).squeeze(1)
                    past = _select_rows(past, keep)
                    rows, nxt, mask, next_pos = rows[keep], nxt[keep], mask[keep], next_pos[keep]
                    infill, need, answers, generated = infill[keep], need[keep], answers[keep], generated[keep]
                    last_answer, done = last_answer[keep], done[keep]
                mask = torch.cat([mask, torch.ones((len(rows), 1), dtype=mask.dtype, device=device)], dim=1)
                res = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=next_pos[:, None],
                            use_cache=True, **{cache_kw: past})
                past, logits = _past(res), res.logits[:, -1].float()
                next_pos = next_pos + 1
    finally:
        model.train(was_training)
    return [[int(x) for x in row if int(x) != PAD] for row in out.cpu().tolist()]


__all__ = ["SamplingSettings", "sample"]
