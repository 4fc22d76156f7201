"""End-to-end attacks on what a user shares: ``privtext audit --end-to-end CONFIG``.

The mechanism audits (:mod:`privtext.audit.run`) check each release in isolation; this one plants canaries in the
private data, runs the **whole method** through the public runner once, and attacks only the files a user shares
— ``synthetic.jsonl``, ``prompts.jsonl``, ``privacy.json`` and ``report.html`` (never ``private/``).

Membership game (Aug-PE, WASP, DP-KPS: a DP claim)
--------------------------------------------------
In the style of one-run auditing (Steinke, Nasr & Jagielski 2023; :mod:`privtext.audit.onerun`) and of canary
attacks on synthetic text (Meeus et al., "The Canary's Echo", 2025): m canary records, each an **in-distribution
prefix** (a record of the public corpus, or the start of a private one when there is none) followed by a **rare
suffix** — six made-up words (text no generator trained on real text writes by chance) and, when the public corpus
has them, three rare public words that no private record holds (words a public generator or vocabulary can carry,
distinct across canaries while they last) — with the labels of a random private record. Each canary is included
independently with probability ½, the bit drawn from OS entropy (under ``replace_one`` an excluded canary is
replaced by its prefix alone, the neighbour the relation allows). Each canary is then scored from the shareable
outputs alone:

* ``ngram`` — the share of the suffix's words and word pairs found in the shared text;
* ``embedding`` — the cosine similarity of the canary to its nearest synthetic record (the run's embedder);
* ``perplexity`` — the canary's log-likelihood per token under a Kneser-Ney trigram model of the synthetic text
  and the prompts, minus that under one of the public corpus (a reference model, as Meeus et al. calibrate their
  n-gram attack);
* ``released`` (with public words) — the largest released number ``privacy.json`` attaches to one of the canary's
  public words (e.g. a count of DP-KPS's released vocabulary).

Guessing rules turn the scores into guesses (in / out / abstain), never looking at the inclusion bits: ``ngram``
— in where at least half of the suffix is found, out elsewhere (or abstain elsewhere); ``released`` — in where a
count ≥ ½ is released, out elsewhere (or abstain); ``embedding`` and ``perplexity`` — in for the top m/8 (m/4) and
out for the bottom m/8 (m/4), or in for the top m/8 only. Each rule's correct guesses give an ε lower bound at
confidence 1 − (1 − c)/#rules (Bonferroni over the 8 or 10 rules), and the largest is printed beside the claimed ε
of ``privacy.json`` (with its δ). m defaults to twice the fewest canaries whose every guess right could exceed the
claim (:func:`privtext.audit.onerun.canaries_needed`): with fewer, no attack could.

Reconstruction game (SecPE: (p, r)-secret protection, SecPE Def 3.1)
-------------------------------------------------------------------
m secrets, each drawn uniformly (OS entropy) from its own candidate set of 1/p phone numbers (slot j: area code
200 + j and exchange 300 + j, the line enumerating the set), each written into ``holders`` records ("Please call
the patient back on …" before an in-distribution note). The configured detector must find each planted secret in
at least one of its holders (else the game cannot be played with that detector: :class:`ConfigError`). The
attacker reads every phone-like number in the shared text (by exchange and line, however it is written); for
slot j it guesses the most frequent candidate of that slot it found, or a uniform random candidate when it found
none. The success rate, with its Clopper-Pearson interval, is compared with r: the audit fails when the
interval's lower end exceeds r.

Which game a configuration plays is its method's declaration (``MethodDescription.audit_game``), and the options
read are the method's own section (``MethodDescription.section``).
"""

from __future__ import annotations

import html
import itertools
import json
import math
import re
import secrets as _secrets
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .onerun import canaries_needed, epsilon_lower_bound
from .stats import clopper_pearson

