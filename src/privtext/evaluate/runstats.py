"""Statistics read from a run's own files: vote distributions, runtime split, LLM usage, secret exposure.

* **Vote distributions** (SecPE Fig. 4b): per label, the candidates' noisy vote values of one iteration sorted in
  decreasing order, with summaries (mass on the top 10 % of candidates, share of candidates with no vote, Gini).
* **Runtime split** (SecPE Tab. 2): seconds per stage from ``metrics.json``, grouped into generation, embedding,
  histogram (voting, clustering, selection) and other; per iteration too.
* **LLM usage**: calls and tokens from ``metrics.json`` counters.
* **Secret exposure**: how many declared secrets (strings) appear verbatim in a set of texts, against a baseline
  set (zero-shot generator output, public text).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DataError
from .results import AsDict

# ------------------------------------------------------------------------------------------------- votes


def _label_key(row: Mapping[str, Any], columns: Sequence[str]) -> str:
    return " | ".join(str(row[c]) for c in columns) if columns else "(all)"


def gini(x: np.ndarray) -> float:
    """Gini coefficient of non-negative values (0: all equal; → 1: all mass on one)."""
    v = np.sort(np.clip(np.asarray(x, dtype=np.float64), 0, None))
    n, s = v.size, v.sum()
    if n == 0 or s <= 0:
        return 0.0
    return float((2 * np.arange(1, n + 1) - n - 1) @ v / (n * s))


def vote_distribution(candidates: Any, *, label_columns: Sequence[str], max_points: int = 2000) -> dict[str, Any]:
    """Per-label vote summaries of one iteration's candidates table (pandas DataFrame with ``votes``)."""
    if "votes" not in candidates.columns:
        raise DataError(f"candidates table has no 'votes' column; it has {list(candidates.columns)}")
    cols = [c for c in label_columns if c in candidates.columns]
    keys = [_label_key(r, cols) for r in candidates[cols].to_dict("records")] if cols else ["(all)"] * len(candidates)
    votes = candidates["votes"].to_numpy(dtype=np.float64)
    sel = candidates["selected"].to_numpy(dtype=bool) if "selected" in candidates.columns else np.zeros(len(votes), bool)
    out: dict[str, Any] = {}
    for key in sorted(set(keys)):
        m = np.array([k == key for k in keys])
        v = np.sort(votes[m])[::-1]
        pos = np.clip(v, 0, None)
        total = float(pos.sum())
        top = max(1, int(np.ceil(0.1 * v.size)))
        step = max(1, int(np.ceil(v.size / max_points)))
        out[key] = {
            "n_candidates": int(v.size),
            "n_selected": int(sel[m].sum()),
            "total_votes": total,
            "max_votes": float(v[0]) if v.size else 0.0,
            "top10_share": float(pos[:top].sum() / total) if total > 0 else 0.0,
            "zero_share": float((v <= 0).mean()) if v.size else 0.0,
            "gini": gini(v),
            "sorted_votes": v[::step].tolist(),
            "sorted_votes_step": step,
        }
    return out


def released_vote_distribution(candidates: Any, *, label_columns: Sequence[str], max_points: int = 2000
                               ) -> dict[str, Any]:
    """:func:`vote_distribution` as a shareable file may hold it: computed from the noisy votes rounded as a
    released value is (:data:`privtext.rng.RELEASE_DIGITS` significant digits), and its summaries rounded the same
    way, so no raw noisy double leaves the private folder (SecPE/Aug-PE votes are kept raw in
    ``private/checkpoints``)."""
    from ..privacy.statement import released_number, released_tree

    df = candidates.copy()
    df["votes"] = [released_number(v) for v in df["votes"].to_numpy(dtype=np.float64)]
    return released_tree(vote_distribution(df, label_columns=label_columns, max_points=max_points))


# ------------------------------------------------------------------------------------------------ runtime

STAGE_GROUPS = {
    "generation": ("generation", "generate", "generator", "random", "variation", "llm", "sampling"),
    "embedding": ("embedding", "embed"),
    "histogram": ("voting", "vote", "histogram", "clustering", "cluster", "kmeans", "selection", "select", "knn",
                  "secret", "lp"),
}


def stage_group(name: str) -> str:
    low = name.lower()
    for group, keys in STAGE_GROUPS.items():
        if any(low == k or low.startswith(k) or k in low.split("_") for k in keys):
            return group
    return "other"


