"""Matplotlib (Agg) figures for the run report, returned as PNG bytes.

Every function takes plain dicts (the pieces of ``evaluation.json``) and returns ``bytes`` or ``None`` when there
is nothing to draw. No figure state leaks: each function creates and closes its own figure.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

PALETTE = {"synthetic": "#1f77b4", "real": "#444444", "only_private": "#2ca02c", "zero_shot": "#ff7f0e",
           "majority": "#bbbbbb", "generation": "#1f77b4", "embedding": "#ff7f0e", "histogram": "#2ca02c",
           "other": "#999999"}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    plt = _plt()
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=96)
    plt.close(fig)
    return buf.getvalue()


def per_iteration_plot(per_iteration: Sequence[Mapping[str, Any]], *, zero_shot_fid: float | None = None) -> bytes | None:
    rows = [r for r in per_iteration if r.get("fid") is not None]
    if not rows:
        return None
    plt = _plt()
    labels = sorted({c for r in rows for c in (r.get("accuracy") or {})})
    ncols = 2 if labels else 1
    fig, axes = plt.subplots(1, ncols, figsize=(5.2 * ncols, 3.3), squeeze=False)
    it = [int(r["iteration"]) for r in rows]
    ax = axes[0][0]
    ax.plot(it, [float(r["fid"]) for r in rows], "o-", color=PALETTE["synthetic"], label="selected samples")
    if zero_shot_fid is not None:
        ax.axhline(zero_shot_fid, ls="--", color=PALETTE["zero_shot"], label="zero-shot")
    ax.set_xlabel("iteration")
    ax.set_ylabel("FID (lower is closer to real)")
    ax.set_xticks(it)
    ax.legend(fontsize=8)
    ax.set_title("FID per iteration")
    if labels:
        ax2 = axes[0][1]
        for c in labels:
            pts = [(int(r["iteration"]), 100 * float(r["accuracy"][c])) for r in rows if c in (r.get("accuracy") or {})]
            ax2.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=c)
        ax2.set_xlabel("iteration")
        ax2.set_ylabel("accuracy on real data (%)")
        ax2.set_xticks(it)
        ax2.legend(fontsize=8)
        ax2.set_title("Downstream accuracy per iteration")
    return _png(fig)


def downstream_plot(results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> bytes | None:
    """Grouped bars: accuracy per label for each training set, plus the majority-class line."""
    sets = [s for s in ("synthetic", "zero_shot", "only_private") if s in results] + [
        s for s in results if s not in ("synthetic", "zero_shot", "only_private")]
    labels = sorted({c for s in sets for c in results[s]})
    if not labels:
        return None
    plt = _plt()
    import numpy as np

    fig, ax = plt.subplots(figsize=(max(4.5, 1.8 * len(labels) * max(1, len(sets)) / 2), 3.3))
    width = 0.8 / max(1, len(sets))
    x = np.arange(len(labels))
    for i, s in enumerate(sets):
        vals = [100 * float(results[s].get(c, {}).get("accuracy", np.nan)) for c in labels]
        ax.bar(x + i * width - 0.4 + width / 2, vals, width, label=s.replace("_", "-"),
               color=PALETTE.get(s))
    maj = [100 * float(next((results[s][c]["majority_accuracy"] for s in sets if c in results[s]), np.nan))
           for c in labels]
    for xi, m in zip(x, maj, strict=True):
        ax.hlines(m, xi - 0.45, xi + 0.45, colors="black", linestyles=":", label=None)
    ax.set_xticks(x)
    ax.set_xticklabels(labels)
    ax.set_ylabel("accuracy on real data (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Train on X, test on real (dotted: majority class)")
    return _png(fig)


def length_plot(lengths: Mapping[str, Any], *, zero_shot: Mapping[str, Any] | None = None) -> bytes | None:
    edges = lengths.get("bin_edges")
    if not edges:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.6, 3.2))
    ax.stairs(lengths["real_hist"], edges, label=f"real (mean {lengths['real_mean']:.0f})", color=PALETTE["real"],
              fill=True, alpha=0.25)
    ax.stairs(lengths["synthetic_hist"], edges, label=f"synthetic (mean {lengths['synthetic_mean']:.0f})",
              color=PALETTE["synthetic"], linewidth=2)
    if zero_shot and zero_shot.get("bin_edges"):
        ax.stairs(zero_shot["synthetic_hist"], zero_shot["bin_edges"],
                  label=f"zero-shot (mean {zero_shot['synthetic_mean']:.0f})", color=PALETTE["zero_shot"],
                  linestyle="--")
    ax.set_xlabel(f"length ({lengths.get('unit', 'words')}; last bin open-ended)")
    ax.set_ylabel("share of texts")
    ax.legend(fontsize=8)
    ax.set_title("Length distribution")
    return _png(fig)


def votes_plot(dist: Mapping[str, Mapping[str, Any]], *, max_labels: int = 24, iteration: int | None = None) -> bytes | None:
    """SecPE Fig. 4b: per label, the candidates' votes sorted in decreasing order — small multiples, one panel per
    label (every label, up to ``max_labels``; beyond that the panels show the labels with most votes and the
    caption names how many are left out). Titles are wrapped, never cut."""
    import textwrap

    keys = [k for k in dist if dist[k].get("sorted_votes")]
    if not keys:
        return None
    keys = sorted(keys, key=lambda k: -float(dist[k].get("total_votes", 0)))
    shown = keys[:max_labels]
    plt = _plt()
    n = len(shown)
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.4 * rows + 0.4), squeeze=False)
    for a in axes.flat[n:]:
        a.axis("off")
    for ax, k in zip(axes.flat, shown, strict=False):
        v = dist[k]["sorted_votes"]
        step = int(dist[k].get("sorted_votes_step", 1))
        ax.bar([i * step for i in range(len(v))], v, width=step, color=PALETTE["synthetic"])
        ax.axhline(0, color="black", lw=0.5)
        ax.set_title("\n".join(textwrap.wrap(str(k), 32)), fontsize=7)
        ax.set_xlabel("candidate (sorted)", fontsize=6)
        ax.set_ylabel("noisy votes", fontsize=6)
        ax.tick_params(labelsize=6)
    title = "Vote distribution per label" + (f" (iteration {iteration})" if iteration is not None else "")
    if len(keys) > n:
        title += f" — the {n} labels with most votes; {len(keys) - n} more in the table below"
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return _png(fig)


def runtime_plot(runtime: Mapping[str, Any]) -> bytes | None:
    groups = ("generation", "embedding", "histogram", "other")
    per_it = runtime.get("per_iteration") or {}
    totals = runtime.get("groups") or {}
    if not per_it and not any(totals.get(g) for g in groups):
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, 2 if per_it else 1, figsize=(10 if per_it else 5, 3.2), squeeze=False)
    ax = axes[0][0]
    vals = [float(totals.get(g, 0.0)) for g in groups]
    ax.barh(list(groups), vals, color=[PALETTE[g] for g in groups])
    ax.set_xlabel("seconds (whole run)")
    ax.set_title("Runtime by stage")
    ax.invert_yaxis()
    if per_it:
        ax2 = axes[0][1]
        its = sorted(per_it, key=int)
        bottom = [0.0] * len(its)
        for g in groups:
            h = [float(per_it[t].get(g, 0.0)) for t in its]
            ax2.bar([int(t) for t in its], h, bottom=bottom, label=g, color=PALETTE[g])
            bottom = [b + x for b, x in zip(bottom, h, strict=True)]
        ax2.set_xlabel("iteration")
        ax2.set_ylabel("seconds")
        ax2.set_xticks([int(t) for t in its])
        ax2.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        ax2.set_title("Runtime per iteration")
    return _png(fig)


__all__ = ["downstream_plot", "length_plot", "per_iteration_plot", "runtime_plot", "votes_plot"]