#: the shareable files of a run an attacker reads (never anything under private/)
SHAREABLE = ("synthetic.jsonl", "prompts.jsonl", "privacy.json", "report.html")
SUFFIX_WORDS = 6  # made-up words; and PUBLIC_WORDS rare words of the public corpus
PUBLIC_WORDS = 3
#: guessing rules on the made-up-word, embedding and perplexity scores (two more with public words)
RULES = 8
_WORD = re.compile(r"\w+", re.UNICODE)
_PHONE = re.compile(r"\(?\b(\d{3})\)?[\s.\-]*(\d{3})[\s.\-]*(\d{4})\b")
_LINE = re.compile(r"\b(\d{3})[\s.]*-[\s.]*(\d{4})\b")
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gl", "kr", "pl",
           "st", "tr", "vr", "zh", "qu", "th")
_VOWELS = ("a", "e", "i", "o", "u", "ae", "ou", "io")
_CODAS = ("", "", "n", "r", "x", "th", "sk", "lm", "v")


@dataclass
class Canary:
    """One planted canary: its text (membership game) or its holder records and secret (reconstruction game), and
    whether it was included (drawn from OS entropy; the secret is always included)."""

    index: int
    text: str
    labels: dict[str, str]
    included: bool
    suffix: str = ""
    public_words: tuple[str, ...] = ()  # the suffix's rare public words (a public generator or vocabulary knows them)
    replacement: str | None = None  # replace-one: the prefix alone, kept when the canary is out
    secret: str | None = None  # reconstruction: the planted value (one of the slot's candidates)
    candidates: tuple[str, ...] = ()
    holders: tuple[str, ...] = ()


@dataclass
class RuleResult:
    score: str
    rule: str
    guesses: int
    correct: int
    lower_bound: float


@dataclass
class EndToEndResult:
    """The outcome: ``lower_bound`` (an ε lower bound for DP claims, the lower end of the success rate's interval
    for SecPE) against ``claim`` (ε, or r); ``passed`` when it does not exceed the claim."""

    method: str
    game: str
    claim: float
    claim_words: str
    lower_bound: float
    confidence: float
    canaries: int
    included: int
    passed: bool
    run_dir: str
    seconds: dict[str, float]
    rules: list[RuleResult] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        verdict = "below the claim: pass" if self.passed else "ABOVE THE CLAIM: FAIL"
        learn = self.details.get("learn", "none")
        method = self.method if learn == "none" else f"{self.method} learning from its votes ({learn})"
        if self.game == "membership":
            best = max(self.rules, key=lambda r: r.lower_bound) if self.rules else None
            how = (f" (rule {best.score}/{best.rule}: {best.correct} of {best.guesses} guesses right)" if best
                   else "")
            head = (f"{method}: ε lower bound {self.lower_bound:.3g} at {100 * self.confidence:g}% confidence "
                    f"from {self.canaries} canaries ({self.included} included){how}; claim {self.claim_words}: "
                    f"{verdict}")
        else:
            d = self.details
            head = (f"{method}: reconstruction success {d['successes']}/{self.canaries} secrets "
                    f"({100 * self.confidence:g}% CI {self.lower_bound:.3g}–{d['upper']:.3g}; prior p = "
                    f"{d['prior']:.3g}); claim {self.claim_words}: {verdict}")
        times = ", ".join(f"{k} {v:.0f} s" for k, v in self.seconds.items())
        return [head, f"  run directory {self.run_dir}; {times}"]


# ------------------------------------------------------------------------------------------------- canaries


def _rare_word(rng: _secrets.SystemRandom) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.randint(2, 3))) + rng.choice(_CODAS)


def rare_suffix(rng: _secrets.SystemRandom, words: int = SUFFIX_WORDS, public_words: Sequence[str] = ()) -> str:
    """Made-up words (OS entropy: text no generator trained on real text writes by chance) mixed with
    ``public_words`` (rare words of the public corpus, which a public generator or vocabulary can carry), in a
    random order."""
    ws = [_rare_word(rng) for _ in range(words)] + list(public_words)
    rng.shuffle(ws)
    return " ".join(ws)


