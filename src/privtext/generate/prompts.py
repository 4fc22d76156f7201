"""Prompt families: the templates every prompt-based backend renders (data files in ``prompts/*.yaml``).

A family is one YAML file with these sections (see ``generic.yaml`` for a commented example):

``random``       RANDOM_API: ``labeled`` / ``unlabeled`` template lists and ``personas`` (a writer is drawn per
                 prompt for diversity, as Aug-PE does);
``paraphrase``   VARIATION_API, paraphrase form: a template and the ``styles`` drawn from;
``blank``        VARIATION_API, fill-in-the-blanks form: masked text with ``_`` blanks and a target word count;
``seeded``       DP-KPS: a document type and the keyphrases, in order, without any class information;
``contrastive``  WASP Tab 7: worse examples, then better examples, then the instruction (``fewshot`` is the
                 "w/o contrastive" form used when no worse examples are given);
``detect``       regular expressions on label columns, label values and the public corpus name that make
                 ``prompt_family: auto`` choose this family;
``length``       (optional) a public prior on the length of the domain's texts: ``target_words: [low, high]``
                 (random prompts ask for a length drawn from it) and ``max_words`` (a cap every backend honours);
                 see :mod:`privtext.generate.length`.

Placeholders: ``{label}`` (e.g. ``Business Category: Bars, Review Stars: 4.0``), ``{label_sentence}`` (the
family's sentence about the label, empty without label), ``{persona}``, ``{doc_type}``, ``{text}``, ``{style}``,
``{masked}``, ``{target_words}``, ``{keyphrases}``, ``{examples}``.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from ..errors import ConfigError, UnknownNameError
from .length import LengthTarget

if TYPE_CHECKING:
    from ..data.corpus import Corpus
    from ..data.labels import LabelInfo

BLANK = "_"

_ALLOWED = {
    "random.labeled": {"label", "label_sentence", "persona", "doc_type", "target_words"},
    "random.unlabeled": {"persona", "doc_type", "target_words"},
    "paraphrase.template": {"label", "label_sentence", "doc_type", "text", "style"},
    "blank.template": {"label", "label_sentence", "doc_type", "masked", "target_words"},
    "seeded.template": {"doc_type", "keyphrases"},
    "contrastive.template": {"label", "label_sentence", "doc_type", "examples"},
    "contrastive.fewshot_template": {"label", "label_sentence", "doc_type", "examples"},
    "contrastive.good_item": {"doc_type", "text"},
    "contrastive.bad_item": {"doc_type", "text"},
    "contrastive.fewshot_item": {"doc_type", "text"},
    "label_sentence": {"label", "doc_type"},
}


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: an optional system message and the user text."""

    user: str
    system: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def messages(self) -> list[dict[str, str]]:
        out = []
        if self.system:
            out.append({"role": "system", "content": self.system})
        out.append({"role": "user", "content": self.user})
        return out

    def text(self) -> str:
        """Plain-text form for models without a chat template."""
        return f"{self.system}\n\n{self.user}\n" if self.system else f"{self.user}\n"


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


_TEXT_FIELDS = ("text", "masked", "examples", "keyphrases")


def _clean(text: str) -> str:
    """Tidy a rendered *template* (before user text is inserted): single line breaks of YAML blocks become
    spaces, paragraphs stay, an empty ``{label_sentence}`` leaves no double space."""
    text = re.sub(r"(?<!\n)\n(?!\n)", " ", text.strip())
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r" +([.,:;!?])", r"\1", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return "\n".join(line.strip() for line in text.split("\n")).strip()


def render(template: str, **values: Any) -> str:
    """Fill ``template``; free text (``text``, ``masked``, ``examples``, ``keyphrases``) is inserted verbatim after
    the template itself has been tidied."""
    sentinels = {k: f"\x00{k}\x00" for k in _TEXT_FIELDS if k in values}
    shaped = _clean(template.format(**{**values, **sentinels}))
    for k, s in sentinels.items():
        shaped = shaped.replace(s, str(values[k]))
    return shaped


