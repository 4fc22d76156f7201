"""Preference pairs from released votes only: which generated text the private data preferred, and over which.

Everything here is post-processing. A pair is built from three things, none of them private:

* the candidates (:class:`~privtext.data.population.Population`): texts a generator wrote, their public label group,
  their parent (the selected sample a variation was made from) and the generator that wrote them;
* a vote histogram **as released**: a :class:`ReleasedVotes`, which can only be made from what the
  :class:`~privtext.privacy.release.ReleaseKeeper` kept on disk for a release the ledger holds
  (:meth:`ReleasedVotes.kept`), checked equal to such a kept value (:meth:`ReleasedVotes.checked`), or declared the
  scorer's post-processing of recorded, kept releases (:meth:`ReleasedVotes.post_processed`: SecPE's centre votes,
  which the engine receives as its histogram). A bare array is refused: the builders have no parameter through
  which an exact count could arrive, and no keeper, scorer or private embedding is passed to them;
* the options (:class:`~privtext.learn.options.PairOptions`) and a generator of public randomness for ties.

The rule (POPri, arXiv 2504.16438 §3; its code ranks 10 completions of one prompt by their noisy score and pairs the
first with the fifth): the candidates are grouped — variations of the same parent (with the parent's survivor),
or the completions of the same label's prompt at iteration 0, cut into chunks of ``group_size`` in the order they
were written — and ranked by their released count (ties in random order). The chosen text is rank 1; the
rejected one rank R: ``reject_rank`` k ≥ 2 (clipped to the group) or ⌈q·n⌉ for a fraction q (POPri's 5th of 10 is
q = 0.5). With ``pairs_per_group`` m, rank i is paired with rank R + i − 1 for i = 1..m. A pair is kept only when
the chosen count exceeds the rejected one by more than ``min_margin`` (equal counts — the thresholded histogram's
many zeros — say nothing) and the two texts differ.

WASP (:func:`wasp_pairs`): per generator and label, in chunks of ``group_size`` samples, the top of the released
nearest histogram H̃ⁿ is chosen and the top of the released furthest histogram H̃ᶠ rejected (wasp.txt Eq 7's
better and worse examples), one set of pairs per generator it weights; a pair is kept when the chosen text's net
H̃ⁿ − H̃ᶠ exceeds the rejected one's.

:func:`check_pair_texts` runs the run's :class:`~privtext.guard.PrivateGuard` on every text of the pairs before a
trainer sees them, with the prompt audit's rules (:func:`check_generated_text`): a private record or private-only
text that no public text holds and no generator wrote stops the step (:class:`~privtext.errors.PrivacyCheckError`,
exit 3); a text a generator wrote that equals a short private record does not. Every refusal of what may teach
the generator (a bare array, a histogram that is not the kept value) is a :class:`PrivacyCheckError` too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..data.population import Population
from ..errors import ConfigError, PrivacyCheckError, PrivacyError
from .options import PairOptions

_TOKEN = object()  # only this module's constructors make a ReleasedVotes


class ReleasedVotes:
    """A vote histogram over a population's candidates, as released (see the module docstring).

    ``values`` is read-only; ``keys`` are the ledger keys of the releases it comes from; ``how`` says which
    constructor vouched for it (``kept``, ``checked`` or ``post_processed``)."""

    __slots__ = ("how", "keys", "values")

    def __init__(self, values: np.ndarray, keys: tuple[str, ...], how: str, *, _token: object = None):
        if _token is not _TOKEN:
            raise PrivacyCheckError("a ReleasedVotes is made by ReleasedVotes.kept / checked / post_processed (from "
                                    "the keeper's kept release), never from an array directly")
        v = np.array(values, dtype=np.float64, copy=True)
        if v.ndim != 1 or not np.all(np.isfinite(v)):
            raise PrivacyError(f"released votes must be a finite 1-D histogram, got shape {v.shape}")
        v.setflags(write=False)
        self.values, self.keys, self.how = v, tuple(keys), how

    def __len__(self) -> int:
        return len(self.values)

    def take(self, idx: Any) -> ReleasedVotes:
        """The bins ``idx`` (a part of the same released histogram, for a subset of its candidates)."""
        return ReleasedVotes(self.values[np.asarray(idx, dtype=np.int64)], self.keys, self.how, _token=_TOKEN)

    def __repr__(self) -> str:
        return f"ReleasedVotes({len(self)} bins, {self.how} from {', '.join(self.keys)})"

    # ------------------------------------------------------------------ constructors
    @classmethod
    def kept(cls, keeper: Any, key: str, field: str) -> ReleasedVotes:
        """The array ``field`` that ``keeper`` kept for release ``key`` (read from the keeper's file; the ledger must
        hold ``key``). Aug-PE: ``votes/iter_NNN``, field ``noisy``; WASP: ``votes/round_NNN``, ``nearest`` and
        ``furthest``."""
        return cls(_kept_array(keeper, key, field), (key,), "kept", _token=_TOKEN)

    @classmethod
    def checked(cls, values: Any, keeper: Any, key: str, field: str) -> ReleasedVotes:
        """``values`` (what the engine holds) after checking that they equal what ``keeper`` kept for ``key``:
        :class:`PrivacyError` when they differ (an exact count handed over instead of the released one)."""
        kept = _kept_array(keeper, key, field)
        v = np.asarray(values, dtype=np.float64)
        if v.shape != kept.shape or not np.array_equal(v, kept):
            raise PrivacyCheckError(f"the votes given to the pair builder are not the value kept for release {key!r} "
                                    f"(field {field!r}): only released values may teach the generator")
        return cls(kept, (key,), "checked", _token=_TOKEN)

    @classmethod
    def post_processed(cls, values: Any, keeper: Any, keys: Sequence[str]) -> ReleasedVotes:
        """A histogram the scorer computed from the releases ``keys`` alone (post-processing: SecPE's noisy centres
        voting for candidates). Each key must be recorded in the ledger and kept by ``keeper``; the values are the
        scorer's output as the engine received it (``ScoreResult.histogram``)."""
        keys = tuple(keys)
        if not keys:
            raise PrivacyCheckError("a post-processed histogram must name the releases it was computed from")
        for k in keys:
            _kept_path(keeper, k)
        return cls(np.asarray(values, dtype=np.float64), keys, "post_processed", _token=_TOKEN)