def rare_public_words(public: Any | None, private: Any, *, low: int = 3, high: int = 20) -> list[str]:
    """Words (letters only, ≥ 4 characters) that occur in ``low``–``high`` public records and in no private record
    (the least frequent ≥ ``low`` when none is that rare): what a canary can hold that only it brings to the
    private data, yet a public vocabulary knows."""
    if public is None or not len(public):
        return []
    df: Counter[str] = Counter()
    for t in public.texts:
        df.update({w for w in _WORD.findall(t.lower()) if w.isalpha() and len(w) >= 4})
    seen = {w for t in private.texts for w in _WORD.findall(t.lower())}
    pool = [w for w, c in df.items() if c >= low and w not in seen]
    rare = [w for w in pool if df[w] <= high]
    if len(rare) >= 3 * PUBLIC_WORDS:
        return sorted(rare)
    return sorted(pool, key=lambda w: (df[w], w))[: max(3 * PUBLIC_WORDS, len(rare))]


def _prefixes(private: Any, public: Any | None, n: int, rng: _secrets.SystemRandom,
              avoid: Collection[str] = ()) -> list[str]:
    """In-distribution prefixes: public records (none holding a word of ``avoid``, while any is left), or the first
    ~60% of the words of private records."""
    if public is not None and len(public):
        bad = set(avoid)
        ok = [t for t in public.texts if not bad.intersection(_WORD.findall(t.lower()))] or list(public.texts)
        return [ok[rng.randrange(len(ok))] for _ in range(n)]
    out = []
    for _ in range(n):
        words = private.texts[rng.randrange(len(private))].split()
        out.append(" ".join(words[: max(1, int(0.6 * len(words)))]))
    return out


def _labels_like(private: Any, columns: Sequence[str], rng: _secrets.SystemRandom) -> dict[str, str]:
    i = rng.randrange(len(private))
    return {c: private.labels[c][i] for c in columns}


# -------------------------------------------------------------------------------------------- shared outputs


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def _strings(x: Any) -> Iterable[str]:
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _strings(v)


@dataclass
class SharedOutputs:
    """What an attacker holds: the text of every shareable file (no file under ``private/`` is read)."""

    synthetic: list[str]
    prompts: list[str]
    other: list[str]

    @property
    def all_text(self) -> list[str]:
        return [*self.synthetic, *self.prompts, *self.other]


def read_shared(run_dir: str | Path) -> SharedOutputs:
    root = Path(run_dir)
    syn: list[str] = []
    prompts: list[str] = []
    other: list[str] = []
    p = root / "synthetic.jsonl"
    if p.exists():
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.strip():
                syn.append(str(json.loads(line).get("text", "")))
    p = root / "prompts.jsonl"
    if p.exists():
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.strip():
                prompts.append("\n".join(_strings(json.loads(line))))
    p = root / "privacy.json"
    if p.exists():
        other.append("\n".join(_strings(json.loads(p.read_text(encoding="utf-8")))))
    p = root / "report.html"
    if p.exists():
        parser = _Text()
        parser.feed(p.read_text(encoding="utf-8"))
        other.append(html.unescape(" ".join(parser.parts)))
    return SharedOutputs(synthetic=syn, prompts=prompts, other=other)


# --------------------------------------------------------------------------------------------------- scores


def released_numbers(statement: dict[str, Any]) -> dict[str, float]:
    """Every ``name: number`` pair of the released values in ``privacy.json`` (e.g. DP-KPS's released vocabulary
    with its noisy counts), names case-folded; the largest number per name."""
    out: dict[str, float] = {}

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    key = str(k).lower()
                    out[key] = max(out.get(key, -math.inf), float(v))
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(statement.get("released") or {})
    return out


def released_scores(canaries: Sequence[Canary], released: dict[str, float]) -> np.ndarray:
    """The largest released number attached to one of each canary's rare public words (0 when none is listed):
    a released count that a canary alone can have raised."""
    return np.array([max((released.get(w, 0.0) for w in c.public_words), default=0.0) for c in canaries])


def ngram_scores(canaries: Sequence[Canary], shared: SharedOutputs) -> np.ndarray:
    """The share of each canary's suffix words and word pairs found in the shared text."""
    toks: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    for t in shared.all_text:
        w = _WORD.findall(t.lower())
        toks.update(w)
        pairs.update(itertools.pairwise(w))
    out = np.zeros(len(canaries))
    for i, c in enumerate(canaries):
        w = _WORD.findall(c.suffix.lower())
        if not w:
            continue
        hit = sum(x in toks for x in w) + sum(p in pairs for p in itertools.pairwise(w))
        out[i] = hit / (2 * len(w) - 1)
    return out