def _seconds(d: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, v in d.items():
        s = v.get("seconds") if isinstance(v, Mapping) else v
        if isinstance(s, (int, float)):
            out[str(name)] = float(s)
    return out


def runtime_split(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Seconds per stage and per group (generation / embedding / histogram / other), total and per iteration."""
    stages = _seconds(metrics.get("stages", {}) or {})
    groups = {g: 0.0 for g in (*STAGE_GROUPS, "other")}
    for name, s in stages.items():
        groups[stage_group(name)] += s
    per_it: dict[str, dict[str, float]] = {}
    for it, st in sorted((metrics.get("per_iteration") or {}).items(), key=lambda kv: int(kv[0])):
        g = {k: 0.0 for k in groups}
        for name, s in _seconds(st).items():
            g[stage_group(name)] += s
        per_it[str(it)] = g
    counters = dict(metrics.get("counters") or {})
    wall = metrics.get("wall_seconds")
    total_stage = sum(stages.values())
    return {
        "stages": stages,
        "groups": groups,
        "fractions": {k: (v / total_stage if total_stage > 0 else 0.0) for k, v in groups.items()},
        "per_iteration": per_it,
        "wall_seconds": float(wall) if isinstance(wall, (int, float)) else total_stage,
        "llm_calls": counters.get("llm_calls"),
        "llm_prompts": counters.get("llm_prompts"),
        "prompt_tokens": counters.get("prompt_tokens", counters.get("llm_prompt_tokens")),
        "completion_tokens": counters.get("completion_tokens", counters.get("llm_completion_tokens")),
        "counters": counters,
    }


# --------------------------------------------------------------------------------------------- secrets


@dataclass(frozen=True)
class SecretExposure(AsDict):
    n_secrets: int
    exposed: int
    exposed_rate: float
    records_with_secret: int
    record_rate: float
    baseline_exposed: int | None = None
    baseline_rate: float | None = None
    baseline_records_with_secret: int | None = None
    baseline_record_rate: float | None = None
    examples: list[str] = field(default_factory=list)


def _secret_pattern(secrets: Sequence[str], *, case_sensitive: bool) -> re.Pattern[str]:
    alts = sorted({re.escape(s) for s in secrets}, key=len, reverse=True)
    # a secret must not be part of a longer word on either side (so "ann" is not found in "annual")
    return re.compile(r"(?<!\w)(?:" + "|".join(alts) + r")(?!\w)", 0 if case_sensitive else re.IGNORECASE)


def _scan(texts: Sequence[str], pat: re.Pattern[str], *, case_sensitive: bool) -> tuple[set[str], int]:
    found: set[str] = set()
    records = 0
    for t in texts:
        hits = {m.group(0) if case_sensitive else m.group(0).lower() for m in pat.finditer(t)}
        if hits:
            records += 1
            found |= hits
    return found, records


def _nested(found: set[str], secrets: set[str], *, case_sensitive: bool) -> set[str]:
    """Declared secrets that occur (as whole words) inside a longer secret that was matched in its place."""
    out: set[str] = set()
    flags = 0 if case_sensitive else re.IGNORECASE
    for m in found:
        for s in secrets:
            if len(s) < len(m) and s not in out and re.search(r"(?<!\w)" + re.escape(s) + r"(?!\w)", m, flags):
                out.add(s)
    return out


def secret_exposure(
    texts: Sequence[str], secrets: Sequence[str], *, baseline: Sequence[str] | None = None,
    case_sensitive: bool = False, show: int = 0,
) -> SecretExposure:
    """Count declared secrets that appear verbatim (whole-word) in ``texts`` and in ``baseline``.

    ``exposed`` counts distinct secrets found; ``records_with_secret`` counts texts holding at least one. The
    baseline rate is what a generator that never saw private data produces by chance; a rate well above it is a
    leak. ``examples`` lists up to ``show`` exposed secrets (keep 0 when the report is shared).
    """
    cleaned = [s.strip() for s in secrets if s and s.strip()]
    if not cleaned:
        raise DataError("secret exposure needs at least one non-empty secret string")
    norm = {s if case_sensitive else s.lower() for s in cleaned}
    pat = _secret_pattern(cleaned, case_sensitive=case_sensitive)
    found, recs = _scan(texts, pat, case_sensitive=case_sensitive)
    found = (found | _nested(found, norm, case_sensitive=case_sensitive)) & norm
    base_found: set[str] | None = None
    base_recs = None
    if baseline is not None:
        base_found, base_recs = _scan(baseline, pat, case_sensitive=case_sensitive)
        base_found = (base_found | _nested(base_found, norm, case_sensitive=case_sensitive)) & norm
    n = len(norm)
    return SecretExposure(
        n_secrets=n, exposed=len(found), exposed_rate=len(found) / n, records_with_secret=recs,
        record_rate=recs / len(texts) if texts else 0.0,
        baseline_exposed=None if base_found is None else len(base_found),
        baseline_rate=None if base_found is None else len(base_found) / n,
        baseline_records_with_secret=base_recs,
        baseline_record_rate=None if baseline is None else (base_recs or 0) / max(1, len(baseline)),
        examples=sorted(found)[:show],
    )


def load_secrets(path: str) -> list[str]:
    """Secrets from a file: a JSON list of strings, a JSON object {type: [strings]}, or one per line."""
    import json
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        raise DataError(f"{p}: no such secrets file")
    text = p.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(f"{p}:{e.lineno}: invalid JSON ({e.msg})") from None
        if isinstance(obj, dict):
            vals = [v for vs in obj.values() for v in (vs if isinstance(vs, list) else [vs])]
        elif isinstance(obj, list):
            vals = obj
        else:
            raise DataError(f"{p}: expected a JSON list or object of strings")
        bad = [v for v in vals if not isinstance(v, str)]
        if bad:
            raise DataError(f"{p}: secrets must be strings, got {bad[:3]!r}")
        return [v for v in vals if v.strip()]
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


__all__ = ["STAGE_GROUPS", "SecretExposure", "gini", "load_secrets", "released_vote_distribution", "runtime_split",
           "secret_exposure", "stage_group", "vote_distribution"]
