"""The n-gram analogue of learning from the votes: the Kneser-Ney counts re-estimated with the voted texts added.

The n-gram generator (:mod:`privtext.generate.ngram`) is a table of counts of its public training texts. The cheap
counterpart of a DPO step adds the candidates the private data voted for to those counts, each in proportion to
its released vote:

    c'(h w) = c_public(h w) + Σ_i m_i · c_i(h w),    m_i = min(max_copies, round(s · max(h̃_i, 0))),
    s = share · N_public / Σ_i max(h̃_i, 0)

where h̃_i is candidate i's released (noisy, post-processed) count, N_public the number of public training texts
and ``share`` the voted texts' total weight as a share of the public corpus (so Σ m_i ≈ share · N_public; a negative
noisy count weighs nothing, and all-zero votes change nothing). Integer copies keep the model a Kneser-Ney model
of a (multi)set of documents: the modified discounts, continuation counts and back-off weights are re-estimated as
:class:`~privtext.generate.ngram.KNModel` estimates them, with no change to it. The global model gets every voted
text; each label model the voted texts of its label (a label without a public label model keeps using the global
one). The vocabulary stays the public one (a generated word it lacks becomes ``<unk>``, never drawn), and so do the
length model and the keyphrase index.

Each re-estimate starts from the generator's public model (kept as ``base``), not from the previous re-estimate:
the candidates of an iteration already descend from the earlier ones, and a resumed run rebuilds the model from
the checkpointed candidates and their kept votes alone — nothing to save, no noise drawn.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from ..data.population import Population
from ..errors import ConfigError
from .options import NgramLearnOptions
from .pairs import ReleasedVotes, released_values


def multiplicities(weights: Any, *, n_public: int, share: float, max_copies: int) -> np.ndarray:
    """m_i of the module docstring: copies of each voted text (int64, ≥ 0)."""
    w = np.clip(np.asarray(weights, dtype=np.float64), 0.0, None)
    if w.ndim != 1 or not np.all(np.isfinite(w)):
        raise ConfigError("vote weights must be a finite 1-D array")
    total = w.sum()
    if total <= 0:
        return np.zeros(len(w), dtype=np.int64)
    s = share * n_public / total
    return np.minimum(np.rint(s * w), max_copies).astype(np.int64)


def reweighted_lm(base: Any, candidates: Population, votes: ReleasedVotes, *,
                  label_info: Callable[[int], Any], options: NgramLearnOptions | None = None) -> Any:
    """A new :class:`~privtext.generate.ngram.NgramLM`: ``base``'s public counts plus the candidates' texts, weighted
    by their released votes (module docstring). ``base`` is not changed; ``label_info(group)`` gives a candidate's
    public label (``LabelSpace.info``)."""
    from ..generate.ngram import KNModel, tokenize

    o = options or NgramLearnOptions()
    h = released_values(votes, len(candidates), "reweighted_lm")
    m = multiplicities(h, n_public=base.n_docs, share=o.share, max_copies=o.max_copies)
    extra: list[np.ndarray] = []
    keys_of: list[list[Any]] = []
    for i in np.nonzero(m > 0)[0]:
        doc = np.asarray(base.vocab.encode(tokenize(candidates.texts[i])), dtype=np.int64)
        keys = base.label_keys(label_info(int(candidates.group[i])))
        extra.extend([doc] * int(m[i]))
        keys_of.extend([keys] * int(m[i]))
    new = copy.copy(base)  # vocabulary, lengths, training texts and keyphrase index are shared with base
    if not extra:
        new.label_models = dict(base.label_models)
        return new
    public = [base.doc(i) for i in range(base.n_docs)]
    g = base.global_model
    new.global_model = KNModel(public + extra, order=g.order, vocab_size=g.V, scale=g.scale)
    models = {}
    for key, model in base.label_models.items():
        mine = [d for d, ks in zip(extra, keys_of, strict=True) if key in ks]
        if not mine:
            models[key] = model
            continue
        docs = [public[i] for i in base.label_docs[key]] + mine
        models[key] = KNModel(docs, order=model.order, vocab_size=model.V, scale=model.scale)
    new.label_models = models
    return new


class NgramReweighter:
    """Keeps a generator's public n-gram model and swaps in re-estimates (:func:`reweighted_lm`)."""

    def __init__(self, generator: Any, options: NgramLearnOptions | None = None):
        lm = getattr(generator, "lm", None)
        if lm is None or not hasattr(lm, "global_model"):
            raise ConfigError(f"learn.kind: ngram needs the ngram generator, got {type(generator).__name__}")
        if not hasattr(lm, "label_docs"):
            raise ConfigError("this n-gram model does not keep its label models' training texts; rebuild it")
        self.generator = generator
        self.base = lm
        self.options = options or NgramLearnOptions()

    def apply(self, candidates: Population, votes: ReleasedVotes, *, label_info: Callable[[int], Any]
              ) -> dict[str, Any]:
        """Re-estimate from ``base`` and the voted candidates; the generator samples from the result. Returns what
        changed (public: counts of texts and copies)."""
        h = released_values(votes, len(candidates), "NgramReweighter.apply")
        m = multiplicities(h, n_public=self.base.n_docs, share=self.options.share,
                           max_copies=self.options.max_copies)
        self.generator.lm = reweighted_lm(self.base, candidates, votes, label_info=label_info,
                                          options=self.options)
        return {"texts": int((m > 0).sum()), "copies": int(m.sum()), "public_texts": int(self.base.n_docs)}

    def reset(self) -> None:
        """Back to the public model."""
        self.generator.lm = self.base


__all__ = ["NgramReweighter", "multiplicities", "reweighted_lm"]