@dataclass(frozen=True)
class PromptFamily:
    name: str
    doc_type: str
    system: str | None
    label_sentence: str
    random_labeled: tuple[str, ...]
    random_unlabeled: tuple[str, ...]
    personas: tuple[str, ...]
    paraphrase_template: str
    styles: tuple[str, ...]
    blank_template: str
    blank_length_noise: float
    seeded_template: str
    contrastive_template: str
    fewshot_template: str
    good_item: str
    bad_item: str
    fewshot_item: str
    sample_fraction: float
    detect_columns: tuple[str, ...] = ()
    detect_values: tuple[str, ...] = ()
    detect_corpus: tuple[str, ...] = ()
    length: LengthTarget | None = None
    source: str = ""

    # ------------------------------------------------------------------------------------------- loading
    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, source: str = "") -> PromptFamily:
        where = source or str(d.get("name", "prompt family"))

        def get(path: str, default: Any = ...) -> Any:
            cur: Any = d
            for part in path.split("."):
                if not isinstance(cur, Mapping) or part not in cur:
                    if default is ...:
                        raise ConfigError(f"{where}: missing key {path!r}")
                    return default
                cur = cur[part]
            return cur

        def texts(path: str, default: Any = ...) -> tuple[str, ...]:
            v = get(path, default)
            if isinstance(v, str):
                v = [v]
            if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
                raise ConfigError(f"{where}: {path} must be a string or a list of non-empty strings")
            return tuple(v)

        def text(path: str, default: Any = ...) -> str:
            v = get(path, default)
            if not isinstance(v, str):
                raise ConfigError(f"{where}: {path} must be a string, got {v!r}")
            return v

        fam = cls(
            name=text("name"),
            doc_type=text("doc_type"),
            system=get("system", None),
            label_sentence=text("label_sentence", "The {doc_type} has these attributes: {label}."),
            random_labeled=texts("random.labeled"),
            random_unlabeled=texts("random.unlabeled"),
            personas=texts("random.personas", ["a writer"]),
            paraphrase_template=text("paraphrase.template"),
            styles=texts("paraphrase.styles"),
            blank_template=text("blank.template"),
            blank_length_noise=float(get("blank.length_noise", 0.1)),
            seeded_template=text("seeded.template"),
            contrastive_template=text("contrastive.template"),
            fewshot_template=text("contrastive.fewshot_template"),
            good_item=text("contrastive.good_item"),
            bad_item=text("contrastive.bad_item"),
            fewshot_item=text("contrastive.fewshot_item"),
            sample_fraction=float(get("contrastive.sample_fraction", 0.5)),
            detect_columns=texts("detect.columns", []),
            detect_values=texts("detect.values", []),
            detect_corpus=texts("detect.corpus", []),
            length=_family_length(get("length", None), where),
            source=source,
        )
        checks = {
            "random.labeled": fam.random_labeled,
            "random.unlabeled": fam.random_unlabeled,
            "paraphrase.template": (fam.paraphrase_template,),
            "blank.template": (fam.blank_template,),
            "seeded.template": (fam.seeded_template,),
            "contrastive.template": (fam.contrastive_template,),
            "contrastive.fewshot_template": (fam.fewshot_template,),
            "contrastive.good_item": (fam.good_item,),
            "contrastive.bad_item": (fam.bad_item,),
            "contrastive.fewshot_item": (fam.fewshot_item,),
            "label_sentence": (fam.label_sentence,),
        }
        for key, templates in checks.items():
            for t in templates:
                try:
                    used = _fields(t)
                except ValueError as e:
                    raise ConfigError(f"{where}: {key} is not a valid template ({e})") from None
                bad = used - _ALLOWED[key]
                if bad:
                    raise ConfigError(
                        f"{where}: {key} uses unknown placeholder(s) {sorted(bad)}; allowed: {sorted(_ALLOWED[key])}"
                    )
        for key, need in (("blank.template", "masked"), ("paraphrase.template", "text"),
                          ("seeded.template", "keyphrases"), ("contrastive.template", "examples"),
                          ("contrastive.fewshot_template", "examples")):
            t = {"blank.template": fam.blank_template, "paraphrase.template": fam.paraphrase_template,
                 "seeded.template": fam.seeded_template, "contrastive.template": fam.contrastive_template,
                 "contrastive.fewshot_template": fam.fewshot_template}[key]
            if need not in _fields(t):
                raise ConfigError(f"{where}: {key} must contain the placeholder {{{need}}}")
        if fam.length is None and any("target_words" in _fields(t)
                                      for t in (*fam.random_labeled, *fam.random_unlabeled)):
            raise ConfigError(f"{where}: random templates ask for {{target_words}}: give the family a length section "
                              "(length: {target_words: [low, high], max_words: N})")
        if not 0 < fam.sample_fraction <= 1:
            raise ConfigError(f"{where}: contrastive.sample_fraction must be in (0, 1], got {fam.sample_fraction}")
        if fam.blank_length_noise < 0:
            raise ConfigError(f"{where}: blank.length_noise must be >= 0, got {fam.blank_length_noise}")
        return fam

    # ------------------------------------------------------------------------------------------ detection
    def matches(self, columns: Sequence[str], values: Sequence[str], corpus_name: str = "") -> int:
        """A score: how many of this family's detection patterns fire."""
        score = 0
        for pat in self.detect_columns:
            if any(re.search(pat, c) for c in columns):
                score += 1
        for pat in self.detect_values:
            if any(re.search(pat, v) for v in values):
                score += 2
        for pat in self.detect_corpus:
            if corpus_name and re.search(pat, corpus_name):
                score += 1
        return score

    # ---------------------------------------------------------------------------------------- rendering
    def _label_vars(self, label: LabelInfo | None) -> dict[str, str]:
        if label is None or not label:
            return {"label": "", "label_sentence": ""}
        rendered = label.render()
        return {"label": rendered,
                "label_sentence": self.label_sentence.format(label=rendered, doc_type=self.doc_type)}

    def _prompt(self, template: str, meta: dict[str, Any], **values: Any) -> Prompt:
        return Prompt(user=render(template, **values), system=self.system, meta=meta)

    def random_prompt(self, label: LabelInfo | None, rng: np.random.Generator | None, *,
                      target_words: int | None = None) -> Prompt:
        """``rng=None`` takes the first persona and template (backends that do not use them, e.g. n-gram).
        ``target_words``: the length asked for, where the template asks for one (default: drawn from the family's
        ``length`` with ``rng``, its mean without)."""
        persona = self.personas[_pick(len(self.personas), rng)]
        templates = self.random_labeled if label else self.random_unlabeled
        t = templates[_pick(len(templates), rng)]
        meta: dict[str, Any] = {"family": self.name, "persona": persona}
        if label:
            meta["label"] = label.as_dict()
        values: dict[str, Any] = {}
        if target_words is None and self.length is not None and "target_words" in _fields(t):
            target_words = self.length.draw(rng) if rng is not None else round(self.length.mean())
        if target_words is not None:
            values["target_words"] = int(target_words)
            meta["target_words"] = int(target_words)
        elif "target_words" in _fields(t):  # pragma: no cover - refused when the family is loaded
            raise ConfigError(f"prompt family {self.name!r}: its random template needs a target length")
        p = self._prompt(t, meta, persona=persona, doc_type=self.doc_type, **values, **self._label_vars(label))
        if target_words is not None and "target_words" not in _fields(t):  # a family without the placeholder
            p = Prompt(user=f"{p.user} The {self.doc_type} should have about {int(target_words)} words.",
                       system=p.system, meta=p.meta)
        return p

    def paraphrase_prompt(self, text: str, label: LabelInfo | None, style: str | None,
                          rng: np.random.Generator | None) -> Prompt:
        style = style if style is not None else self.styles[_pick(len(self.styles), rng)]
        meta: dict[str, Any] = {"family": self.name, "style": style}
        if label:
            meta["label"] = label.as_dict()
        return self._prompt(self.paraphrase_template, meta, text=text, style=style, doc_type=self.doc_type,
                            **self._label_vars(label))

    def blank_prompt(self, masked: str, target_words: int, label: LabelInfo | None) -> Prompt:
        meta: dict[str, Any] = {"family": self.name, "masked": masked, "target_words": target_words}
        if label:
            meta["label"] = label.as_dict()
        return self._prompt(self.blank_template, meta, masked=masked, target_words=target_words,
                            doc_type=self.doc_type, **self._label_vars(label))

    def seeded_prompt(self, keyphrases: Sequence[str], doc_type: str, *, examples: Sequence[str] = ()) -> Prompt:
        """DP-KPS's prompt; ``examples`` (public texts, App B.2.5 few-shot) are shown before the instruction."""
        kp = "; ".join(keyphrases)
        meta: dict[str, Any] = {"family": self.name, "keyphrases": list(keyphrases), "doc_type": doc_type}
        p = self._prompt(self.seeded_template, meta, doc_type=doc_type, keyphrases=kp)
        if not examples:
            return p
        meta["examples"] = len(examples)
        shots = "\n\n".join(f"Example {i}: {t}" for i, t in enumerate(examples, 1))
        return Prompt(user=f"Here are examples of a {doc_type}:\n\n{shots}\n\n{p.user}", system=p.system, meta=meta)

    def contrastive_prompt(self, good: Sequence[str], bad: Sequence[str], label: LabelInfo | None,
                           rng: np.random.Generator | None) -> Prompt:
        """WASP's prompt: a random ``sample_fraction`` (at least one) of the bad, then of the good examples
        (``rng=None`` shows all of them)."""
        g = _subsample(good, self.sample_fraction, rng)
        b = _subsample(bad, self.sample_fraction, rng)
        meta: dict[str, Any] = {"family": self.name, "good": len(g), "bad": len(b)}
        if label:
            meta["label"] = label.as_dict()
        if b:
            items = [self.bad_item.format(doc_type=self.doc_type, text=t) for t in b]
            items += [self.good_item.format(doc_type=self.doc_type, text=t) for t in g]
            template = self.contrastive_template
        else:
            items = [self.fewshot_item.format(doc_type=self.doc_type, text=t) for t in g]
            template = self.fewshot_template
        examples = "\n\n".join(items)
        return self._prompt(template, meta, examples=examples, doc_type=self.doc_type, **self._label_vars(label))

    def blank_variation_prompt(self, text: str, mask_prob: float, label: LabelInfo | None,
                               rng: np.random.Generator) -> Prompt:
        """Mask ``text`` as Aug-PE does and render the fill-in-the-blanks prompt."""
        masked, n_words = mask_words(text, mask_prob, rng)
        return self.blank_prompt(masked, n_words, label)