def embedding_scores(canaries: Sequence[Canary], shared: SharedOutputs, embedder: Any) -> np.ndarray:
    """Cosine similarity of each canary to its nearest synthetic record."""
    if not shared.synthetic:
        return np.zeros(len(canaries))
    c = np.asarray(embedder.embed([x.text for x in canaries]), dtype=np.float64)
    s = np.asarray(embedder.embed(list(shared.synthetic)), dtype=np.float64)
    c /= np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-12)
    s /= np.maximum(np.linalg.norm(s, axis=1, keepdims=True), 1e-12)
    return (c @ s.T).max(axis=1)


def perplexity_scores(canaries: Sequence[Canary], shared: SharedOutputs, reference: Sequence[str] | None
                      ) -> np.ndarray:
    """Per-token log-likelihood of each canary under a trigram Kneser-Ney model of the shared text, minus that
    under a model of the reference (public) text."""
    from ..generate.ngram import NgramLM

    texts = [t for t in shared.synthetic + shared.prompts if t.strip()]
    if not texts:
        return np.zeros(len(canaries))
    lm = NgramLM(texts, order=3)
    ref = NgramLM(list(reference), order=3) if reference else None
    out = np.zeros(len(canaries))
    for i, c in enumerate(canaries):
        lp, n = lm.log_prob(c.text)
        out[i] = lp / n
        if ref is not None:
            lq, m = ref.log_prob(c.text)
            out[i] -= lq / m
    return out


# ---------------------------------------------------------------------------------------------------- rules


