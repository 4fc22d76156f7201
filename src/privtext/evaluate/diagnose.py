"""Where does a run's private signal go? Per-iteration diagnostics, computed after the fact from the checkpoints,
the private corpus and the public corpus. They read private data: the result is a **private diagnostic**
(``private/diagnostics.json`` → ``iterations``; the ``--diagnostics`` report), never part of the release.

Per iteration t:

* ``candidates``, ``selected`` and ``distinct_selected``;
* ``share_with_votes`` — candidates whose released (noisy, thresholded) vote count is > 0; a low share means
  most candidates are chosen by the tie-break, not by the private data;
* ``votes_per_label`` — the released votes summed per label group;
* ``fid_candidates`` / ``fid_selected`` — FID of the candidate pool and of the selected set to the private corpus
  (on the run's embedder): selection helps when the selected set is closer than the pool;
* ``nn_private_selected`` / ``nn_public_selected`` — mean cosine similarity of each selected sample to its nearest
  private record and to its nearest public record (the pull of the vote against the pull of the generator);
* ``fid_zero_shot`` (once) — the iteration-0 random candidates, the generator without any private feedback.

FIDs are computed on sets of equal size where the comparison matters (``fid_candidates`` on a random subset of
the pool of the selected set's size), since FID is biased upwards at small n.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..data import Corpus, load_corpus
from ..errors import RunError
from ..rng import derive
from .embedding import resolve_embedder
from .fid import fid
from .runinfo import RunView


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _nn_sim(a: np.ndarray, b: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """For each row of a, the cosine similarity to its nearest row of b."""
    a, b = _unit(a), _unit(b)
    out = np.empty(len(a))
    for s in range(0, len(a), chunk):
        out[s:s + chunk] = (a[s:s + chunk] @ b.T).max(axis=1)
    return out


def _fid(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) < 2 or len(b) < 2:
        return None
    return float(fid(a, b).fid)


def _load(view: RunView, key: str, corpus: Corpus | str | os.PathLike[str] | None, max_n: int,
          rng: np.random.Generator) -> Corpus | None:
    if corpus is None:
        p = view.data.get(key)
        if not p or str(p).startswith("hf:"):
            return None
        corpus = str(p)
    if not isinstance(corpus, Corpus):
        try:
            corpus = load_corpus(corpus, text_column=view.text_column if key == "private" else
                                 (view.data.get("public_text_column") or view.text_column))
        except Exception as e:  # a missing or unreadable file: say so, don't fail the diagnostics
            raise RunError(f"diagnostics need the {key} corpus: {e}") from None
    if len(corpus) > max_n:
        corpus = corpus.subset(np.sort(rng.choice(len(corpus), size=max_n, replace=False)))
    return corpus


def diagnose_run(
    run_dir: str | os.PathLike[str],
    *,
    private: Corpus | str | None = None,
    public: Corpus | str | None = None,
    embedder: Any = None,
    max_private: int = 5000,
    max_public: int = 2000,
    write: bool = True,
) -> dict[str, Any]:
    """Per-iteration diagnostics of a run (module docstring); with ``write`` they are merged into
    ``private/diagnostics.json`` under ``iterations``. ``private``/``public`` default to the run's data files."""
    view = RunView(run_dir)
    its = view.iterations()
    if not its:
        raise RunError(f"{view.root}: no complete iteration to diagnose")
    rng = derive(view.seed, "diagnose")
    priv = _load(view, "private", private, max_private, rng)
    if priv is None:
        raise RunError(f"{view.root}: the private corpus is not available for diagnostics")
    pub = _load(view, "public", public, max_public, rng)
    emb = resolve_embedder(embedder if embedder is not None else view.embedder_config,
                           cache_dir=view.dir.embed_cache)
    priv_emb = emb.embed(list(priv.texts))
    pub_emb = emb.embed(list(pub.texts)) if pub is not None and len(pub) else None
    rows: list[dict[str, Any]] = []
    zero_shot = None
    for t in its:
        df = view.candidates(t)
        cand_emb = emb.embed([str(x) for x in df["text"]])
        sel_mask = df["selected"].to_numpy(dtype=bool)
        sel_emb = cand_emb[sel_mask]
        votes = df["votes"].to_numpy(dtype=np.float64) if "votes" in df.columns else np.zeros(len(df))
        labels = [c for c in view.label_columns if c in df.columns]
        keys = (df[labels].astype(str).agg(" | ".join, axis=1) if labels else None)
        per_label: dict[str, float] = {}
        if keys is not None:
            for k in sorted(set(keys)):
                per_label[str(k)] = round(float(votes[(keys == k).to_numpy()].sum()), 3)
        # the pool at the selected set's size (FID is biased upwards at small n); a round that selected nothing
        # (WASP's last one) is measured on its whole pool, not on 2 samples
        k = int(sel_mask.sum())
        sub = rng.choice(len(cand_emb), size=min(len(cand_emb), k) if k >= 2 else len(cand_emb), replace=False)
        row: dict[str, Any] = {
            "iteration": t, "candidates": len(df), "selected": int(sel_mask.sum()),
            "distinct_selected": int(sel_mask.sum()),
            "share_with_votes": round(float((votes > 0).mean()) if len(votes) else 0.0, 4),
            "votes_per_label": per_label,
            "fid_candidates": _fid(cand_emb[sub], priv_emb),
            "fid_selected": _fid(sel_emb, priv_emb),
            "nn_private_selected": round(float(_nn_sim(sel_emb, priv_emb).mean()), 4) if len(sel_emb) else None,
            "nn_public_selected": (round(float(_nn_sim(sel_emb, pub_emb).mean()), 4)
                                   if pub_emb is not None and len(sel_emb) else None),
        }
        if "times_selected" in df.columns:
            row["selected"] = int(df["times_selected"].sum())
        if t == 0 and "origin" in df.columns:
            rnd = (df["origin"] == "random").to_numpy()
            if rnd.sum() >= 2:
                pick = np.flatnonzero(rnd)
                pick = rng.choice(pick, size=min(len(pick), max(2, int(sel_mask.sum()))), replace=False)
                zero_shot = _fid(cand_emb[pick], priv_emb)
        rows.append(row)
    out = {"iterations": rows, "fid_zero_shot": zero_shot, "embedder": emb.name, "private_n": len(priv),
           "public_n": len(pub) if pub is not None else 0}
    if write:
        from ..atomicio import atomic_write_json

        current = view.diagnostics if view.dir.diagnostics.exists() else {}
        atomic_write_json(view.dir.diagnostics, {**current, "evolution": out})
    return out


