"""Planted faults: broken variants of privtext that its audits must catch (tests and ``benchmarks/audit_*.py``).

Each fault is a context manager that patches the library while it is active and restores it on exit. They act at
the level a real bug would: the noise source, the generator, the secret detector — or, for faults the lead has
since fixed in the method code, the ledger a run recorded (:func:`plant_recorded_release`), so the audit's
fixture keeps the old wrong record whatever the code does now.

* :func:`scaled_noise` — every privacy noise generator (:func:`privtext.rng.noise_rng`) draws ``factor`` × the
  Gaussian and Laplace noise it is asked for (½: halved noise; 0: noise removed), while every event, ledger entry
  and statement still records the full noise;
* :class:`PrivateTextInPrompts` — the generators put a private record into every prompt (as an "example") and
  copy it into their output, as an LLM shown private text may;
* :class:`DetectorMisses` — the secret detector misses the planted secrets in all holders but the first of each
  (those records become public: they train the generator and vote without noise);
* :func:`plant_recorded_release` — rewrite a finished run's ledger entries to an old, wrong sensitivity and the
  noise it implied (issue 21: Aug-PE's secret-group vocabulary at Δ₁ = r, DP-KPS's replace-one label shares at
  Δ₁ = 1);
* :func:`dpsgd_noise_removed`, :func:`dpsgd_clipping_removed` — DP-SGD (dpft) adds no noise to the clipped sum, or
  clips no record, while its ledger and statement still record σ and C (issue 36: such a run said ``private:
  true`` and passed ``privtext audit``);
* :func:`plant_noise_claim` — rewrite a finished run's ledger so that its entries claim ``factor`` × the noise the
  code drew (event, noise std, secret events): issue 36's "ledger claims twice the vote noise", which an audit that
  re-runs each mechanism at the ledger's σ passes.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np


@contextlib.contextmanager
def patched_everywhere(module: str, attr: str, replacement: Any) -> Iterator[Any]:
    """Replace ``module.attr`` and every alias of it in loaded ``privtext`` modules (``from x import attr``);
    on exit, restore every alias — including ones made while the patch was active. Yields the original."""
    mod = importlib.import_module(module)
    original = getattr(mod, attr)

    def aliases(obj: Any) -> list[tuple[Any, str]]:
        out = []
        for name, m in list(sys.modules.items()):
            if m is None or not (name == "privtext" or name.startswith("privtext.")):
                continue
            for k, v in list(vars(m).items()):
                if v is obj:
                    out.append((m, k))
        return out

    for m, k in aliases(original):
        setattr(m, k, replacement)
    try:
        yield original
    finally:
        for m, k in aliases(replacement):
            setattr(m, k, original)


class _Scaled(np.random.Generator):
    """A generator over the same bit stream whose Gaussian and Laplace draws are ``factor`` times as wide."""

    factor = 1.0

    def normal(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:  # type: ignore[override]
        return super().normal(loc, np.asarray(scale, dtype=np.float64) * self.factor, size)

    def laplace(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:  # type: ignore[override]
        return super().laplace(loc, np.asarray(scale, dtype=np.float64) * self.factor, size)


@contextlib.contextmanager
def scaled_noise(factor: float) -> Iterator[None]:
    """Planted fault: every privacy noise generator draws ``factor`` × its Gaussian and Laplace noise."""
    cls = type("ScaledNoise", (_Scaled,), {"factor": float(factor)})

    def faulty(*args: Any, **kwargs: Any) -> np.random.Generator:
        return cls(original(*args, **kwargs).bit_generator)

    with patched_everywhere("privtext.rng", "noise_rng", faulty) as original:
        yield


class PrivateTextInPrompts:
    """Planted fault: every generator call puts ``per_prompt`` private records into the prompt of each output
    (round robin over ``texts``, as few-shot examples) and returns the first as its output. Prime it with the
    private texts (``prime``, e.g. from the end-to-end audit's ``on_canaries`` hook) and activate it with
    ``active()``."""

    OPS = ("random", "variation", "seeded", "contrastive")

    def __init__(self, texts: Sequence[str] = (), per_prompt: int = 2):
        self.texts = list(texts)
        self.per_prompt = int(per_prompt)
        self._next = 0

    def prime(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)

    def _take(self) -> str:
        t = self.texts[self._next % len(self.texts)]
        self._next += 1
        return t

    @contextlib.contextmanager
    def active(self) -> Iterator[PrivateTextInPrompts]:
        from ..generate.base import BaseGenerator

        originals = {op: getattr(BaseGenerator, op) for op in self.OPS}
        fault = self

        def wrap(op: str, orig: Callable[..., list[str]]) -> Callable[..., list[str]]:
            def faulty(self: Any, *args: Any, **kwargs: Any) -> list[str]:
                out = list(orig(self, *args, **kwargs))
                if not fault.texts:
                    return out
                for i in range(len(out)):
                    examples = [fault._take() for _ in range(fault.per_prompt)]
                    self._log(op, "Here are examples of the text to write:\n" + "\n".join(examples)
                              + "\nWrite one like them.", {"planted_fault": "private text in prompt"})
                    out[i] = examples[0]
                return out

            return faulty

        for op, orig in originals.items():
            setattr(BaseGenerator, op, wrap(op, orig))
        try:
            yield self
        finally:
            for op, orig in originals.items():
                setattr(BaseGenerator, op, orig)


class DetectorMisses:
    """Planted fault: the secret detector does not see ``values`` in the texts ``missed`` (for the end-to-end
    audit's canaries: in every holder but the first of each planted secret — ``prime`` from its ``on_canaries``
    hook). The records it misses become public: they train the generator and vote exactly."""

    def __init__(self) -> None:
        self.missed: set[str] = set()
        self.values: list[str] = []

    def prime(self, canaries: Sequence[Any]) -> None:
        for c in canaries:
            if getattr(c, "secret", None):
                self.values.append(c.secret)
                self.missed.update(c.holders[1:])

    def _hide(self, text: str) -> str:
        if text not in self.missed:
            return text
        for v in self.values:
            text = text.replace(v, "the number on file")
        return text

    @contextlib.contextmanager
    def active(self) -> Iterator[DetectorMisses]:
        fault = self

        class Missing:
            def __init__(self, inner: Any):
                self.inner = inner

            def detect(self, texts: Sequence[str]) -> Any:
                return self.inner.detect([fault._hide(t) for t in texts])

            def __getattr__(self, name: str) -> Any:
                return getattr(self.inner, name)

        def faulty(spec: Any) -> Any:
            return Missing(original(spec))

        with patched_everywhere("privtext.secrets", "build_detector", faulty) as original:
            yield self


def plant_recorded_release(run_dir: str | Path, match: Callable[[dict[str, Any]], bool], *, sensitivity: float,
                           laplace_scale: float | None = None, noise_std: float | None = None) -> int:
    """Rewrite the ledger entries of a finished run that ``match`` (a predicate on the entry's JSON) to the given
    sensitivity and noise (a Laplace entry: ``laplace_scale`` b, noise std √2·b; a Gaussian one: ``noise_std``),
    keeping their events: the record a method with that bug wrote. Returns the number of entries changed."""
    from ..rundir import RunDir

    ledger = RunDir(run_dir).require().ledger
    lines = ledger.read_text(encoding="utf-8").splitlines()
    out, n = [], 0
    for line in lines:
        if not line.strip():
            continue
        e = json.loads(line)
        if match(e):
            e["sensitivity"] = float(sensitivity)
            if laplace_scale is not None:
                e.setdefault("meta", {})["laplace_scale"] = float(laplace_scale)
                e["noise_std"] = float(np.sqrt(2.0) * laplace_scale)
            if noise_std is not None:
                e["noise_std"] = float(noise_std)
            n += 1
        out.append(json.dumps(e, sort_keys=False))
    ledger.write_text("".join(x + "\n" for x in out), encoding="utf-8")
    return n


@contextlib.contextmanager
def dpsgd_noise_removed() -> Iterator[None]:
    """Planted fault: DP-SGD's noise draw returns the clipped sum unchanged (both noise sources), while every
    event, ledger entry and statement still records the noise."""
    from ..mechanisms import dpsgd

    def identity(v: Any, std: Any, rng: Any, **kw: Any) -> Any:
        return np.asarray(v, dtype=np.float64)

    def identity_torch(t: Any, std: Any, generator: Any = None, **kw: Any) -> Any:
        return t.clone()

    real = dpsgd.add_gaussian, dpsgd.add_gaussian_torch
    dpsgd.add_gaussian, dpsgd.add_gaussian_torch = identity, identity_torch  # type: ignore[assignment]
    try:
        yield
    finally:
        dpsgd.add_gaussian, dpsgd.add_gaussian_torch = real  # type: ignore[assignment]


@contextlib.contextmanager
def dpsgd_clipping_removed() -> Iterator[None]:
    """Planted fault: Opacus' per-record clipping runs with a norm of 10¹², so every record's gradient enters the
    sum whole, while the ledger records Δ = C and the noise σC."""
    from opacus.optimizers import DPOptimizer

    real = DPOptimizer.clip_and_accumulate

    def unclipped(self: Any) -> None:
        c = self.max_grad_norm
        self.max_grad_norm = 1e12
        try:
            real(self)
        finally:
            self.max_grad_norm = c

    DPOptimizer.clip_and_accumulate = unclipped  # type: ignore[method-assign]
    try:
        yield
    finally:
        DPOptimizer.clip_and_accumulate = real  # type: ignore[method-assign]


def plant_noise_claim(run_dir: str | Path, factor: float, match: Callable[[dict[str, Any]], bool] | None = None
                      ) -> int:
    """Rewrite the ledger entries of a finished run that ``match`` (default: every entry) to claim ``factor`` × the
    noise they drew: the event's noise multiplier (a Laplace event's scale, a DP-SGD step's σ, SecPE's mixtures),
    the recorded noise std and Laplace scale. Δ is kept, so the entry is self-consistent and its implied privacy
    equals its claim — what a method that records one σ and draws another writes. Returns the entries changed."""
    from ..rundir import RunDir

    def scaled(d: Any) -> Any:
        if isinstance(d, dict):
            return {k: (float(v) * factor if k in ("noise_multiplier", "standard_deviation", "laplace_scale",
                                                     "noise_std") and isinstance(v, (int, float)) else scaled(v))
                    for k, v in d.items()}
        if isinstance(d, list):
            return [scaled(v) for v in d]
        return d

    ledger = RunDir(run_dir).require().ledger
    out, n = [], 0
    for line in ledger.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        e = json.loads(line)
        if match is None or match(e):
            e = {k: (scaled(v) if k in ("event", "meta", "secret_events") else v) for k, v in e.items()}
            e["noise_std"] = float(e["noise_std"]) * factor
            n += 1
        out.append(json.dumps(e, sort_keys=False))
    ledger.write_text("".join(x + "\n" for x in out), encoding="utf-8")
    return n


def _entry(run_dir: str | Path, key: str) -> dict[str, Any]:
    from ..rundir import RunDir

    lines = RunDir(run_dir).require().ledger.read_text(encoding="utf-8").splitlines()
    return next(json.loads(x) for x in lines if x.strip() and json.loads(x)["key"] == key)


def plant_old_vocabulary_sensitivity(run_dir: str | Path) -> int:
    """Issue 21, item 1, as main recorded it: Aug-PE's DP vocabulary under ``sensitivity: secret_group`` at
    Δ₁ = r (one record) and scale r/ε_v, instead of k·r."""
    from ..runner import load_run_config

    r = int(dict(load_run_config(run_dir).augpe.options()).get("vocabulary_r", 10))
    eps = float(_entry(run_dir, "vocabulary")["meta"]["epsilon"])
    return plant_recorded_release(run_dir, lambda e: e["key"] == "vocabulary", sensitivity=r, laplace_scale=r / eps)


def plant_old_label_sensitivity(run_dir: str | Path) -> int:
    """Issue 21, item 2, as main recorded it: DP-KPS's label shares under ``neighbouring: replace_one`` at
    Δ₁ = 1 and scale 1/ε_labels, instead of 2."""
    eps = float(_entry(run_dir, "labels/histogram")["meta"]["epsilon"])
    return plant_recorded_release(run_dir, lambda e: e["key"] == "labels/histogram", sensitivity=1.0,
                                  laplace_scale=1.0 / eps)


def private_texts_of(canaries: Collection[Any], corpus_texts: Sequence[str]) -> list[str]:
    """The texts of a private corpus plus the included canaries (what the prompt fault leaks)."""
    return [*corpus_texts, *(c.text for c in canaries if c.included)]



def with_rare_terms(public: Any, n_terms: int, *, per_term: int = 3, seed: int = 0) -> Any:
    """``public`` plus ``per_term`` notes for each of ``n_terms`` made-up drug names ("… Discussed zorvaxil."):
    a public corpus whose vocabulary holds rare terms, for the end-to-end audit's "distinctive canaries" (each
    canary can then carry public words no other record brings to the private data). Labels are copied from
    the notes the sentences are appended to."""
    from ..data import Corpus

    rng = np.random.default_rng(seed)
    syll = ["zor", "vax", "il", "quen", "tra", "mol", "pex", "dra", "lin", "vor", "ost", "ryn", "cal", "tiv"]
    terms: list[str] = []
    while len(terms) < n_terms:
        t = "".join(rng.choice(syll, size=3)) + "ine"
        if t not in terms:
            terms.append(t)
    texts, ids = list(public.texts), list(public.ids)
    labels = {c: list(v) for c, v in public.labels.items()}
    for j, t in enumerate(terms):
        for k in range(per_term):
            i = int(rng.integers(len(public)))
            texts.append(f"{public.texts[i]} Discussed {t} with the patient.")
            ids.append(f"rare-{j}-{k}")
            for c in labels:
                labels[c].append(public.labels[c][i])
    return Corpus(ids=tuple(ids), texts=tuple(texts), labels={c: tuple(v) for c, v in labels.items()},
                  name=f"{public.name} + {n_terms} rare terms")


__all__ = ["DetectorMisses", "PrivateTextInPrompts", "dpsgd_clipping_removed", "dpsgd_noise_removed",
           "patched_everywhere", "plant_noise_claim", "plant_old_label_sensitivity", "plant_old_vocabulary_sensitivity",
           "plant_recorded_release", "private_texts_of", "scaled_noise", "with_rare_terms"]