def guessing_rules(scores: dict[str, np.ndarray], rng: _secrets.SystemRandom) -> list[tuple[str, str, np.ndarray]]:
    """(score, rule, guesses ∈ {+1, −1, 0}^m) for every rule of the module docstring; ties broken at random (OS
    entropy). The guesses depend on the scores only, never on the inclusion bits."""
    out: list[tuple[str, str, np.ndarray]] = []
    if "released" in scores:
        s = scores["released"]
        out.append(("released", "count ≥ ½ in / rest out", np.where(s >= 0.5, 1, -1)))
        out.append(("released", "count ≥ ½ in", np.where(s >= 0.5, 1, 0)))
    if "ngram" in scores:
        s = scores["ngram"]
        out.append(("ngram", "half found in / rest out", np.where(s >= 0.5, 1, -1)))
        out.append(("ngram", "half found in", np.where(s >= 0.5, 1, 0)))
    for name in ("embedding", "perplexity"):
        if name not in scores:
            continue
        s = scores[name]
        m = len(s)
        jitter = np.array([rng.random() for _ in range(m)]) * 1e-12
        order = np.argsort(-(s + jitter * max(1.0, float(np.abs(s).max()))), kind="stable")
        for frac, both in ((8, True), (4, True), (8, False)):
            k = max(1, m // frac)
            t = np.zeros(m, dtype=np.int64)
            t[order[:k]] = 1
            if both:
                t[order[-k:]] = -1
            out.append((name, f"top {k} in" + (f" / bottom {k} out" if both else ""), t))
    return out


def membership_bound(canaries: Sequence[Canary], scores: dict[str, np.ndarray], *, delta: float,
                     confidence: float, rng: _secrets.SystemRandom) -> tuple[float, list[RuleResult]]:
    """The largest ε lower bound over the guessing rules, each at confidence 1 − (1 − c)/#rules."""
    truth = np.array([1 if c.included else -1 for c in canaries])
    rules = guessing_rules(scores, rng)
    conf = 1.0 - (1.0 - confidence) / max(len(rules), 1)
    out: list[RuleResult] = []
    m = len(canaries)
    for score, rule, t in rules:
        r = int((t != 0).sum())
        v = int(((t != 0) & (t == truth)).sum())
        lb = epsilon_lower_bound(m, r, v, delta=delta, confidence=conf) if r else 0.0
        out.append(RuleResult(score=score, rule=rule, guesses=r, correct=v, lower_bound=lb))
    return (max((x.lower_bound for x in out), default=0.0), out)


# ------------------------------------------------------------------------------------------------- the game


def _load(config: Any) -> Any:
    from ..config import Config, config_from_dict, load_config
    from ..runner import resolve_config

    if isinstance(config, Config):
        cfg = config
    elif isinstance(config, dict):
        cfg = config_from_dict(json.loads(json.dumps(config)), source="audit")
    else:
        cfg = load_config(config)
    return resolve_config(cfg)[0]


def _description(config: Any) -> Any:
    """The method description of a resolved configuration's method (its game, its section)."""
    from ..methods import describe

    return describe(config.method)


def planned_claim(config: Any) -> tuple[float, float]:
    """(ε, δ) the configuration targets, before the run (for sizing m): (ε, δ), pure ε (δ = 0), or μ-GDP at
    δ = 1e-5; a fixed noise multiplier has no target (ConfigError: give the number of canaries)."""
    p = config.privacy
    if p.kind in ("dp", "pure"):
        return float(p.epsilon), float(p.delta or 0.0)
    if p.kind == "gdp":
        from ..privacy import gdp_epsilon

        return float(gdp_epsilon(1e-5, p.mu)), 1e-5
    raise ConfigError(f"a {p.kind!r} budget states no ε target: give the number of canaries (--canaries)")


def stated_claim(statement: dict[str, Any]) -> tuple[float, float, str]:
    """(ε, δ, words) the run's privacy.json states: the spent (ε, δ) of a DP or pure claim, or ε at the report δ
    of a GDP claim or of a run without target."""
    g = statement.get("guarantee") or {}
    spent = g.get("spent") or {}
    kind = g.get("kind")
    if kind == "dp":
        return float(spent["epsilon"]), float(spent["delta"]), f"({spent['epsilon']:.4g}, {spent['delta']:g})-DP"
    if kind == "pure":
        return float(spent["epsilon"]), 0.0, f"pure {spent['epsilon']:.4g}-DP"
    if kind == "gdp":
        return (float(spent["epsilon_at_report_delta"]), float(spent["report_delta"]),
                f"{spent['mu']:.4g}-GDP, i.e. ({spent['epsilon_at_report_delta']:.4g}, {spent['report_delta']:g})-DP")
    ref = g.get("reference") or {}
    if "epsilon_at_report_delta" in ref:
        return (float(ref["epsilon_at_report_delta"]), float(ref["report_delta"]),
                f"no target; ({ref['epsilon_at_report_delta']:.4g}, {ref['report_delta']:g})-DP for reference")
    raise ConfigError("privacy.json states no ε the membership game could test")


def _write_private(config: Any, records: Any, extra: list[tuple[str, dict[str, str]]], path: Path,
                   rng: _secrets.SystemRandom) -> None:
    """The private corpus with the extra records, shuffled (OS entropy), in the configuration's columns."""
    from ..data import Corpus, write_corpus

    d = config.data
    cols = list(d.label_columns)
    texts = [*records.texts, *(t for t, _ in extra)]
    labels = {c: [*records.labels[c], *(lab[c] for _, lab in extra)] for c in cols}
    ids = [*records.ids, *(f"audit-canary-{i}" for i in range(len(extra)))]
    order = list(range(len(texts)))
    rng.shuffle(order)
    corpus = Corpus(ids=tuple(ids[i] for i in order), texts=tuple(texts[i] for i in order),
                    labels={c: tuple(labels[c][i] for i in order) for c in cols}, name="private (audit)")
    extra_cols: dict[str, Sequence[Any]] | None = {d.id_column: list(corpus.ids)} if d.id_column else None
    write_corpus(corpus, path, text_column=d.text_column, include_ids=False, extra=extra_cols)


def audit_end_to_end(
    config: Any,
    *,
    canaries: int | None = None,
    confidence: float = 0.95,
    workdir: str | Path | None = None,
    embedder: Any = None,
    holders: int = 2,
    on_canaries: Callable[[list[Canary]], None] | None = None,
    after_run: Callable[[Path], None] | None = None,
) -> EndToEndResult:
    """Plant canaries in the configuration's private data, run the method once (``privtext.runner.run_config``),
    and attack the shareable outputs (module docstring). ``workdir`` holds the audit's corpus (a copy of the private
    corpus with the canaries, under ``private/``) and its run (default: a folder ``audit-end-to-end`` next to the
    configured output). ``embedder``: an embedder for the embedding score
    (default: the run's). ``on_canaries`` is called with the canaries before the run, ``after_run`` with the run
    directory before the attack (the CLI builds ``report.html`` there).

    A configuration that learns from the released votes (``evolution.learn``, docs/learn.md) is run as it is: the
    trained generator writes the later iterations (and, with ``evolution.final``, the output), and the attack reads
    the same shareable files; ``details["learn"]`` names the learning kind (``none`` without)."""
    from ..data import load_corpus

    t0 = time.perf_counter()
    cfg = _load(config)
    d = cfg.data
    desc = _description(cfg)
    opts = cfg.section(desc.section)
    if (opts.get("parties") or {}).get("files"):
        raise ConfigError("the end-to-end audit plants canaries in data.private; parties.files is not supported")
    rng = _secrets.SystemRandom()
    private = load_corpus(d.private, text_column=d.text_column, label_columns=d.label_columns,
                          id_column=d.id_column, name="private")
    public = (load_corpus(d.public, text_column=d.public_text_column or d.text_column, name="public")
              if d.public else None)
    game = desc.audit_game  # the method's description: membership (a DP claim) or reconstruction (SecPE's)
    work = Path(workdir) if workdir is not None else Path(cfg.output).parent / "audit-end-to-end"
    work.mkdir(parents=True, exist_ok=True)
    if game == "membership":
        cans, extra = _membership_canaries(cfg, private, public, canaries, confidence,
                                           opts.get("neighbouring") == "replace_one", rng)
    else:
        assert cfg.privacy.secret is not None
        cans = _plant_secrets(cfg, private, public, int(canaries) if canaries is not None else 32, holders, rng)
        extra = [(t, c.labels) for c in cans for t in c.holders]
    if on_canaries is not None:
        on_canaries(cans)
    t_run = time.perf_counter()
    root = _run_with_canaries(cfg, private, extra, work, rng)
    seconds = {"run": time.perf_counter() - t_run}
    if after_run is not None:
        after_run(root)
    t_attack = time.perf_counter()
    shared = read_shared(root)
    statement = json.loads((root / "privacy.json").read_text(encoding="utf-8"))
    common = {"method": cfg.method, "game": game, "confidence": confidence, "canaries": len(cans),
              "run_dir": str(root), "seconds": seconds}
    details = {"statement_private": bool(statement.get("private")), "learn": _learn_kind(statement)}
    if game == "membership":
        res = _membership_result(cfg, cans, shared, statement, public, embedder, rng, common, details)
    else:
        res = _reconstruction_result(cfg, cans, shared, holders, rng, common, details)
    seconds.update(attack=time.perf_counter() - t_attack, total=time.perf_counter() - t0)
    return res


def _membership_canaries(cfg: Any, private: Any, public: Any | None, canaries: int | None, confidence: float,
                         replace: bool, rng: _secrets.SystemRandom
                         ) -> tuple[list[Canary], list[tuple[str, dict[str, str]]]]:
    """The membership game's canaries (module docstring; as many as the claim needs with the number of guessing
    rules, unless ``canaries`` is given) and the records they add to the private corpus (the included canaries;
    under ``replace_one`` the excluded ones' prefixes)."""
    words = rare_public_words(public, private)
    n_rules = RULES + (2 if words else 0)
    eps0, delta0 = planned_claim(cfg) if canaries is None else (math.nan, 0.0)
    m = int(canaries) if canaries is not None else _canaries_for(eps0, delta0, confidence, n_rules)
    cols = list(cfg.data.label_columns)
    # each canary's public words: distinct across canaries while the pool lasts (so that finding one names
    # one canary), else drawn with replacement
    pool = rng.sample(words, len(words))
    cans = []
    for i, prefix in enumerate(_prefixes(private, public, m, rng, avoid=words)):
        if len(pool) >= PUBLIC_WORDS * m:
            pw = tuple(pool[PUBLIC_WORDS * i:PUBLIC_WORDS * (i + 1)])
        else:
            pw = tuple(rng.sample(words, min(PUBLIC_WORDS, len(words))))
        suffix = rare_suffix(rng, public_words=pw)
        cans.append(Canary(index=i, text=f"{prefix} {suffix}.", labels=_labels_like(private, cols, rng),
                           included=bool(rng.getrandbits(1)), suffix=suffix, public_words=pw,
                           replacement=prefix if replace else None))
    extra = [(c.text, c.labels) for c in cans if c.included]
    extra += [(c.replacement, c.labels) for c in cans if not c.included and c.replacement is not None]
    return cans, extra


def _run_with_canaries(cfg: Any, private: Any, extra: list[tuple[str, dict[str, str]]], work: Path,
                       rng: _secrets.SystemRandom) -> Path:
    """Write the private corpus with ``extra`` (under ``work/private/``) and run the configuration on it, in a
    fresh run folder under ``work``: an audit never resumes or replaces one."""
    from ..config import config_from_dict
    from ..runner import run_config

    token = _secrets.token_hex(4)
    (work / "private").mkdir(mode=0o700, exist_ok=True)  # a copy of the private corpus: never to be shared
    corpus_path = work / "private" / f"corpus-{token}.jsonl"
    _write_private(cfg, private, extra, corpus_path, rng)
    raw = cfg.dump()
    raw["data"]["private"] = str(corpus_path)
    raw["data"]["max_private"] = None
    raw["output"] = str(work / f"run-{token}")
    return Path(run_config(config_from_dict(raw, source="audit --end-to-end")))


def _learn_kind(statement: dict[str, Any]) -> str:
    """The run's ``evolution.learn`` kind as its privacy.json states it (``none`` when it states none)."""
    learn = (statement.get("parameters") or {}).get("learn") or {}
    return str(learn.get("kind", "none")) if isinstance(learn, dict) else "none"


def _membership_result(cfg: Any, cans: list[Canary], shared: SharedOutputs, statement: dict[str, Any],
                       public: Any | None, embedder: Any, rng: _secrets.SystemRandom, common: dict[str, Any],
                       details: dict[str, Any]) -> EndToEndResult:
    """Score the canaries from the shared outputs, guess, and bound ε (module docstring, membership game)."""
    eps, delta, claim_words = stated_claim(statement)
    emb = embedder
    if emb is None:
        from ..embed import build_embedder

        emb = build_embedder(cfg.embedder)
    scores = {"ngram": ngram_scores(cans, shared), "embedding": embedding_scores(cans, shared, emb),
              "perplexity": perplexity_scores(cans, shared, list(public.texts) if public is not None else None)}
    if any(c.public_words for c in cans):
        scores["released"] = released_scores(cans, released_numbers(statement))
    confidence, m = common["confidence"], len(cans)
    lb, rules = membership_bound(cans, scores, delta=delta, confidence=confidence, rng=rng)
    best = epsilon_lower_bound(m, m, m, delta=delta, confidence=1 - (1 - confidence) / max(len(rules), 1))
    return EndToEndResult(**common, claim=eps, claim_words=claim_words, lower_bound=lb,
                          included=sum(c.included for c in cans), passed=lb <= eps, rules=rules,
                          details={"delta": delta, **details, "best_possible": best})


def _reconstruction_result(cfg: Any, cans: list[Canary], shared: SharedOutputs, holders: int,
                           rng: _secrets.SystemRandom, common: dict[str, Any], details: dict[str, Any]
                           ) -> EndToEndResult:
    """The reconstruction game's success rate with its Clopper-Pearson interval against r (module docstring)."""
    p, r = float(cfg.privacy.secret.p), float(cfg.privacy.secret.r)
    m = len(cans)
    succ = reconstruct(cans, shared, rng)
    k = int(sum(succ))
    lo, hi = clopper_pearson(k, m, 1 - common["confidence"])
    return EndToEndResult(**common, claim=r, claim_words=f"(p={p:g}, r={r:g})-secret protection: success ≤ r",
                          lower_bound=lo, included=m, passed=lo <= r,
                          details={"successes": k, "upper": hi, "prior": 1.0 / len(cans[0].candidates),
                                   "holders": holders, **details})


def _canaries_for(epsilon: float, delta: float, confidence: float, tests: int) -> int:
    need = canaries_needed(epsilon, delta=delta, confidence=confidence, tests=tests)
    return int(8 * math.ceil(2 * need / 8))


# ------------------------------------------------------------------------------------------- reconstruction


def secret_candidates(slot: int, size: int) -> tuple[str, ...]:
    """The candidate set of slot ``slot``: ``size`` phone numbers with area code 200 + slot and, up to 10⁴
    candidates, the exchange 300 + slot too (the slot's own number prefix; larger sets enumerate exchanges)."""
    if not 0 <= slot < 700:
        raise ConfigError(f"at most 700 secret slots, got slot {slot}")
    if not 1 <= size <= 7_000_000:
        raise ConfigError(f"a candidate set of 1/p = {size} numbers is outside [1, 7·10^6]")
    small = size <= 10_000
    return tuple(f"({200 + slot}) {300 + slot if small else 300 + x // 10000:03d}-{x % 10000:04d}"
                 for x in range(size))


def _canonical(value: str) -> str:
    return re.sub(r"\D", "", value)


def _plant_secrets(config: Any, private: Any, public: Any | None, m: int, holders: int,
                   rng: _secrets.SystemRandom) -> list[Canary]:
    from .. import secrets as secrets_mod

    p = float(config.privacy.secret.p)
    size = max(2, round(1.0 / p))
    cols = list(config.data.label_columns)
    cans = []
    for j in range(m):
        cands = secret_candidates(j, size)
        value = cands[rng.randrange(size)]
        texts = tuple(f"Please call the patient back on {value}. {pre}"
                      for pre in _prefixes(private, public, holders, rng))
        cans.append(Canary(index=j, text=texts[0], labels=_labels_like(private, cols, rng), included=True,
                           secret=value, candidates=cands, holders=texts))
    spec = config.section(_description(config).section).get("detector", "regex")
    det = secrets_mod.build_detector(spec)
    for c in cans:
        mask = np.asarray(det.detect(list(c.holders)).private_mask(), dtype=bool)
        if not mask.any():
            raise ConfigError(f"the configured detector ({secrets_mod.describe_detector(spec)}) finds no secret in "
                              f"a planted holder ('… call the patient back on (NNN) NNN-NNNN'): the reconstruction "
                              "game needs secrets of a type the detector declares (e.g. add 'regex')")
    return cans


def reconstruct(canaries: Sequence[Canary], shared: SharedOutputs, rng: _secrets.SystemRandom) -> list[bool]:
    """The attacker of the reconstruction game: every phone-like number in the shared text names a candidate —
    by its last 7 digits (exchange and line) when the candidate sets are small enough for the exchange to be the
    slot's own, else by all 10 — and for each slot it guesses the most frequent of its candidates found (ties and
    no find: uniformly at random, OS entropy); returns whether each guess is the planted value."""
    found: Counter[str] = Counter()
    for t in shared.all_text:
        for a, b, c in _PHONE.findall(t):
            found[a + b + c] += 1
        for b, c in _LINE.findall(t):
            found[b + c] += 1
    out = []
    for can in canaries:
        assert can.secret is not None
        short = len(can.candidates) <= 10_000
        index = {_canonical(x)[3:] if short else _canonical(x): x for x in can.candidates}
        hits = {v: n for v, n in found.items() if v in index}
        if hits:
            top = max(hits.values())
            guess = index[rng.choice(sorted(v for v, n in hits.items() if n == top))]
        else:
            guess = can.candidates[rng.randrange(len(can.candidates))]
        out.append(guess == can.secret)
    return out


__all__ = ["SHAREABLE", "Canary", "EndToEndResult", "RuleResult", "SharedOutputs", "audit_end_to_end",
           "embedding_scores", "guessing_rules", "membership_bound", "ngram_scores", "perplexity_scores",
           "planned_claim", "read_shared", "reconstruct", "secret_candidates", "stated_claim"]
