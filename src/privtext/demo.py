"""``privtext demo``: a small clinic-visit-notes corpus with planted secrets, run end to end offline.

The corpus is made here, from templates, with a seeded generator:

* ``private.csv`` — visit notes labelled by department and visit type. About a third mention a patient by name
  with a phone number, an e-mail address, a medical record number or a date of birth; patients come back, so
  a secret repeats across several records (the case SecPE is built for).
* ``public.csv`` — notes of the same kind with no identifiers (e.g. a published teaching set): the offline
  n-gram generator trains on it, and it never contains a planted secret. The teaching set covers every
  condition of a department evenly; the private clinic sees mostly two of them (:data:`PRIVATE_CASE_MIX`), which
  is what the private votes have to teach the run.
* ``patient_names.txt``, ``record_numbers.txt`` — what the data owner declares secret (``explicit`` detector);
  phones, e-mails and dates of birth are found by the ``regex`` detector.

The run uses the default offline backends: the n-gram generator trained on public text and the packaged MiniLM
embedder.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import numpy as np

from .data import Corpus, write_corpus


def _tables() -> dict[str, Any]:
    """The phrase tables the notes are written from (``demo_corpus.yaml``, package data: invented text)."""
    from importlib.resources import files

    import yaml

    return yaml.safe_load(files("privtext").joinpath("demo_corpus.yaml").read_text(encoding="utf-8"))


_T = _tables()
#: per department, five conditions: complaints, findings, assessments and plans, index-aligned
DEPARTMENTS: dict[str, dict[str, list[str]]] = _T["departments"]
VISITS: list[str] = _T["visits"]
OPENERS: list[str] = _T["openers"]
EXAMS: list[str] = _T["exams"]
ASSESS: list[str] = _T["assessments"]
PLANS: list[str] = _T["plans"]
EXTRA: list[str] = _T["extra"]
FIRST: list[str] = _T["first_names"]
LAST: list[str] = _T["last_names"]

#: the private clinic's case mix: in every department, most visits are about the first two conditions (a
#: specialised practice), while the public teaching set covers the five conditions evenly. The private signal the
#: votes must find is this case mix: the generator, trained on public text, writes the even mix.
PRIVATE_CASE_MIX = (0.45, 0.35, 0.1, 0.05, 0.05)


def _note(rng: np.random.Generator, dept: str, visit: str, mix: tuple[float, ...] | None = None) -> str:
    """One note about one condition of the department (each field strays to another condition w.p. 0.15);
    the condition is drawn from ``mix`` (default: uniform)."""
    d = DEPARTMENTS[dept]
    n = len(d["complaints"])
    k = int(rng.choice(n, p=np.asarray(mix) / np.sum(mix))) if mix is not None else int(rng.integers(n))

    def field(name: str) -> str:
        xs = d[name]
        return xs[k] if rng.random() < 0.85 else xs[int(rng.integers(len(xs)))]

    def pick(xs: list[str]) -> str:
        return xs[int(rng.integers(len(xs)))]

    parts = [
        pick(OPENERS).format(c=field("complaints"), V=visit.capitalize()),
        pick(EXAMS).format(f=field("findings")),
        pick(ASSESS).format(a=field("assessments")),
        pick(PLANS).format(p=field("plans")),
    ]
    if rng.random() < 0.6:
        parts.insert(int(rng.integers(1, len(parts))), pick(EXTRA))
    return " ".join(parts)


def _patients(rng: np.random.Generator, n: int) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    used: set[str] = set()
    while len(out) < n:
        name = f"{FIRST[int(rng.integers(len(FIRST)))]} {LAST[int(rng.integers(len(LAST)))]}"
        if name in used:
            continue
        used.add(name)
        out.append({
            "name": name,
            "phone": f"({rng.integers(201, 989)}) 555-{rng.integers(1000, 9999)}",
            "email": f"{name.split()[0].lower()}.{name.split()[1].lower()}{rng.integers(10, 99)}@mailbox.example",
            "mrn": f"MRN-{rng.integers(10**6, 10**7)}",
            "dob": f"{rng.integers(1, 13):02d}/{rng.integers(1, 29):02d}/{rng.integers(1935, 2015)}",
        })
    return out


def _with_secret(rng: np.random.Generator, note: str, p: dict[str, str]) -> str:
    forms = [
        f"{p['name']} ({p['mrn']}). " + note,
        note + f" Call {p['name']} back at {p['phone']} with results.",
        f"Patient {p['name']}, DOB {p['dob']}. " + note,
        note + f" Results will be sent to {p['email']}.",
        f"{p['mrn']}: " + note + f" Contact number {p['phone']}.",
    ]
    return forms[int(rng.integers(len(forms)))]


def make_demo_corpora(*, n_private: int = 240, n_public: int = 700, n_patients: int = 30,
                      seed: int = 0) -> tuple[Corpus, Corpus, list[dict[str, str]]]:
    rng = np.random.default_rng(seed)
    depts = list(DEPARTMENTS)
    patients = _patients(rng, n_patients)
    visits_per = rng.integers(1, 6, size=n_patients)  # a patient comes back 1-5 times: secrets repeat
    texts, dl, vl = [], [], []
    owner = [i for i, k in enumerate(visits_per) for _ in range(k)]
    n_secret = min(len(owner), n_private // 3)
    owner = owner[:n_secret]
    home = {i: depts[int(rng.integers(len(depts)))] for i in range(n_patients)}
    for j in range(n_private):
        dept = home[owner[j]] if j < n_secret else depts[int(rng.integers(len(depts)))]
        visit = VISITS[int(rng.random() < 0.55)]
        note = _note(rng, dept, visit, PRIVATE_CASE_MIX)
        if j < n_secret:
            note = _with_secret(rng, note, patients[owner[j]])
        texts.append(note)
        dl.append(f"Department: {dept}")
        vl.append(f"Visit: {visit}")
    perm = rng.permutation(n_private)
    private = Corpus.from_texts([texts[i] for i in perm], {"department": [dl[i] for i in perm],
                                                           "visit": [vl[i] for i in perm]}, name="private")
    prng = np.random.default_rng(seed + 1)
    ptexts, pd_, pv = [], [], []
    for _ in range(n_public):
        dept = depts[int(prng.integers(len(depts)))]
        visit = VISITS[int(prng.random() < 0.55)]
        ptexts.append(_note(prng, dept, visit))
        pd_.append(f"Department: {dept}")
        pv.append(f"Visit: {visit}")
    # a teaching note that happens to equal a private note (short templates collide) is left out, so the two sets
    # share no record and no private note is public only by the run's public-corpus assumption
    seen = set(texts)
    keep = [i for i, t in enumerate(ptexts) if t not in seen]
    public = Corpus.from_texts([ptexts[i] for i in keep], {"department": [pd_[i] for i in keep],
                                                           "visit": [pv[i] for i in keep]}, name="public")
    return private, public, patients


#: the demo's default method: SecPE (the corpus has declared secrets)
DEMO_DEFAULT = "secpe"
#: the demo's budget by the kind of guarantee a method's description declares: (ε = 4, δ = 1e-5) for (ε, δ)-DP,
#: pure ε = 6 (no δ), and SecPE's (p, r) for secret protection
DEMO_BUDGETS: dict[str, dict[str, Any]] = {
    "approximate": {"epsilon": 4.0, "delta": 1e-5},
    "pure": {"epsilon": 6.0},
    "secret": {"secret": {"p": 1e-3, "r": 2e-2}},
}


def demo_methods() -> list[str]:
    """The methods ``privtext demo`` offers: every registered method that declares demo settings
    (``MethodRun.demo``), in the registry's order. Imports every method's module (a few seconds)."""
    from .methods import METHODS

    return [n for n in METHODS.names() if METHODS.get(n).demo is not None]


def __getattr__(name: str) -> Any:
    if name == "DEMO_METHODS":  # computed on use: it imports every method (demo_methods)
        return tuple(demo_methods())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _demo_method(method: str) -> Any:
    """The method class of ``method`` when the demo offers it, else a ConfigError naming those it offers."""
    from .errors import ConfigError
    from .methods import METHODS

    cls = METHODS.get(method) if method in METHODS else None
    if cls is None or cls.demo is None:
        raise ConfigError(f"demo method must be one of {', '.join(demo_methods())}; got {method!r}")
    return cls


def write_demo_files(folder: Path, private: Corpus, public: Corpus, patients: list[dict[str, str]]) -> None:
    """The files :func:`demo_config` names: private.csv, public.csv and the secret lists the SecPE detector reads
    (patient_names.txt, record_numbers.txt)."""
    write_corpus(private, folder / "private.csv", include_ids=False)
    write_corpus(public, folder / "public.csv", include_ids=False)
    (folder / "patient_names.txt").write_text("".join(f"{p['name']}\n" for p in patients), encoding="utf-8")
    (folder / "record_numbers.txt").write_text("".join(f"{p['mrn']}\n" for p in patients), encoding="utf-8")


def demo_config(folder: Path, method: str = DEMO_DEFAULT) -> dict[str, Any]:
    """The demo's run configuration for ``method`` (one of :func:`demo_methods`); paths are the demo folder's.
    The budget follows the kind of guarantee the method's description declares (:data:`DEMO_BUDGETS`); the
    method's own demo settings (``MethodRun.demo``) replace whole sections; a secret-protection method detects the
    demo's declared secrets (the patient names and record numbers the corpus plants, and regex)."""
    cls = _demo_method(method)
    desc = cls.description
    privacy = dict(DEMO_BUDGETS[desc.guarantee])
    raw: dict[str, Any] = {
        "method": method,
        "seed": 0,
        "data": {"private": str(folder / "private.csv"), "public": str(folder / "public.csv"),
                 "text_column": "text", "label_columns": ["department", "visit"]},
        "generator": {"backend": "ngram", "order": 4},
        "embedder": {"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2", "max_seq_length": 128},
        "privacy": privacy,
        "synthesis": {"num_samples": 80},
        # variation strength falls over the iterations (Aug-PE's schedule): large edits early, small ones late
        "evolution": {"iterations": 4, "variations": 6, "selection": "rank",
                      "variation": {"kind": "blank", "mask_prob": 0.5, "mask_prob_schedule": [0.5, 0.35, 0.25, 0.2]}},
        "output": str(folder / f"run-{method}"),
    }
    if desc.guarantee == "secret":
        raw[desc.section] = {"detector": [
            "regex", {"name": "explicit", "file": str(folder / "patient_names.txt"), "type": "PATIENT_NAME"},
            {"name": "explicit", "file": str(folder / "record_numbers.txt"), "type": "MRN"}]}
    for key, value in copy.deepcopy(cls.demo).items():
        if value is None:
            raw.pop(key, None)
        elif key == desc.section and isinstance(raw.get(key), dict):
            raw[key] = {**raw[key], **value}
        else:
            raw[key] = value
    return raw