def _family_length(section: Any, where: str) -> LengthTarget | None:
    """A family's ``length`` section: ``target_words: [low, high]`` and an optional ``max_words``."""
    if section is None:
        return None
    if not isinstance(section, Mapping) or "target_words" not in section:
        raise ConfigError(f"{where}: length must be a mapping with target_words: [low, high] (and max_words)")
    unknown = set(section) - {"target_words", "max_words"}
    if unknown:
        raise ConfigError(f"{where}: length has unknown key(s) {sorted(unknown)}; valid: max_words, target_words")
    mw = section.get("max_words")
    if mw is not None and (isinstance(mw, bool) or not isinstance(mw, int) or mw < 1):
        raise ConfigError(f"{where}: length.max_words must be a positive integer, got {mw!r}")
    return LengthTarget.parse(section["target_words"], max_words=mw, source=f"prompt family ({where})")


def _pick(n: int, rng: np.random.Generator | None) -> int:
    return 0 if rng is None else int(rng.integers(n))


def _subsample(items: Sequence[str], fraction: float, rng: np.random.Generator | None) -> list[str]:
    if not items or rng is None:
        return list(items)
    k = max(1, round(len(items) * fraction))
    if k >= len(items):
        return list(items)
    idx = np.sort(rng.choice(len(items), size=k, replace=False))
    return [items[int(i)] for i in idx]


