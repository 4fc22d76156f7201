"""What a SecPE (p, r) guarantee is conditional on: the detector's public structure, in sentences for the
privacy statement (issue 21, bug 4).

The secret-protection guarantee (SecPE Def 3.1) bounds an adversary's success at guessing a declared secret,
given a prior p of guessing it. Two things about the secrets shape the mechanism and are not hidden by it:

* **which values the detector accepts** — Luhn-valid card numbers, IBANs with correct mod-97 check digits, SSNs
  obeying the SSA rules, phone numbers near a cue word, words of a frequency rank … — an adversary who knows the
  configuration knows that a secret is such a value;
* **which records share a value** (the holder structure) — it sets the sampling rates ρ and the noise σ
  (SecretNoise, Alg 1), and σ is printed in ``privacy.json``.

So the guarantee holds for an adversary whose prior p is *conditional on that public structure*: p is the chance
of guessing a secret already knowing that it is, say, a Luhn-valid 16-digit number with a known issuer prefix, and
knowing σ. :func:`guarantee_structure` writes those conditions as sentences (configuration only: never a value,
never a count taken from the private data).
"""

from __future__ import annotations

from typing import Any

from .base import build_detector
from .holders import accepted_values

HOLDER_SENTENCE = (
    "Which records hold which secret (the holder structure) sets the sampling rates ρ and the noise σ of SecretNoise "
    "(SecPE Alg 1), and σ is printed in this statement. Every record that contains a detected value is a holder of "
    "it, whether or not the detector accepted it there (canonical matching: digits only for numbers, case-folded "
    "words, dates in any written form).")
PRIOR_SENTENCE = (
    "The (p, r) guarantee holds for an adversary whose prior p of guessing a secret is conditional on this public "
    "structure: it already knows which values the detector accepts (the rules listed) and σ. A prior that does not "
    "account for them (e.g. p over all 16-digit strings for a number the detector accepts only when Luhn-valid) is "
    "not the p the guarantee is stated for.")


def guarantee_structure(detector: Any) -> dict[str, Any]:
    """For a detector (a spec for :func:`~privtext.secrets.build_detector`, or a built detector — pass the one
    the run used, so that heavy detectors are not loaded twice), what the guarantee is conditional on:

    ``detector`` (the configuration in words), ``accepted_values`` (one sentence per rule), ``holder_structure``,
    ``secret_choice`` (for ``random_words``: which corpus chose the words; else None), ``prior`` (the
    conditional-prior sentence), ``depends_on_private_data`` (True when the secrets themselves were chosen from
    the private corpus: ``random_words.from_private``) and ``sentences`` (all of them, in order, for
    ``privacy.json``)."""
    built = build_detector(detector)
    rules = accepted_values(built)
    word_rules = [s for s in rules if s.startswith("RANDOM_WORD")]
    from_private = any(getattr(d, "from_private", False) for d in _leaves(built))
    name = _describe_built(built)
    sentences = [f"Secrets are the values the secret detector ({name}) accepts, by these public rules.", *rules,
                 HOLDER_SENTENCE, PRIOR_SENTENCE]
    if from_private:
        sentences.append(
            "The secret words themselves were chosen from the private corpus's own word frequencies "
            "(random_words.from_private: true); that choice is a function of the private data and is not "
            "protected: the guarantee is conditional on it too.")
    return {
        "detector": name,
        "accepted_values": rules,
        "holder_structure": HOLDER_SENTENCE,
        "secret_choice": word_rules[0] if word_rules else None,
        "prior": PRIOR_SENTENCE,
        "depends_on_private_data": from_private,
        "sentences": sentences,
    }


def _leaves(det: Any) -> list[Any]:
    inner = getattr(det, "inner", None)
    if inner is not None:
        return _leaves(inner)
    subs = getattr(det, "detectors", None)
    if isinstance(subs, list):
        return [x for d in subs for x in _leaves(d)]
    return [det]


def _describe_built(det: Any) -> str:
    leaves = _leaves(det)
    return ", ".join(str(getattr(d, "name", type(d).__name__)) for d in leaves)


__all__ = ["HOLDER_SENTENCE", "PRIOR_SENTENCE", "guarantee_structure"]
