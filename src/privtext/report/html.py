"""``build_report``: one self-contained HTML page per run (``RUN/report.html``).

Self-contained means: CSS inline, figures as base64 PNG ``data:`` URIs, no scripts, no external URL of any kind,
so the file can be mailed or archived and opens offline. Every piece of text that comes from the run (statement,
labels, synthetic samples) is HTML-escaped.

Sections: the privacy statement (headline, then one list per part: treated as public, assumed public, not covered,
prompt audit, noise) and the numbers behind it, headline metrics, downstream accuracy with the zero-shot baseline,
FID and accuracy per iteration, length histograms, the released vote distributions of the last iteration that took
a vote, WASP's rounds and DP-KPS's keyphrases, and sample outputs. What a method's progress is called (iterations,
rounds, epochs, one shot), whether it votes and what it releases come from its description
(:class:`privtext.methods.base.MethodDescription`, carried by ``privacy.json``), never from its name. Parts that need ``evaluation.json`` say how to
produce it when it is missing; vote distributions come from the run itself. The shareable page names files
without their folder and holds no time stamp; the private diagnostics (exact counts, run time, secret statistics,
the OnlyPrivate baseline) appear only in ``--diagnostics`` (``private/report.html``), marked PRIVATE.

Only synthetic text is shown: real and private records never enter the report.
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..atomicio import atomic_write_text
from ..errors import RunError
from ..evaluate.runinfo import RunView
from ..evaluate.runstats import released_vote_distribution, runtime_split
from ..evaluate.suite import guarantee_text, privacy_facts
from ..methods import MethodDescription, describe
from ..rng import derive
from . import plots

REPORT = "report.html"

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;background:#f6f7f9;color:#1d232a}
main{max-width:1080px;margin:0 auto;padding:24px 28px 60px}
h1{font-size:1.6em;margin:0 0 4px}h2{font-size:1.2em;margin:32px 0 10px;border-bottom:1px solid #d9dde3;
padding-bottom:4px}h3{font-size:1em;margin:18px 0 6px}
.meta{color:#5a6572;font-size:.9em}.card{background:#fff;border:1px solid #dde2e8;border-radius:6px;padding:14px 18px;
margin:10px 0}.statement{font-size:1.05em;line-height:1.5;border-left:4px solid #2b6cb0}
.warn{border-left:4px solid #c05621}.muted{color:#6b7785}
table{border-collapse:collapse;font-size:.9em;margin:6px 0}th,td{border:1px solid #dde2e8;padding:4px 8px;
text-align:right;vertical-align:top}th{background:#eef1f5}td.l,th.l{text-align:left}
img{max-width:100%;height:auto;display:block;margin:8px 0}
.kpis{display:flex;flex-wrap:wrap;gap:10px}.kpi{background:#fff;border:1px solid #dde2e8;border-radius:6px;
padding:8px 14px;min-width:120px}.kpi b{display:block;font-size:1.3em}.kpi span{color:#5a6572;font-size:.8em}
.sample{white-space:pre-wrap;font-size:.9em;line-height:1.4;overflow-wrap:anywhere}.tag{display:inline-block;
background:#eef1f5;border-radius:4px;padding:1px 6px;margin-right:4px;font-size:.8em;color:#364152}
.scroll{overflow-x:auto;max-width:100%}td,th,.card{overflow-wrap:anywhere}th.l{overflow-wrap:normal;
word-break:normal;min-width:8em}.statement p{margin:0 0 8px}.statement h4{margin:10px 0 2px;font-size:.95em}
.statement ul{margin:2px 0 4px;padding-left:22px}.statement li{margin:2px 0;font-size:.95em}
.private{color:#9b2c2c;font-weight:600}
@media (max-width:640px){main{padding:12px 10px 40px}h1{font-size:1.3em}table{font-size:.8em}
th,td{padding:3px 5px}.card{padding:10px 12px}}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _num(x: Any, *, pct: bool = False, digits: int = 4) -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    if isinstance(x, (float, np.floating)):
        if not np.isfinite(x):
            return str(x)
        return f"{100 * x:.2f}%" if pct else f"{x:.{digits}g}"
    return _e(x)


def _img(png: bytes | None, alt: str) -> str:
    if not png:
        return ""
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def _records_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A list of flat records (e.g. per-round values) as a table, one column per key."""
    cols: list[str] = []
    for r in rows:
        cols += [str(k) for k in r if str(k) not in cols]

    def cell(v: Any) -> str:
        if isinstance(v, (list, tuple)):
            return ", ".join(_num(x) for x in v) if v else "—"
        return _num(v) if not isinstance(v, Mapping) else _e(v)

    return _table([c.replace("_", " ") for c in cols], [[cell(r.get(c)) for c in cols] for r in rows], left=0)