def mask_words(text: str, mask_prob: float, rng: np.random.Generator) -> tuple[str, int]:
    """Aug-PE's masking: each whitespace-separated word becomes a blank with probability ``mask_prob``; runs of
    blanks merge into one ``_``. Returns the masked text and the original word count (the target length)."""
    words = text.split()
    if not words:
        return BLANK, 0
    keep = rng.random(len(words)) >= mask_prob
    out: list[str] = []
    for w, k in zip(words, keep, strict=True):
        if k:
            out.append(w)
        elif not out or out[-1] != BLANK:
            out.append(BLANK)
    return " ".join(out), len(words)


# --------------------------------------------------------------------------------------------------- loading


def _package_dir() -> Any:
    return resources.files("privtext.generate").joinpath("prompts")


def template_texts(extra: Iterable[str] = ()) -> list[str]:
    """The public text of every shipped prompt family (and of the families named in ``extra``: names or .yaml
    paths): each template's fixed text between its ``{placeholders}``, the personas, styles, document types and
    system prompts. The run's guard counts it as public text (:meth:`privtext.guard.PrivateGuard.add_public`):
    a private record that a template holds is not a leak when a prompt holds it."""
    out: list[str] = []
    names = [*family_names(), *(e for e in extra if e and e != "auto")]
    for name in dict.fromkeys(names):
        fam = load_family(name)
        for v in vars(fam).values():
            for t in (v if isinstance(v, tuple) else (v,)):
                if isinstance(t, str):
                    out.extend(p for p in re.split(r"\{[^{}]*\}", t) if p.strip())
    return out