def _kept_path(keeper: Any, key: str) -> Any:
    ledger = getattr(keeper, "ledger", None)
    path_for = getattr(keeper, "path_for", None)
    if ledger is None or path_for is None:
        raise PrivacyCheckError(f"release {key!r}: a keeper with a ledger and kept values (ReleaseKeeper) is "
                                f"needed, got {type(keeper).__name__}")
    if not ledger.has(key):
        raise PrivacyCheckError(f"release {key!r} is not in the ledger: there is no released value to learn from")
    path = path_for(ledger.get(key).release)
    if not path.exists():
        raise PrivacyCheckError(f"release {key!r} is in the ledger but its value was never kept ({path}): nothing "
                                "released to learn from")
    return path


def _kept_array(keeper: Any, key: str, field: str) -> np.ndarray:
    path = _kept_path(keeper, key)
    with np.load(path, allow_pickle=False) as z:
        if field not in z.files:
            raise PrivacyCheckError(f"release {key!r} kept no array {field!r} (it has {', '.join(z.files)})")
        return np.asarray(z[field], dtype=np.float64)


def released_values(votes: ReleasedVotes, n: int, what: str) -> np.ndarray:
    """The one place the builders read vote values: the released histogram, refused unless it is one."""
    if not isinstance(votes, ReleasedVotes):
        raise PrivacyCheckError(f"{what} takes a ReleasedVotes (the keeper's released histogram), got "
                                f"{type(votes).__name__}: an array could hold exact counts")
    if len(votes) != n:
        raise ConfigError(f"{what}: {len(votes)} released votes for {n} candidates")
    return votes.values


# ------------------------------------------------------------------ pairs