def _kv(d: Mapping[str, Any]) -> str:
    rows = []
    for k, v in d.items():
        if isinstance(v, Mapping):
            cell = _kv(v) if v else "—"
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, Mapping) for x in v):
            cell = _records_table(v)
        elif isinstance(v, (list, tuple)):
            cell = _e(", ".join(str(x) for x in v[:20]) + (" …" if len(v) > 20 else "")) if v else "—"
        else:
            cell = _num(v)
        rows.append(f'<tr><th class="l">{_e(k)}</th><td class="l">{cell}</td></tr>')
    return '<div class="scroll"><table>' + "".join(rows) + "</table></div>"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1) -> str:
    th = "".join(f'<th class="{"l" if i < left else ""}">{_e(h)}</th>' for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{c}</td>' for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def _missing(what: str) -> str:
    return (f'<p class="muted">{_e(what)} needs an evaluation: run <code>privtext evaluate RUN --real PATH</code> '
            "(or <code>privtext report RUN --real PATH</code>), RUN being this run's folder.</p>")


# ------------------------------------------------------------------------------------------------- sections


def _statement_html(p: Mapping[str, Any]) -> str:
    """The statement as the headline and a short list per part (what was public, assumed, not covered, the
    prompt audit, the noise), from :func:`privtext.privacy.statement.statement_sections`."""
    from ..privacy.statement import statement_sections

    if not p.get("headline"):  # an old statement without its parts: the recorded paragraph
        statement, _ = privacy_facts(p)
        return f"<p>{_e(statement or '(no statement recorded)')}</p>"
    out = []
    for heading, items in statement_sections(p):
        if not heading:
            out.append(f"<p><b>{_e(items[0])}</b></p>")
        elif len(items) == 1:
            text = items[0].removeprefix(f"{heading}: ")  # "Noise: ChaCha20 ..." under the heading "Noise"
            out.append(f"<h4>{_e(heading)}</h4><p>{_e(text)}</p>")
        else:
            out.append(f"<h4>{_e(heading)}</h4><ul>" + "".join(f"<li>{_e(x)}</li>" for x in items) + "</ul>")
    return "".join(out)


def _generator_rounds(released: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """(key, value) of the released per-round generator weights (a mapping with ``generators`` and ``rounds``:
    WASP's), found by their shape, not by the method's name."""
    for k, v in released.items():
        if isinstance(v, Mapping) and isinstance(v.get("rounds"), list) and "generators" in v:
            return k, v
    return None


def _released_shown(released: Mapping[str, Any], title: str) -> dict[str, Any]:
    """Released values as the privacy section lists them; the ones with a section of their own are referred to."""
    shown: dict[str, Any] = {}
    rounds = _generator_rounds(released)
    for k, v in released.items():
        if k == "dp_vocabulary" and isinstance(v, Mapping):
            shown[k] = f"{len(v)} terms (top terms in the DP-KPS section below)"
        elif rounds is not None and k == rounds[0]:
            n = len(v.get("rounds") or [])
            shown[f"{title} rounds"] = (f"{n} round(s): generator weights, samples per generator and vote totals "
                                        f"({title} section below)")
        else:
            shown[k] = v
    return shown


def _privacy_section(view: RunView) -> str:
    p = view.privacy
    if not p:
        return ('<div class="card warn">This run has no <code>privacy.json</code>: it did not finish, so no '
                "guarantee is stated.</div>")
    cls = "card statement" if p.get("private", True) else "card statement warn"
    parts = [f'<div class="{cls}">{_statement_html(p)}</div>']
    g = p.get("guarantee") if isinstance(p.get("guarantee"), Mapping) else {}
    facts: dict[str, Any] = {"guarantee": guarantee_text(p), "private": p.get("private")}
    for key in ("neighbouring_relation", "spent", "reference", "from_secret_budget"):
        if g.get(key) is not None:
            facts[key.replace("_", " ")] = g[key]
    facts.update({f"parameter: {k}": v for k, v in (p.get("parameters") or {}).items()})
    for a in p.get("assumed_public") or []:
        facts[f"assumed public: {a.get('name')}"] = a.get("value")
    if (p.get("noise") or {}).get("source"):
        facts["noise"] = p["noise"]["source"]
    parts.append("<h3>The numbers behind it</h3>" + _kv(facts))
    released = p.get("released") or {}
    if released:
        title = describe(view.method, p).name
        parts.append("<h3>Released noisy values</h3>" + _kv(_released_shown(released, title)))
    releases = p.get("releases") or p.get("release_list")
    if isinstance(releases, list) and releases and isinstance(releases[0], Mapping):
        cols = [c for c in ("mechanism", "iteration", "noise_std", "sensitivity") if c in releases[0]]
        rows = [[_e(r.get("key", i)), *[_num(r.get(c)) if c != "mechanism" else _e(r.get(c)) for c in cols]]
                for i, r in enumerate(releases[:50])]
        parts.append("<h3>Noisy releases</h3>" + _table(["release", *cols], rows, left=2))
    return "".join(parts)


def _diagnostics_section(view: RunView) -> str:
    d = view.diagnostics
    if not d:
        return '<p class="muted">No private/diagnostics.json in this run.</p>'
    parts = ['<div class="card warn">PRIVATE DIAGNOSTICS: exact statistics of the private data. Do not share this '
             "report.</div>", _kv({k: v for k, v in d.items() if k not in ("ledger", "evolution")})]
    evo = d.get("evolution") or {}
    if evo.get("iterations"):
        rows = [[_num(r["iteration"]), _num(r.get("fid_selected")), _num(r.get("fid_candidates")),
                 _num(r.get("share_with_votes"), pct=True), _num(r.get("nn_private_selected")),
                 _num(r.get("nn_public_selected"))] for r in evo["iterations"]]
        parts.append(f"<h3>Where the private signal went</h3><p class=\"muted\">FID to the private corpus; zero-shot "
                     f"generator: {_num(evo.get('fid_zero_shot'))}.</p>"
                     + _table(["iteration", "FID selected", "FID candidates", "candidates with a vote",
                               "nearest private", "nearest public"], rows))
    return "".join(parts)


def _kpis(ev: Mapping[str, Any], syn_n: int) -> str:
    items = [("synthetic samples", _num(syn_n))]
    f = (ev.get("fid") or {}).get("fid")
    if f is not None:
        items.append(("FID vs real", _num(f)))
    zf = (ev.get("fid_zero_shot") or {}).get("fid")
    if zf is not None:
        items.append(("FID zero-shot", _num(zf)))
    pr = ev.get("precision_recall") or {}
    if pr:
        items.append((f"precision (k={pr.get('k')})", _num(pr.get("precision"), pct=True)))
        items.append((f"recall (k={pr.get('k')})", _num(pr.get("recall"), pct=True)))
    mv = ev.get("mauve") or {}
    if mv:
        items.append(("MAUVE", _num(mv.get("mauve"))))
    ds = ev.get("downstream") or {}
    prim = ds.get("primary")
    for c, r in (((ds.get("results") or {}).get(prim) or {}).get("synthetic") or {}).items():
        items.append((f"accuracy {c}", _num(r.get("accuracy"), pct=True)))
    nw = (ev.get("next_word") or {}).get("synthetic")
    if nw:
        items.append(("next-word accuracy", _num(nw.get("accuracy"), pct=True)))
    return '<div class="kpis">' + "".join(f'<div class="kpi"><b>{v}</b><span>{_e(k)}</span></div>'
                                          for k, v in items) + "</div>"


PRIVATE_SET_LABEL = "only-private (PRIVATE: trained on the private records, no noise)"


def _set_name(name: str) -> str:
    return PRIVATE_SET_LABEL if name == "only_private" else name.replace("_", "-")


def _public_sets(per_set: Mapping[str, Any], diagnostics: bool) -> dict[str, Any]:
    """The training sets a report shows: the shareable one never shows OnlyPrivate (even from an evaluation.json
    written before it moved to the private evaluation)."""
    from ..evaluate.suite import PRIVATE_TRAIN_SETS

    return {k: v for k, v in per_set.items() if diagnostics or k not in PRIVATE_TRAIN_SETS}


def _downstream_section(ev: Mapping[str, Any], *, diagnostics: bool = False) -> str:
    ds = ev.get("downstream")
    nw = _public_sets(ev.get("next_word") or {}, diagnostics)
    out = []
    if ds:
        for cname, all_sets in (ds.get("results") or {}).items():
            per_set = _public_sets(all_sets, diagnostics)
            labels = sorted({c for s in per_set.values() for c in s})
            header = ["trained on", *[f"{c} accuracy" for c in labels], *[f"{c} macro-F1" for c in labels], "n train"]
            rows = []
            for sname, res in per_set.items():
                first: Mapping[str, Any] = next(iter(res.values()), {})
                n = first.get("n_train")
                rows.append([_e(_set_name(sname)),
                             *[_num(res.get(c, {}).get("accuracy"), pct=True) for c in labels],
                             *[_num(res.get(c, {}).get("macro_f1"), pct=True) for c in labels], _num(n)])
            maj = [next((s[c]["majority_accuracy"] for s in per_set.values() if c in s), None) for c in labels]
            rows.append(['<span class="muted">majority class</span>', *[_num(m, pct=True) for m in maj],
                         *["" for _ in labels], ""])
            out.append(f"<h3>{_e(cname)}</h3>{_table(header, rows)}")
            if cname == ds.get("primary"):
                out.append(_img(plots.downstream_plot(per_set), f"downstream accuracy ({cname})"))
    if nw:
        header = ["trained on", "next-word accuracy", "in-vocabulary accuracy", "OOV rate", "most-frequent-word",
                  "model", "steps"]
        rows = [[_e(_set_name(s)), _num(r.get("accuracy"), pct=True), _num(r.get("accuracy_in_vocab"), pct=True),
                 _num(r.get("oov_rate"), pct=True), _num(r.get("unigram_accuracy"), pct=True), _e(r.get("model")),
                 _num(r.get("steps"))] for s, r in nw.items()]
        out.append(f"<h3>Next-word prediction on real text</h3>{_table(header, rows)}")
    notes = [*(ev.get("notes") or []), *((ev.get("private_notes") or []) if diagnostics else [])]
    if notes:
        out.append("".join(f'<p class="muted">{_e(n)}</p>' for n in notes))
    return "".join(out) or '<p class="muted">No labels and no next-word evaluation.</p>'


def _iteration_section(ev: Mapping[str, Any], desc: MethodDescription) -> str:
    if not desc.iterative:
        return (f'<p class="muted">{_e(desc.name)} is not iterative: {_e(desc.progress_words or "one shot")}; it '
                f"releases {_e(desc.release_words)}.</p>")
    if not desc.checkpoints:
        return (f'<p class="muted">No per-{_e(desc.unit)} evaluation: a {_e(desc.unit)} of {_e(desc.name)} leaves '
                f"no candidates to evaluate (it releases {_e(desc.release_words)}).</p>")
    rows_all = ev.get("per_iteration") or []
    per_it = [r for r in rows_all if r.get("n_selected")]
    if not per_it:
        return '<p class="muted">No per-iteration evaluation.</p>'
    skipped = [str(r.get("iteration")) for r in rows_all if not r.get("n_selected")]
    note = (f'<p class="muted">{desc.unit.capitalize()}(s) {", ".join(skipped)} selected nothing to evaluate (a final round that '
            "only generates, without a vote).</p>") if skipped else ""
    labels = sorted({c for r in per_it for c in (r.get("accuracy") or {})})
    header = [desc.unit, "selected", "FID", *[f"{c} accuracy" for c in labels]]
    rows = [[_num(r.get("iteration")), _num(r.get("n_selected")), _num(r.get("fid")),
             *[_num((r.get("accuracy") or {}).get(c), pct=True) for c in labels]] for r in per_it]
    zs = (ev.get("fid_zero_shot") or {}).get("fid")
    return (_table(header, rows, left=0) + note
            + _img(plots.per_iteration_plot(per_it, zero_shot_fid=zs), f"FID and accuracy per {desc.unit}"))


def _length_section(ev: Mapping[str, Any]) -> str:
    L = ev.get("lengths")
    if not L:
        return ""
    stats = {"mean (synthetic / real)": f"{L['synthetic_mean']:.1f} / {L['real_mean']:.1f}",
             "median (synthetic / real)": f"{L['synthetic_median']:.1f} / {L['real_median']:.1f}",
             f"Wasserstein distance ({L.get('unit', 'words')})": L["wasserstein"],
             "Kolmogorov–Smirnov statistic": L["ks_statistic"], "KS p-value": L["ks_pvalue"]}
    return _img(plots.length_plot(L, zero_shot=ev.get("lengths_zero_shot")), "length histograms") + _kv(stats)


def _voted(dist: Mapping[str, Any]) -> bool:
    return any(float(d.get("total_votes") or 0) != 0 or float(d.get("max_votes") or 0) != 0 for d in dist.values())


def _votes_section(votes: Mapping[str, Any], desc: MethodDescription) -> str:
    if not desc.votes:
        return f'<p class="muted">{_e(desc.name)} takes no votes: it releases {_e(desc.release_words)}.</p>'
    voted = [t for t in votes if _voted(votes[t])]
    if not voted:
        return '<p class="muted">No vote information in the checkpoints.</p>'
    last = max(voted, key=int)
    dist = votes[last]
    what = desc.release_words or "the released noisy histogram values"
    later = [t for t in votes if int(t) > int(last)]
    after = (f" Later {desc.unit}(s) {', '.join(sorted(later, key=int))} took no vote." if later else "")
    header = ["label", "candidates", "selected", "total votes", "max", "top-10% share", "zero-vote share", "Gini"]
    rows = [[_e(k), _num(d.get("n_candidates")), _num(d.get("n_selected")), _num(d.get("total_votes")),
             _num(d.get("max_votes")), _num(d.get("top10_share"), pct=True), _num(d.get("zero_share"), pct=True),
             _num(d.get("gini"))] for k, d in sorted(dist.items())]
    return (_img(plots.votes_plot(dist, iteration=int(last)), "vote distribution per label")
            + f"<p class=\"muted\">{_e(desc.unit.capitalize())} {_e(last)} (the last one with a vote); votes are "
            f"{_e(what)}, rounded as "
            f"released.{_e(after)}</p>" + _table(header, rows))


def _wasp_section(privacy: Mapping[str, Any], title: str) -> str:
    """Several weighted generators (WASP): generator weights per round (Eq 8) and the released Top-Q histograms'
    summaries (all functions of released noisy values and public sizes, from ``privacy.json``)."""
    found = _generator_rounds(privacy.get("released") or {})
    if found is None:
        return ""
    w = found[1]
    gens = [str(g) for g in w.get("generators") or []]

    def cells(xs: Any) -> list[str]:
        return [_num(x) for x in xs] if isinstance(xs, list) else ["—"] * len(gens)

    rows = []
    for r in w.get("rounds") or []:
        rows.append([_e(r.get("round")), *cells(r.get("weights_used")), *[_num(x) for x in r.get("n_per_generator") or []],
                     *cells(r.get("nearest_mean_per_generator")), _num(r.get("nearest_total")),
                     _num(r.get("furthest_total"))])
    header = ["round", *[f"w {g}" for g in gens], *[f"N {g}" for g in gens], *[f"mean H̃ⁿ {g}" for g in gens],
              "Σ H̃ⁿ", "Σ H̃ᶠ"]
    return (f"<h2>{_e(title)} generators</h2><p class=\"muted\">Weights w_k used in each round (Eq 8, from the "
            "previous round's released nearest histogram), samples per generator N_k, the mean released nearest-vote value "
            "of each generator's samples, and the released histogram totals.</p>" + _table(header, rows))


def _dpkps_section(view: RunView, *, top_terms: int = 30, per_class: int = 2, limit: int = 12) -> str:
    """DP-KPS: the released DP vocabulary (top terms by noisy count) and a few sampled keyphrase sequences with
    the class of their sketch (``keyphrases.jsonl``) — both post-processing of the releases."""
    vocab = (view.privacy.get("released") or {}).get("dp_vocabulary")
    if not isinstance(vocab, Mapping) or not vocab:
        return ""
    ranked = sorted(vocab.items(), key=lambda kv: -float(kv[1]) if isinstance(kv[1], (int, float)) else 0.0)
    rows = [[_e(t), _num(c)] for t, c in ranked[:top_terms]]
    parts = ["<h2>DP-KPS keyphrases</h2>",
             f'<p class="muted">The released DP vocabulary: {len(vocab)} terms; the top {len(rows)} by their noisy '
             "count (Laplace, App A.1).</p>", _table(["term", "noisy count"], rows)]
    recs: list[dict[str, Any]] = []
    path = view.dir.keyphrases
    if path.exists():
        from ..atomicio import read_jsonl

        try:
            recs = read_jsonl(path)
        except Exception:  # a torn file: show the vocabulary only
            recs = []
    if recs:
        cols = [c for c in view.label_columns if all(c in r for r in recs)]
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, r in enumerate(recs):
            groups.setdefault(tuple(str(r[c]) for c in cols), []).append(i)
        rng = derive(view.seed, "report", "keyphrases")
        chosen: list[int] = []
        for k in sorted(groups):
            idx = groups[k]
            chosen += sorted(rng.choice(idx, size=min(per_class, len(idx)), replace=False).tolist())
        out = []
        for i in chosen[:max(limit, len(groups))]:
            r = recs[i]
            tags = "".join(f'<span class="tag">{_e(r[c])}</span>' for c in cols)
            out.append(f'<div class="card">{tags}<div class="sample">{_e("; ".join(map(str, r["keyphrases"])))}'
                       "</div></div>")
        parts.append(f'<p class="muted">{len(out)} of {len(recs)} sampled keyphrase sequences (one prompt each), '
                     "with the class of the sketch they were drawn from.</p>" + "".join(out))
    return "".join(parts)


def _runtime_section(rt: Mapping[str, Any]) -> str:
    if not rt or not (rt.get("stages") or rt.get("per_iteration")):
        return '<p class="muted">No metrics.json in this run.</p>'
    groups = rt.get("groups") or {}
    fr = rt.get("fractions") or {}
    header = ["stage group", "seconds", "share"]
    rows = [[_e(g), _num(float(groups.get(g, 0.0))), _num(fr.get(g), pct=True)] for g in groups]
    usage = {"wall seconds": rt.get("wall_seconds"), "LLM calls": rt.get("llm_calls"), "prompts": rt.get("llm_prompts"),
             "prompt tokens": rt.get("prompt_tokens"), "completion tokens": rt.get("completion_tokens")}
    stage_rows = [[_e(k), _num(v)] for k, v in sorted((rt.get("stages") or {}).items())]
    return (_img(plots.runtime_plot(rt), "runtime split") + _table(header, rows) + _kv(usage)
            + "<h3>Stages as recorded</h3>" + _table(["stage", "seconds"], stage_rows))


def _secrets_section(ev: Mapping[str, Any]) -> str:
    s = ev.get("secrets")
    if not s:
        return ""
    d = {"declared secrets": s.get("n_secrets"), "found in synthetic output": s.get("exposed"),
         "share of secrets": s.get("exposed_rate"), "synthetic records holding one": s.get("records_with_secret"),
         "found in zero-shot baseline": s.get("baseline_exposed"), "baseline share": s.get("baseline_rate")}
    return "<h2>Secret exposure</h2>" + _kv(d)


def _samples_section(view: RunView, *, per_label: int, limit: int) -> str:
    try:
        syn = view.synthetic()
    except RunError:
        return '<p class="muted">No synthetic samples yet.</p>'
    if len(syn) == 0:
        return '<p class="muted">The synthetic set is empty.</p>'
    rng = derive(view.seed, "report", "samples")
    cols = view.label_columns if all(c in syn.labels for c in view.label_columns) else []
    keys = syn.label_tuples(cols)
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    # every label gets a sample: with many labels, one each (the limit grows to the number of labels)
    each = per_label if len(groups) * per_label <= limit else 1
    limit = max(limit, len(groups))
    chosen: list[int] = []
    for k in sorted(groups):
        idx = groups[k]
        chosen += sorted(rng.choice(idx, size=min(each, len(idx)), replace=False).tolist())
    out = []
    for i in chosen[:limit]:
        t = syn.texts[i]
        t = t if len(t) <= 700 else t[:700] + " …"
        tags = "".join(f'<span class="tag">{_e(v)}</span>' for v in syn.label_tuple(i, cols)) if cols else ""
        out.append(f'<div class="card">{tags}<div class="sample">{_e(t)}</div></div>')
    return (f'<p class="muted">{len(chosen[:limit])} of {len(syn)} synthetic samples, from every one of the '
            f"{len(groups)} labels.</p>" + "".join(out))


def _file_name(path: Any) -> str:
    """A corpus path as a shareable page names it: the file name only (an ``hf:`` spec as it is)."""
    if not isinstance(path, str) or path.startswith("hf:"):
        return "" if path is None else str(path)
    return Path(path).name


def _progress_words(view: RunView, desc: MethodDescription) -> str:
    """How far the run got, in the method's own unit (its description: iterations, rounds, epochs, one shot):
    the complete checkpoints, or (a method whose units leave none, dpft) the units the statement's releases
    name; against the number planned (the statement's parameter the description names)."""
    if not desc.iterative:
        return desc.progress_words or "one shot"
    if desc.checkpoints:
        n = len(view.iterations())
    else:
        n = len({r.get("iteration") for r in view.privacy.get("releases") or []
                 if isinstance(r, Mapping) and isinstance(r.get("iteration"), int)})
    planned = (view.privacy.get("parameters") or {}).get(desc.planned) if desc.planned else None
    if isinstance(planned, int) and planned != n:
        return f"{n} of {planned} {desc.units} complete"
    return f"{n} {desc.unit}{'s' if n != 1 else ''}"


def build_report(
    run_dir: str | os.PathLike[str],
    *,
    evaluation: Mapping[str, Any] | None = None,
    out: str | os.PathLike[str] | None = None,
    samples_per_label: int = 2,
    max_samples: int = 12,
    diagnostics: bool = False,
) -> Path:
    """Write the report (default ``RUN/report.html``) and return its path.

    ``evaluation`` defaults to ``RUN/evaluation.json`` when present. The default report is shareable: it shows
    ``privacy.json``, the shareable evaluation, released noisy votes (rounded) and synthetic samples, never the
    private diagnostics (run time, exact counts, secret statistics, the OnlyPrivate baseline), no time stamp and no
    local path. ``diagnostics=True`` adds them (from ``RUN/private/evaluation.json``) and writes
    ``RUN/private/report.html`` instead (not to be shared).
    """
    from ..evaluate.suite import shareable_evaluation

    view = RunView(run_dir)
    desc = describe(view.method, view.privacy)
    if evaluation is not None:
        ev = dict(evaluation)
    else:
        ev = view.private_evaluation() if diagnostics else view.evaluation()
    if not diagnostics and ev:
        ev = shareable_evaluation(ev)  # what a shareable page may show, whatever it was handed
    votes = ev.get("votes")
    if not votes:
        votes = {}
        for t in reversed(view.iterations()):
            df = view.candidates(t)
            if "votes" in df.columns:
                dist = released_vote_distribution(df, label_columns=view.label_columns, max_points=300)
                votes[str(t)] = dist
                if _voted(dist):
                    break
    rt = (ev.get("runtime") or runtime_split(view.metrics)) if diagnostics else {}
    try:
        syn_n = len(view.synthetic())
    except RunError:
        syn_n = 0
    real = ev.get("real") or {}
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>privtext report: {_e(view.name)}</title><style>{CSS}</style></head><body><main>",
        f"<h1>privtext report: {_e(view.name)}</h1>",
        f'<p class="meta">method <b>{_e(view.method)}</b> · {_e(_progress_words(view, desc))}</p>',
    ]
    if diagnostics:
        parts.append('<div class="card warn"><b>PRIVATE DIAGNOSTIC REPORT</b>: it shows figures computed from the '
                     "private data without noise (marked PRIVATE). Do not share it; <code>report.html</code> is the "
                     "shareable report.</div>")
    parts += ["<h2>Privacy guarantee</h2>", _privacy_section(view), "<h2>Summary</h2>", _kpis(ev, syn_n)]
    if ev:
        parts.append(f'<p class="meta">Evaluated against {_num(real.get("n"))} real records from '
                     f"<code>{_e(_file_name(real.get('path')))}</code> with embedder "
                     f"<code>{_e((ev.get('embedder') or {}).get('name'))}</code>. Evaluation uses real data and is "
                     "not covered by the privacy guarantee; only aggregate numbers are shown.</p>")
    else:
        parts.append(_missing("FID, accuracy and length comparison"))
    parts += ["<h2>Downstream utility</h2>",
              _downstream_section(ev, diagnostics=diagnostics) if ev else _missing("Downstream accuracy")]
    parts += [f"<h2>Per {_e(desc.unit) if desc.iterative else 'iteration'}</h2>",
              _iteration_section(ev, desc) if ev or not desc.checkpoints
              else _missing(f"Per-{desc.unit} FID")]
    parts += ["<h2>Lengths</h2>", _length_section(ev) if ev.get("lengths") else _missing("Length comparison")]
    parts += ["<h2>Votes</h2>", _votes_section(votes, desc)]
    if view.privacy:
        parts.append(_wasp_section(view.privacy, desc.name))
        parts.append(_dpkps_section(view))
    if diagnostics:
        parts += ["<h2>Private diagnostics</h2>", _diagnostics_section(view)]
        parts += ["<h2>Runtime and LLM usage</h2>", _runtime_section(rt)]
        parts.append(_secrets_section(ev))
    else:
        parts.append('<p class="meta">Run time, exact counts, secret statistics and the OnlyPrivate baseline are '
                     "private diagnostics: <code>privtext report RUN --diagnostics</code> writes them to "
                     "<code>RUN/private/report.html</code>.</p>")
    parts += ["<h2>Sample outputs</h2>", _samples_section(view, per_label=samples_per_label, limit=max_samples)]
    parts.append('<p class="meta">Generated by privtext. This page is self-contained: no scripts, no external '
                 "resources.</p></main></body></html>")
    target = Path(out) if out is not None else (view.dir.diagnostic_report if diagnostics else view.dir.report)
    atomic_write_text(target, "\n".join(parts) + "\n")
    return target


__all__ = ["REPORT", "build_report"]