def family_names() -> list[str]:
    return sorted(p.name[:-5] for p in _package_dir().iterdir() if p.name.endswith(".yaml"))


@functools.lru_cache(maxsize=32)
def _load_cached(name: str) -> PromptFamily:
    path = Path(name)
    if name.endswith((".yaml", ".yml")) and path.exists():
        text, source = path.read_text(encoding="utf-8"), str(path)
    else:
        res = _package_dir().joinpath(f"{name}.yaml")
        if not res.is_file():
            raise UnknownNameError("prompt family", name, family_names())
        text, source = res.read_text(encoding="utf-8"), f"prompts/{name}.yaml"
    try:
        d = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not valid YAML ({e})") from None
    if not isinstance(d, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level")
    return PromptFamily.from_dict(d, source=source)


def load_family(name: str) -> PromptFamily:
    """A shipped family by name (``yelp``, ``openreview``, ``pubmed``, ``generic``) or a path to a YAML file."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"prompt family must be a name or a .yaml path, got {name!r}")
    return _load_cached(name if name.endswith((".yaml", ".yml")) else name.lower())


def detect_family(label_columns: Sequence[str] = (), public: Corpus | None = None,
                  label: LabelInfo | None = None) -> str:
    """The shipped family whose detection patterns best match the run's labels (``generic`` when none do)."""
    columns = list(label_columns)
    values: list[str] = []
    name = ""
    if public is not None:
        name = public.name or ""
        for c in public.labels:
            if c not in columns:
                columns.append(c)
            values.extend(sorted(set(public.labels[c]))[:50])
    if label is not None:
        columns.extend(label.columns)
        values.extend(label.values)
    best, best_score = "generic", 0
    for fam_name in family_names():
        if fam_name == "generic":
            continue
        score = load_family(fam_name).matches(columns, values, name)
        if score > best_score:
            best, best_score = fam_name, score
    return best


def resolve_family(requested: str, *, label_columns: Sequence[str] = (), public: Corpus | None = None) -> PromptFamily:
    if requested == "auto":
        return load_family(detect_family(label_columns, public))
    return load_family(requested)