@dataclass(frozen=True)
class PreferencePair:
    """One preference: for label group ``group`` (its prompt), the private data preferred ``chosen`` over
    ``rejected``. ``chosen_votes`` / ``rejected_votes`` are released values (round them before showing them
    outside ``private/``); ``source`` names the group they were ranked in."""

    group: int
    chosen: str
    rejected: str
    chosen_votes: float
    rejected_votes: float
    generator: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PreferencePair:
        return cls(group=int(d["group"]), chosen=str(d["chosen"]), rejected=str(d["rejected"]),
                   chosen_votes=float(d["chosen_votes"]), rejected_votes=float(d["rejected_votes"]),
                   generator=str(d["generator"]), source=str(d["source"]))


def reject_position(options: PairOptions, n: int) -> int:
    """The 1-based rank of the rejected text in a group of ``n`` (module docstring): k clipped to n, or ⌈q·n⌉
    (at least 2) for a fraction q."""
    r = options.reject_rank
    k = min(int(r), n) if r >= 1 else max(2, math.ceil(r * n))
    return min(k, n)


def candidate_groups(candidates: Population, group_size: int | None) -> list[tuple[str, np.ndarray]]:
    """(name, indices) of the groups whose members are ranked against each other: the candidates of one generator
    and label group with the same parent (variations and the parent's survivor), and those without a parent
    (iteration 0's completions of the label's prompt) cut into chunks of ``group_size`` in written order."""
    by: dict[tuple[str, int, str | None], list[int]] = {}
    for i in range(len(candidates)):
        by.setdefault((candidates.generator[i], int(candidates.group[i]), candidates.parent[i]), []).append(i)
    out: list[tuple[str, np.ndarray]] = []
    for (gen, g, parent), idx in by.items():
        out += _chunks(f"{gen}/g{g}/" + (f"parent {parent}" if parent is not None else "prompt"), idx, group_size)
    return out


def _chunks(name: str, idx: list[int], size: int | None) -> list[tuple[str, np.ndarray]]:
    """``idx`` cut into consecutive chunks of ``size`` (None: one chunk), named ``name`` or ``name #c``."""
    size = size or len(idx)
    return [(name if len(idx) <= size else f"{name} #{c}", np.asarray(idx[s:s + size], dtype=np.int64))
            for c, s in enumerate(range(0, len(idx), size))]