def summary_lines(d: Mapping[str, Any]) -> Sequence[str]:
    """The diagnostics as a few lines of text (the demo and ``privtext diagnose`` print them)."""
    lines = []
    z = d.get("fid_zero_shot")
    for r in d["iterations"]:
        fs = "—" if r["fid_selected"] is None else f"{r['fid_selected']:.4g}"
        lines.append(f"iteration {r['iteration']}: FID to private: selected {fs}, candidate pool "
                     f"{r['fid_candidates']:.4g}; candidates with a vote {100 * r['share_with_votes']:.1f}%; "
                     f"nearest private {r['nn_private_selected']}, nearest public {r['nn_public_selected']}")
    if z is not None:
        lines.append(f"zero-shot (generator alone) FID to private: {z:.4g}")
    return lines


def prompt_findings(run_dir: str | os.PathLike[str], *, private: Corpus | str | None = None,
                    limit: int = 20) -> dict[str, Any]:
    """What the prompt audit flagged, with the text (a private diagnostic: it prints private text).

    From ``private/diagnostics.json`` (the audit's findings: the prompt line, the kind, the span of the prompt's
    normalised words, the private record's id, why no public source explains it), ``prompts.jsonl`` (the matched
    words) and the private file (the record). Returns ``{"checked", "flagged", "counts", "findings": [...]}``;
    each finding gains ``matched`` (the prompt's words) and ``record_text``."""
    from ..atomicio import read_jsonl
    from ..guard import prompt_words

    view = RunView(run_dir)
    audit = view.diagnostics.get("prompt_audit") or {}
    if not audit:
        raise RunError(f"{view.root}: no prompt audit in private/diagnostics.json (the run has not finished)")
    findings = [dict(f) for f in audit.get("findings", [])][:limit]
    lines = {int(f["line"]) for f in findings}
    prompts: dict[int, Any] = {}
    if lines and view.dir.prompts.exists():
        for i, rec in enumerate(read_jsonl(view.dir.prompts), start=1):
            if i in lines:
                prompts[i] = rec
            if i >= max(lines):
                break
    records: dict[str, str] = {}
    if any(f.get("record_id") is not None for f in findings):
        corpus = private if isinstance(private, Corpus) else None
        if corpus is None:
            path = str(private) if private is not None else view.data.get("private")
            if path and not str(path).startswith("hf:"):
                corpus = load_corpus(str(path), text_column=view.text_column, id_column=view.data.get("id_column"))
        if corpus is not None:
            records = dict(zip(corpus.ids, corpus.texts, strict=True))
    for f in findings:
        rec = prompts.get(int(f["line"]))
        if rec is not None:
            f["operation"] = rec.get("operation")
            if f.get("words"):
                a, b = f["words"]
                f["matched"] = " ".join(prompt_words(rec)[a:b])
        if f.get("record_id") is not None:
            f["record_text"] = records.get(str(f["record_id"]))
    counts = {k: v for k, v in audit.items() if k.startswith("prompts_with")}
    return {"checked": audit.get("prompts_checked"), "flagged": audit.get("flagged_prompt_lines", []),
            "id_words": ("" if view.data.get("id_column") else
                         "(no data.id_column: the id is the record's data row in the private file, from 0)"),
            "clean": audit.get("clean"), "counts": counts, "findings": findings}


def prompt_lines(d: Mapping[str, Any]) -> Sequence[str]:
    """:func:`prompt_findings` as text (``privtext diagnose RUN --prompts``)."""
    if d.get("clean"):
        lines = [f"prompt audit: clean ({d.get('checked')} prompts checked)"]
    else:
        lines = [f"prompt audit: {len(d.get('flagged') or [])} flagged prompt line(s) of {d.get('checked')} "
                 f"(first 50: {d.get('flagged')})"]
    explained = {k: v for k, v in d.get("counts", {}).items() if v and ("public" in k or "generated" in k)}
    if explained:
        lines.append("explained by a public source (not flagged): " + ", ".join(f"{k}={v}" for k, v in
                                                                                 explained.items()))
    for f in d.get("findings", []):
        lines.append(f"line {f['line']} ({f.get('operation') or 'prompt'}): {f['kind'].replace('_', ' ')} — "
                     f"{f['why']}")
        if f.get("matched"):
            lines.append(f"    matched in the prompt: {f['matched']!r}")
        if f.get("record_id") is not None:
            lines.append(f"    private record {f['record_id']} {d.get('id_words', '')}: {f.get('record_text')!r}")
        if f.get("secret") is not None:
            lines.append(f"    secret column {f['secret']} (values are never written to diagnostics)")
    if not d.get("clean"):
        lines.append("what to do: docs/privacy.md, 'When the prompt audit flags a prompt'")
    return lines


__all__ = ["diagnose_run", "prompt_findings", "prompt_lines", "summary_lines"]
