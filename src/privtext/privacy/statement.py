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

**What it means, in plain words** (:func:`plain_meaning`, ``privacy.json``'s ``meaning``): computed from the
guarantee's numbers alone, for a reader who is not a specialist. For (ε, δ)-DP (and pure ε-DP, δ = 0): whether or
not one unit of the neighbouring relation (one private record, one data party) is in the data, the probability of
every outcome of the run changes by at most a factor e^ε, plus at most δ (the definition, Dwork & Roth Def 2.4);
and its consequence for a membership test (Kairouz, Oh & Viswanath 2015, Thm 2.1): an attacker who wrongly accuses
at most a share α of the records that were not used catches at most min(1, e^ε·α + δ, 1 − e^−ε·(1 − δ − α)) of
those that were. For μ-GDP the test bound is exact, Φ(Φ⁻¹(α) + μ) (Dong, Roth & Su 2019, Def 2.6), beside the
equivalent ε at the run's δ (Remark C.1). For SecPE's (p, r): an attacker whose prior chance of guessing a declared
secret is at most p reconstructs it with chance at most r (SecPE Def 3.1). A budget whose ε exceeds
:data:`WEAK_EPSILON` (or r exceeds :data:`WEAK_R`, or r/p exceeds e^WEAK_EPSILON) is called weak in those words;
above :data:`REFUSE_EPSILON` (r above :data:`REFUSE_R`, r/p above e^REFUSE_EPSILON) the configuration is refused
unless ``privacy.allow_weak: true`` (:func:`budget_strength`; privtext.config).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..atomicio import jsonable as _jsonable
from ..config import REFUSE_EPSILON, REFUSE_R, WEAK_EPSILON, WEAK_R, budget_level
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
    #: the guarantee in plain words and the figures behind them (:func:`plain_meaning`; filled from ``guarantee``)
    meaning: dict[str, Any] = field(default_factory=dict)
    statement: str = ""
    format: str = FORMAT
    #: what the method declares of itself (``privtext.methods.base.MethodDescription.to_dict``: its unit of
    #: progress, votes, zero-shot control, guarantee kind and audit game, config section); left out when empty
    method_description: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        described = d.pop("method_description")
        if described:  # right after the method's name
            d = {"method": d.pop("method"), "method_description": described, **d}
        if not d.get("meaning"):
            d["meaning"] = plain_meaning(d["guarantee"], private=self.private)
        d["statement"] = self.statement or statement_words(d)
        return _jsonable(d)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PrivacyStatement:
        kw = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        kw["assumed_public"] = [Assumption(**a) for a in d.get("assumed_public", [])]
        return cls(**kw)


#: the assumption every run with a public corpus states (issue 36: a public text equal to a private record must
#: neither stop the run nor count as a leak, so whether a run finishes says nothing about membership)
PUBLIC_CORPUS_ASSUMPTION = ("every text the public corpus holds, even one equal to a private record (a text the "
                            "public corpus holds is public: such a record gets no protection from this guarantee, "
                            "and the prompt audit does not flag it)")

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


#: the heading of what a method says about the reach of its guarantee (what it covers, what it does not)
SCOPE = "Scope and limits"


def statement_sections(st: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """The statement as (heading, items) pairs, in reading order: the headline (heading ``""``), what it means in
    plain words, what was treated as public, what is assumed public, the scope and limits of the guarantee, the
    prompt audit and the noise source. The report shows them as a structured list; :func:`statement_words` joins
    them into one paragraph."""
    out: list[tuple[str, list[str]]] = []
    head = str(st.get("headline", "")).strip()
    if head:
        out.append(("", [head]))
    meaning = st.get("meaning") if isinstance(st.get("meaning"), Mapping) else None
    if meaning is None and isinstance(st.get("guarantee"), Mapping):  # a statement written before `meaning`
        meaning = plain_meaning(st["guarantee"], private=bool(st.get("private", True)))
    if meaning and meaning.get("words"):
        out.append(("What this means", [str(meaning["words"])]))
    pub = [str(x) for x in st.get("treated_as_public") or []]
    if pub:
        out.append(("Treated as public (used without noise)", pub))
    assumed = list(st.get("assumed_public") or [])
    if assumed:
        out.append(("Assumed public", [f"{a['name']} = {_num(a['value'])} ({a['why']})" for a in assumed]))
    cov = [str(x) for x in st.get("coverage") or []]
    if cov:
        out.append((SCOPE, cov))
    audit = st.get("prompt_audit") or {}
    if audit and audit.get("words"):
        out.append(("Prompt audit", [str(audit["words"])]))
    noise = st.get("noise") or {}
    if noise.get("words"):
        out.append(("Noise", [str(noise["words"])]))
    return out


def section_line(heading: str, items: Sequence[str]) -> str:
    """One section as one line: ``Heading: a; b; c.`` for a list of phrases (a phrase's own final full stop is
    dropped, so no ".;" appears), ``Heading: First sentence. Second sentence.`` for sentences, the items alone for
    the headline, the plain-words meaning, the prompt audit and the noise (they are whole sentences that name
    their subject)."""
    items = [str(x).strip() for x in items if str(x).strip()]
    if heading in ("", "What this means", "Prompt audit", "Noise"):
        return " ".join(items)
    if heading == SCOPE or all(_is_sentence(x) for x in items):
        return f"{heading}: " + " ".join(x if x.endswith((".", "!", "?")) else x + "." for x in items)
    return f"{heading}: " + "; ".join(x.rstrip(".").rstrip() for x in items) + "."


def _is_sentence(x: str) -> bool:
    return x[:1].isupper() and x.endswith(".")


def statement_words(st: Mapping[str, Any]) -> str:
    """The statement in plain words: every section of :func:`statement_sections` as one line, joined."""
    return " ".join(p for p in (section_line(h, items) for h, items in statement_sections(st)) if p)


# ------------------------------------------------------------------------------------------ plain-words meaning

#: the false-accusation rate of the membership-test example in the plain reading
EXAMPLE_FALSE_ACCUSATIONS = 0.01
#: the δ at which a μ-GDP budget is judged against the thresholds when the run states none (the report δ)
JUDGE_DELTA = 1e-5


def budget_strength(kind: str, *, epsilon: float | None = None, delta: float | None = None,
                    mu: float | None = None, p: Any = None, r: Any = None,
                    report_delta: float | None = None) -> tuple[str, str]:
    """``("ok" | "weak" | "void", why)`` for a guarantee: :func:`privtext.config.budget_level` (the thresholds
    :data:`WEAK_EPSILON`, :data:`REFUSE_EPSILON`, :data:`WEAK_R`, :data:`REFUSE_R` live with the configuration,
    which refuses a void budget), except that μ-GDP is judged by its ε at the run's report δ, computed here."""
    if kind == "gdp" and mu is not None:
        from .conversions import gdp_epsilon

        d = float(report_delta or JUDGE_DELTA)
        eps = float(gdp_epsilon(d, float(mu)))
        level, _ = budget_level("dp", epsilon=eps)
        return level, (f"μ = {_num(mu)} (ε = {_num(eps)} at δ = {_num(d)})" if level != "ok" else "")
    return budget_level(kind, epsilon=epsilon, p=p, r=r)


def detection_bound(alpha: float, *, epsilon: float | None = None, delta: float = 0.0,
                    mu: float | None = None) -> float:
    """The largest share of used records a membership test can flag when it wrongly flags at most ``alpha`` of
    the unused ones: μ-GDP Φ(Φ⁻¹(α) + μ) (exact), (ε, δ)-DP min(1, e^ε·α + δ, 1 − e^−ε·(1 − δ − α))."""
    from scipy.stats import norm

    if mu is not None:
        return float(norm.cdf(norm.ppf(alpha) + float(mu)))
    assert epsilon is not None
    e = float(epsilon)
    a = math.exp(e) * alpha + delta if e < 700 else math.inf
    b = 1.0 - math.exp(-e) * (1.0 - delta - alpha)
    return float(min(1.0, a, b))


def _factor(eps: float) -> str:
    """e^ε for reading: ``54.6``, ``22,026``, ``4.85e+08``, or a power of ten past the float range."""
    if eps > 700:
        return f"10^{eps / math.log(10):.4g}"
    x = math.exp(eps)
    if x < 1000:
        return f"{x:.3g}"
    if x < 1e6:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _one_in(x: float) -> str:
    """``1 in 100,000`` for a small probability (no phrase for one above 1/2)."""
    if not 0 < x <= 0.5:
        return ""
    n = 1.0 / x
    return f"1 in {n:,.0f}" if n < 1e9 else f"1 in {n:.3g}"


def _percent(x: float) -> str:
    if x >= 1.0:
        return "100 %"
    v = 100 * x
    s = f"{v:.3g}"
    if float(s) >= 100:
        return "over 99.9 %"
    return f"{s} %"


def _unit(relation: str) -> tuple[str, str]:
    """(the neighbouring unit for "whether or not … is in the data", the thing a membership test names)."""
    r = relation.lower()
    if r.startswith("replacing one"):
        return "any one private record is replaced by another", "record"
    if "data party" in r:
        return "any one data party's records are in the data", "data party"
    if "declared secret" in r:
        return "the records that hold any one declared secret are in the data", "secret's records"
    return "any one private record is in the data", "record"


def plain_meaning(guarantee: Mapping[str, Any], *, private: bool = True) -> dict[str, Any]:
    """The guarantee in plain words, computed from its numbers (module docstring): ``words`` (two or three
    sentences), ``strength`` (:func:`budget_strength`) and the figures the words quote (``epsilon``, ``delta``,
    ``odds_factor``, ``example``: the membership test, or ``p``/``r``). Empty for an unknown kind."""
    g = guarantee if isinstance(guarantee, Mapping) else {}
    kind = str(g.get("kind") or "")
    b = g.get("budget") if isinstance(g.get("budget"), Mapping) else {}
    relation = str(g.get("neighbouring_relation") or "adding or removing one private record")
    whether, noun = _unit(relation)
    alpha = EXAMPLE_FALSE_ACCUSATIONS
    out: dict[str, Any] = {}
    if kind in ("dp", "pure", "gdp", "noise"):
        mu = None
        if kind == "dp":
            eps, delta = float(b.get("epsilon")), float(b.get("delta"))
            lead = f"What ε = {_num(eps)} means"
        elif kind == "pure":
            eps, delta = float(b.get("epsilon")), 0.0
            lead = f"What ε = {_num(eps)} means"
        elif kind == "gdp":
            from .conversions import gdp_epsilon

            mu = float(b.get("mu"))
            delta = float(b.get("report_delta") or JUDGE_DELTA)
            eps = float(gdp_epsilon(delta, mu))
            lead = f"What μ = {_num(mu)} means (equivalently ε = {_num(eps)} at δ = {_num(delta)})"
        else:
            ref = g.get("reference") if isinstance(g.get("reference"), Mapping) else {}
            if ref.get("epsilon_at_report_delta") is None:
                return {}
            eps, delta = float(ref["epsilon_at_report_delta"]), float(ref.get("report_delta") or JUDGE_DELTA)
            lead = (f"What the releases amount to (ε = {_num(eps)} at δ = {_num(delta)}; no target was set) "
                    "means")
        strength, why = budget_strength("dp" if kind == "noise" else kind, epsilon=eps, delta=delta, mu=mu,
                                        report_delta=delta)
        if delta > 0:
            slack = f", plus at most δ = {_num(delta)}" + (f" ({_one_in(delta)})" if _one_in(delta) else "")
        else:
            slack = ", with no exception (δ = 0)"
        caught = detection_bound(alpha, epsilon=eps, delta=delta, mu=mu)
        if caught >= 1.0:
            catch = "may catch every one of those that were"
        elif _percent(caught).startswith("over"):
            catch = "may catch over 99.9 % of those that were"
        else:
            catch = f"catches at most {_percent(caught)} of those that were"
        words = (f"{lead}: whether or not {whether}, the chance of any outcome of this run changes by at most a "
                 f"factor of e^{_num(eps)} ≈ {_factor(eps)}{slack}. So an attacker who tests whether a given "
                 f"{noun} was used, and wrongly accuses at most {_percent(alpha)} of those that were not, {catch}.")
        out = {"epsilon": eps, "delta": delta, "odds_factor": math.exp(eps) if eps < 700 else math.inf,
               "unit": noun, "example": {"false_accusations": alpha, "caught_at_most": caught}}
        if mu is not None:
            out["mu"] = mu
    elif kind == "secret":
        p, r = b.get("p"), b.get("r")
        if p is None or r is None:
            return {}
        strength, why = budget_strength("secret", p=p, r=r)
        if isinstance(p, Sequence) or isinstance(r, Sequence):
            words = ("What the per-secret (p, r) bounds mean: for each declared secret the detector found, an "
                     "attacker whose chance of guessing it beforehand is at most its p recovers it from "
                     "everything this run released with a chance of at most its r (guarantee.budget lists them). "
                     "Records that hold no declared secret get no protection.")
        else:
            pf, rf = float(p), float(r)
            words = (f"What (p = {_num(pf)}, r = {_num(rf)}) means: for each declared secret the detector found "
                     f"(a name on a list, a phone number, ...), an attacker whose chance of guessing it beforehand "
                     f"is at most {_num(pf)}" + (f" ({_one_in(pf)})" if _one_in(pf) else "")
                     + f" recovers it from everything this run released with a chance of at most {_num(rf)}"
                     + (f" ({_one_in(rf)})" if _one_in(rf) else "")
                     + f": at most {_num(rf / pf)} times their prior. Records that hold no declared secret get no "
                     "protection.")
        out = {"p": p, "r": r}
    else:
        return {}
    if strength == "weak":
        words += (f" This is a weak guarantee ({why}): " + (
            f"a chance above {_num(WEAK_R)} of recovering a secret, or above e^{_num(WEAK_EPSILON)} times the prior, "
            "protects little in practice." if kind == "secret" else
            f"above ε = {_num(WEAK_EPSILON)} (a factor of {_factor(WEAK_EPSILON)}) it protects little in practice."))
    elif strength == "void":
        words += (f" It protects nothing meaningful ({why}; privacy.allow_weak: true accepted a budget above " + (
            f"r = {_num(REFUSE_R)} or r/p = e^{_num(REFUSE_EPSILON)}" if kind == "secret" else
            f"ε = {_num(REFUSE_EPSILON)}") + ").")
    if not private:
        words = "Nominally (the run is NOT PRIVATE, see above): " + words
    return {"words": words, "strength": strength, **out}


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


__all__ = ["FORMAT", "PUBLIC_CORPUS_ASSUMPTION", "REFUSE_EPSILON", "REFUSE_R", "SCOPE", "WEAK_EPSILON", "WEAK_R", "Assumption", "PrivacyStatement",
           "budget_strength", "detection_bound", "plain_meaning", "released_number", "released_tree", "section_line",
           "short_label", "statement_sections", "statement_words"]