def run_demo(out: str | os.PathLike[str], *, method: str = DEMO_DEFAULT) -> Path:
    """Make the corpora, run ``method`` on them, evaluate the synthetic notes against held-out notes of the
    private clinic, diagnose every iteration (FID to the private notes, share of candidates with a vote) and write
    the report. Returns the run directory; ``demo_summary`` reads what the demo found."""
    import yaml

    from .config import config_from_dict
    from .runner import run_config

    desc = _demo_method(method).description
    folder = Path(out).resolve()
    run_dir = folder / f"run-{method}"
    if run_dir.exists() and any(run_dir.iterdir()):
        import shutil

        shutil.rmtree(run_dir)  # the demo owns this folder: a second demo replaces the first
    folder.mkdir(parents=True, exist_ok=True)
    private, public, patients = make_demo_corpora()
    heldout = make_heldout(n=200)
    write_demo_files(folder, private, public, patients)
    write_corpus(heldout, folder / "heldout.csv", include_ids=False)
    raw = demo_config(folder, method)
    (folder / f"{method}.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    root = run_config(config_from_dict(raw, source="demo"))
    from .evaluate import evaluate_run
    from .evaluate.diagnose import diagnose_run
    from .report import write_report

    evaluate_run(root, real=folder / "heldout.csv", quiet=True)
    if desc.checkpoints:  # per-iteration checkpoints to diagnose (not DP-KPS's one shot)
        diagnose_run(root)
    write_report(root)
    return root


def make_heldout(n: int = 200, seed: int = 99) -> Corpus:
    """Notes of the private clinic (its case mix, no identifiers) that the run never sees: the demo evaluates the
    synthetic notes against them (they stand for the clinic's future notes)."""
    rng = np.random.default_rng(seed)
    depts = list(DEPARTMENTS)
    texts, dl, vl = [], [], []
    for _ in range(n):
        dept = depts[int(rng.integers(len(depts)))]
        visit = VISITS[int(rng.random() < 0.55)]
        texts.append(_note(rng, dept, visit, PRIVATE_CASE_MIX))
        dl.append(f"Department: {dept}")
        vl.append(f"Visit: {visit}")
    return Corpus.from_texts(texts, {"department": dl, "visit": vl}, name="heldout")


def demo_summary(root: str | os.PathLike[str]) -> dict[str, Any]:
    """What the demo shows, from the run's private diagnostics: FID to the private notes per iteration (of the
    selected notes; of all notes so far for WASP, whose output is every round's notes), the zero-shot FID (the
    generator alone), and whether the private signal helped. DP-KPS, which has no iterations, is summarised by
    its evaluation against the clinic's held-out notes."""
    import json

    from .methods import describe
    from .rundir import RunDir

    run = RunDir(root)
    statement = json.loads(run.privacy.read_text(encoding="utf-8")) if run.privacy.exists() else {}
    desc = describe(str(statement.get("method")), statement)
    if not desc.checkpoints:  # nothing per iteration to diagnose (DP-KPS's one shot)
        ev_path = run.private / "evaluation.json"
        ev = json.loads(ev_path.read_text(encoding="utf-8")) if ev_path.exists() else {}
        f = (ev.get("fid") or {}).get("fid")
        pr = ev.get("precision_recall") or {}
        how = desc.progress_words if not desc.iterative else f"no per-{desc.unit} checkpoints to diagnose"
        words = (f"{desc.name}: {how}; it released {desc.release_words}. Against the clinic's held-out notes: FID "
                 + ("—" if f is None else f"{f:.3f}")
                 + (f", kNN precision {100 * pr['precision']:.0f} %, recall {100 * pr['recall']:.0f} %." if pr else "."))
        return {"fid_zero_shot": None, "fid_per_iteration": [], "improved": None, "words": words}
    d = json.loads(run.diagnostics.read_text(encoding="utf-8")).get("evolution") or {}
    # the synthetic set is every round's notes (WASP) or the last iteration's selection
    key = "fid_candidates" if desc.output == "all" else "fid_selected"
    fids = [r[key] for r in d.get("iterations", []) if r.get(key) is not None]
    z = d.get("fid_zero_shot")
    ok = bool(fids) and z is not None and fids[-1] < fids[0] and fids[-1] < z
    what = f"all notes so far, by {desc.unit}" if desc.output == "all" else f"selected notes by {desc.unit}"
    words = ("FID to the private notes (lower is closer): zero-shot generator "
             + ("—" if z is None else f"{z:.3f}") + f"; {what} "
             + ", ".join(f"{f:.3f}" for f in fids)
             + (". The private votes moved the synthetic notes toward the clinic's notes: the last iteration is "
                "closer than the first and than the generator alone." if ok else
                ". The last iteration is NOT closer than both the first iteration and the generator alone."))
    return {"fid_zero_shot": z, "fid_per_iteration": fids, "improved": ok, "words": words}
