"""The shareable privacy statement of a run (``privacy.json``), and the one renderer of its words.

``privacy.json`` is part of a run's **release**: it may be shared with the synthetic data. Every number in it is
one of

* a **configured parameter** (the budget, T, N_syn, the noise multiplier when it follows from the budget alone),
* a **released noisy value** (rounded to :data:`privtext.rng.RELEASE_DIGITS` significant digits), or
* a value listed under ``assumed_public`` with the reason it is treated as public (e.g. SecPE's σ, a function of
  which records hold which declared secret, as SecPE's Alg 1 computes it).

Exact statistics of the private data (the number of private records, how many hold a secret, holders per secret,
sampled counts, the prompt audit's hit counts, per-group posterior bounds) never enter it: they are private
diagnostics (``private/diagnostics.json``). ``tests/test_privacy_statement.py`` runs the same configuration on two
private corpora of different size and content and checks that their ``privacy.json`` differ only in released and
assumed-public values.

:func:`statement_sections` is the only code that turns a statement into sentences (the report shows its sections;
:func:`statement_words` joins them into the one paragraph the CLI and ``compare`` print).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..rng import round_release

FORMAT = "privtext.privacy/2"


@dataclass(frozen=True)
class Assumption:
    """A data-dependent value the guarantee treats as public, and why."""

    name: str
    value: Any
    why: str


@dataclass
class PrivacyStatement:
    """What ``privacy.json`` holds (see the module docstring for what may appear in it)."""

    method: str
    private: bool  # False: reproducible noise, no noise, or a failed prompt audit
    headline: str  # the first sentence; starts with "NOT PRIVATE" when ``private`` is False
    guarantee: dict[str, Any]  # kind, budget numbers, neighbouring relation, what was spent (data-independent)
    parameters: dict[str, Any]  # configured values
    treated_as_public: list[str]  # which inputs the run used without noise, in words
    coverage: list[str]  # what the guarantee does NOT cover, in words
    assumed_public: list[Assumption] = field(default_factory=list)
    released: dict[str, Any] = field(default_factory=dict)  # noisy values published here (rounded)
    releases: list[dict[str, Any]] = field(default_factory=list)  # one line per noisy release (public form)
    noise: dict[str, Any] = field(default_factory=dict)
    prompt_audit: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    statement: str = ""
    format: str = FORMAT

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["statement"] = self.statement or statement_words(d)
        return _jsonable(d)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PrivacyStatement:
        kw = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        kw["assumed_public"] = [Assumption(**a) for a in d.get("assumed_public", [])]
        return cls(**kw)


RUN_FILES_RELEASE = {
    "synthetic.jsonl": "the synthetic records (release)",
    "privacy.json": "this statement (release)",
    "config.yaml": "the resolved configuration (parameters; holds the paths of the input files)",
    "prompts.jsonl": "every prompt sent to a generator (public text and released values only)",
    "report.html": "the report (release; built from the files above and an evaluation on public data)",
}
PRIVATE_FOLDER_WORDS = ("private/ (mode 0700): the ledger with every event, checkpoints with raw noisy draws, the "
                        "log, metrics, exact diagnostics and the salted embedding cache — computed from private "
                        "data, never to be shared")


def statement_sections(st: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """The statement as (heading, items) pairs, in reading order: the headline (heading ``""``), what was treated
    as public, what is assumed public, what is not covered, the prompt audit and the noise source. The report
    shows them as a structured list; :func:`statement_words` joins them into one paragraph."""
    out: list[tuple[str, list[str]]] = []
    head = str(st.get("headline", "")).strip()
    if head:
        out.append(("", [head]))
    pub = [str(x) for x in st.get("treated_as_public") or []]
    if pub:
        out.append(("Treated as public (used without noise)", pub))
    assumed = list(st.get("assumed_public") or [])
    if assumed:
        out.append(("Assumed public", [f"{a['name']} = {_num(a['value'])} ({a['why']})" for a in assumed]))
    cov = [str(x) for x in st.get("coverage") or []]
    if cov:
        out.append(("Not covered", cov))
    audit = st.get("prompt_audit") or {}
    if audit and audit.get("words"):
        out.append(("Prompt audit", [str(audit["words"])]))
    noise = st.get("noise") or {}
    if noise.get("words"):
        out.append(("Noise", [str(noise["words"])]))
    return out


def statement_words(st: Mapping[str, Any]) -> str:
    """The statement in plain words: headline, what was public, what is assumed, what is not covered."""
    parts = []
    for heading, items in statement_sections(st):
        if heading in ("", "Prompt audit", "Noise"):
            parts.extend(items)
        elif heading == "Not covered":
            parts.append("Not covered: " + " ".join(items))
        else:
            parts.append(f"{heading}: " + "; ".join(items) + ".")
    return " ".join(p for p in parts if p)


def short_label(st: Mapping[str, Any]) -> str:
    """A table cell: ``(ε=4, δ=1e-05)-DP``, ``μ=1-GDP``, ``(p=0.0001, r=0.0002)-secret``, ``NOT PRIVATE``."""
    g = st.get("guarantee") or {}
    kind = str(g.get("kind") or "")
    b = g.get("budget") or {}
    if kind == "dp":
        label = f"(ε={_num(b.get('epsilon'))}, δ={_num(b.get('delta'))})-DP"
    elif kind == "pure":
        label = f"ε={_num(b.get('epsilon'))}-DP (pure)"
    elif kind == "gdp":
        label = f"μ={_num(b.get('mu'))}-GDP"
    elif kind == "secret":
        label = f"(p={_num(b.get('p'))}, r={_num(b.get('r'))})-secret"
    elif kind == "noise":
        label = f"σ={_num(b.get('noise_multiplier'))} (no target)"
    else:
        label = kind or "(none recorded)"
    return label if st.get("private", True) else f"NOT PRIVATE ({label})"


def _num(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, (int, float)):
        return f"{x:.4g}"
    if isinstance(x, Sequence) and not isinstance(x, str):
        vals = sorted({_num(v) for v in x})
        return vals[0] if len(vals) == 1 else "per-secret"
    return str(x)


def released_number(x: float) -> float:
    """A released noisy value as it may appear in a shareable file (rounded; see privtext.rng)."""
    return round_release(float(x))


def released_tree(x: Any) -> Any:
    """``x`` (nested dicts/lists) with every float rounded as :func:`released_number` rounds a released value;
    integers, booleans and strings are kept. For shareable files that hold functions of released noisy values
    (vote summaries, evaluation figures): nothing leaves the private folder with a raw double's low bits."""
    if isinstance(x, Mapping):
        return {k: released_tree(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [released_tree(v) for v in x]
    if isinstance(x, bool) or x is None or isinstance(x, (str, int)):
        return x
    if isinstance(x, float):
        return released_number(x)
    if hasattr(x, "item") and callable(x.item):  # numpy scalars
        return released_tree(x.item())
    return x


def _jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
    if hasattr(x, "item") and callable(x.item):
        return _jsonable(x.item())
    return x


__all__ = ["FORMAT", "Assumption", "PrivacyStatement", "released_number", "released_tree", "short_label",
           "statement_sections", "statement_words"]