def _ranked(values: np.ndarray, idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``idx`` ordered by released value, highest first, ties in random order."""
    jitter = rng.random(len(idx))
    return idx[np.lexsort((jitter, -values[idx]))]


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def preference_pairs(candidates: Population, votes: ReleasedVotes, options: PairOptions | None = None, *,
                     rng: np.random.Generator) -> list[PreferencePair]:
    """Pairs for Aug-PE and SecPE (the evolution loop): see the module docstring. ``votes`` is the released
    histogram over ``candidates`` (one bin each); ``rng`` breaks ties (public randomness: ``derive(seed, ...)``)."""
    o = options or PairOptions()
    h = released_values(votes, len(candidates), "preference_pairs")
    pairs: list[PreferencePair] = []
    for name, idx in candidate_groups(candidates, o.group_size):
        if len(idx) < 2:
            continue
        order = _ranked(h, idx, rng)
        R = reject_position(o, len(order))
        for i in range(o.pairs_per_group):
            c, r = i, R - 1 + i
            if r >= len(order) or r <= c:
                break
            a, b = int(order[c]), int(order[r])
            if h[a] - h[b] > o.min_margin and not _same(candidates.texts[a], candidates.texts[b]):
                pairs.append(PreferencePair(int(candidates.group[a]), candidates.texts[a], candidates.texts[b],
                                            float(h[a]), float(h[b]), candidates.generator[a], name))
    return pairs


def wasp_pairs(candidates: Population, nearest: ReleasedVotes, furthest: ReleasedVotes,
               options: PairOptions | None = None, *, rng: np.random.Generator) -> list[PreferencePair]:
    """WASP's pairs: per generator and label group, cut into chunks of ``group_size`` in written order (as
    :func:`candidate_groups` cuts a prompt's completions; None: one chunk), the i-th highest released H̃ⁿ (chosen)
    against the i-th highest released H̃ᶠ among the rest of the chunk (rejected), i = 1..``pairs_per_group``; kept
    when the chosen text's H̃ⁿ − H̃ᶠ exceeds the rejected one's by more than ``min_margin``. ``chosen_votes`` /
    ``rejected_votes`` are those net values. Without the chunks an unlabelled corpus (one label group) gave one
    pair per generator and round."""
    o = options or PairOptions()
    hn = released_values(nearest, len(candidates), "wasp_pairs (nearest)")
    hf = released_values(furthest, len(candidates), "wasp_pairs (furthest)")
    net = hn - hf
    by: dict[tuple[str, int], list[int]] = {}
    for i in range(len(candidates)):
        by.setdefault((candidates.generator[i], int(candidates.group[i])), []).append(i)
    pairs: list[PreferencePair] = []
    for (gen, g), members in by.items():
        for name, idx in _chunks(f"{gen}/g{g}/top-q", members, o.group_size):
            if len(idx) < 2:
                continue
            good = _ranked(hn, idx, rng)[: o.pairs_per_group]
            rest = idx[~np.isin(idx, good)]
            bad = _ranked(hf, rest, rng)[: o.pairs_per_group] if len(rest) else rest
            for a, b in zip(good.tolist(), bad.tolist(), strict=False):
                if net[a] - net[b] > o.min_margin and not _same(candidates.texts[a], candidates.texts[b]):
                    pairs.append(PreferencePair(g, candidates.texts[a], candidates.texts[b], float(net[a]),
                                                float(net[b]), gen, name))
    return pairs


def check_generated_text(text: str, guard: Any, *, lines: int, what: str) -> None:
    """Refuse (:class:`PrivacyCheckError`) a text the learning step would train on when the run's guard cannot
    account for it as public or generated, by the prompt audit's own rules (:meth:`PrivateGuard.hits
    <privtext.guard.PrivateGuard.hits>`, guard.py "What explains text in a prompt"), as if the text were the next
    prompt line (``lines`` + 1, ``lines`` being the prompt log's line count now: every candidate came back after at
    most ``lines`` prompts, and the guard was told of it then). Stops: a whole private record that no public text
    holds and no generator wrote before now (a long one: unless a model trained on checked public text wrote it, or
    any generator wrote it and every ``n`` words of it are public), and private-only text no generator wrote.
    Passes: a text equal to a short private record that a generator wrote (the 4-gram writes "card not working")
    or that public text holds."""
    record, ngram, _ = guard.hits(text, lines + 1)
    if record or ngram:
        kind = "a whole private record" if record else "a private-only word n-gram"
        raise PrivacyCheckError(f"{what} holds private text ({kind}) that no public source and no generator output "
                                "explains: it is not trained on")


def check_pair_texts(pairs: Sequence[PreferencePair], guard: Any, *, lines: int) -> None:
    """:func:`check_generated_text` on every text of ``pairs`` before a trainer sees them."""
    seen: set[str] = set()
    for j, p in enumerate(pairs):
        for role, text in (("chosen", p.chosen), ("rejected", p.rejected)):
            if text not in seen:
                seen.add(text)
                check_generated_text(text, guard, lines=lines, what=f"preference pair {j} ({role})")


def pair_records(pairs: Sequence[PreferencePair], prompt_for: Callable[[PreferencePair], str]
                 ) -> list[dict[str, str]]:
    """``{"prompt", "chosen", "rejected"}`` per pair (trl's preference format), the prompt from ``prompt_for``."""
    return [{"prompt": prompt_for(p), "chosen": p.chosen, "rejected": p.rejected} for p in pairs]


__all__ = ["PreferencePair", "ReleasedVotes", "candidate_groups", "check_generated_text", "check_pair_texts",
           "pair_records", "preference_pairs", "reject_position", "released_values", "wasp_pairs"]
