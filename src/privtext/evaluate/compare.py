"""Side-by-side comparison: several runs (or configurations, run first) evaluated on one real corpus.

All runs are scored against the same real records (loaded and, with ``max_real``, sampled once) with the same
embedder object, so their FIDs and accuracies are comparable and the real set is embedded once. The table has
one row per run: method, guarantee, FID, MAUVE (when computed: ``mauve=True``, needs ``privtext[mauve]``),
accuracy per label (the first classifier, trained on the synthetic set), next-word accuracy for unlabelled data,
seconds per stage group (generation, embedding, histogram, other), wall time and generator calls/tokens.

With ``seeds`` (:func:`compare_configs`) every configuration runs once per seed (``seed`` overridden, the run
named ``<config>-s<seed>``); :meth:`ComparisonTable.summary` then gives one row per configuration: the mean of
each figure over the seeds, its standard deviation (``_sd``) and its spread, max − min (``_spread``).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..atomicio import atomic_write_text
from ..data.corpus import Corpus
from ..errors import ConfigError, RunError
from ..rng import derive
from .embedding import resolve_embedder
from .runinfo import RunView
from .suite import DEFAULT_CLASSIFIERS, corpus_fingerprint, evaluate_run, headline, load_real

BASE_COLUMNS = ["name", "method", "guarantee", "n_synthetic", "fid"]
TAIL_COLUMNS = ["generation_s", "embedding_s", "histogram_s", "other_s", "wall_s", "llm_calls", "prompt_tokens",
                "completion_tokens", "run"]


@dataclass
class ComparisonTable:
    rows: list[dict[str, Any]]
    columns: list[str]
    warnings: list[str] = field(default_factory=list)
    real: dict[str, Any] = field(default_factory=dict)

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str:
        buf = io.StringIO(newline="")
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.columns)
        for r in self.rows:
            w.writerow(["" if r.get(c) is None else r.get(c) for c in self.columns])
        text = buf.getvalue()
        if path is not None:
            atomic_write_text(path, text)
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"columns": self.columns, "rows": self.rows, "warnings": self.warnings, "real": self.real}

    def summary(self, by: str = "config") -> ComparisonTable:
        """One row per value of column ``by`` (default: the configuration, over its seeds): for every numeric
        figure the mean, the sample standard deviation (``<figure>_sd``, 0 for one seed) and the spread max − min
        (``<figure>_spread``); ``seeds`` counts the rows."""
        if by not in self.columns:
            raise ConfigError(f"summary by {by!r}: the table has no such column (columns: {self.columns})")
        skip = {"name", "method", "guarantee", "run", "config", "seed"}
        numeric = [c for c in self.columns if c not in skip
                   and any(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool) for r in self.rows)]
        groups: dict[Any, list[dict[str, Any]]] = {}
        for r in self.rows:
            groups.setdefault(r.get(by), []).append(r)
        rows = []
        for key, rs in groups.items():
            out: dict[str, Any] = {by: key, "method": rs[0].get("method"), "guarantee": rs[0].get("guarantee"),
                                   "seeds": len(rs)}
            for c in numeric:
                vals = np.array([float(r[c]) for r in rs if isinstance(r.get(c), (int, float))], dtype=np.float64)
                out[c] = float(vals.mean()) if vals.size else None
                out[f"{c}_sd"] = float(vals.std(ddof=1)) if vals.size > 1 else (0.0 if vals.size else None)
                out[f"{c}_spread"] = float(vals.max() - vals.min()) if vals.size else None
            rows.append(out)
        columns = [by, "method", "guarantee", "seeds"] + [x for c in numeric for x in (c, f"{c}_sd", f"{c}_spread")]
        return ComparisonTable(rows=rows, columns=columns, warnings=list(self.warnings), real=dict(self.real))

    def to_markdown(self) -> str:
        """The table as Markdown; a :meth:`summary` shows each figure as "mean ± sd"."""
        is_summary = "seeds" in self.columns
        cols = [c for c in self.columns if not c.endswith(("_sd", "_spread"))
                and c not in ("run", "prompt_tokens", "completion_tokens")]
        head = [_SHORT.get(c, c.removeprefix("acc:") + (" acc" if c.startswith("acc:") else "")) for c in cols]
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in cols) + "|"]
        for r in self.rows:
            lines.append("| " + " | ".join(_cell(r, c, is_summary) for c in cols) + " |")
        return "\n".join(lines) + "\n"

    def to_rich(self) -> Any:
        """A compact table for people (tokens and paths stay in the CSV/JSON)."""
        from rich.table import Table

        short = _SHORT
        cols = [c for c in self.columns if c not in ("run", "prompt_tokens", "completion_tokens")
                and not c.endswith(("_sd", "_spread"))]
        is_summary = "seeds" in self.columns
        t = Table(title="privtext compare" + (" (mean ± sd over seeds)" if is_summary else ""),
                  title_justify="left")
        for c in cols:
            head = short.get(c, c.removeprefix("acc:") + (" acc" if c.startswith("acc:") else ""))
            t.add_column(head, justify="left" if c in ("name", "config", "method", "guarantee") else "right",
                         no_wrap=True)
        for r in self.rows:
            t.add_row(*[_cell(r, c, is_summary) for c in cols])
        return t


_SHORT = {"n_synthetic": "N", "fid": "FID", "mauve": "MAUVE", "generation_s": "gen s", "embedding_s": "embed s",
          "histogram_s": "hist s", "other_s": "other s", "wall_s": "wall s", "llm_calls": "generator calls",
          "next_word": "next-word acc"}


def _cell(r: Mapping[str, Any], c: str, is_summary: bool) -> str:
    v = _fmt(c, r.get(c))
    sd = r.get(f"{c}_sd")
    if is_summary and isinstance(sd, float) and (r.get("seeds") or 1) > 1:
        v += " ± " + _fmt(c, sd).removesuffix("%")
    return v


def _fmt(col: str, v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        if col.startswith(("acc:", "next_word")):
            return f"{100 * v:.2f}%"
        if col.endswith("_s"):
            return f"{v:.1f}"
        return f"{v:.4g}"
    return str(v)


def table_row(evaluation: Mapping[str, Any]) -> dict[str, Any]:
    """One comparison row from an evaluation dict."""
    rt = evaluation.get("runtime") or {}
    g = rt.get("groups") or {}
    row: dict[str, Any] = {
        "name": evaluation.get("name"),
        "method": evaluation.get("method"),
        "guarantee": evaluation.get("guarantee_text"),
        "n_synthetic": (evaluation.get("synthetic") or {}).get("n"),
    }
    row.update(headline(evaluation))
    row.update({
        "generation_s": g.get("generation"), "embedding_s": g.get("embedding"), "histogram_s": g.get("histogram"),
        "other_s": g.get("other"), "wall_s": rt.get("wall_seconds"), "llm_calls": rt.get("llm_calls"),
        "prompt_tokens": rt.get("prompt_tokens"), "completion_tokens": rt.get("completion_tokens"),
        "run": evaluation.get("run"),
    })
    return row


def build_table(evaluations: Sequence[Mapping[str, Any]], *, warnings: Sequence[str] = ()) -> ComparisonTable:
    rows = [table_row(e) for e in evaluations]
    middle: list[str] = ["mauve"] if any(r.get("mauve") is not None for r in rows) else []
    for r in rows:
        for k in r:
            if (k.startswith("acc:") or k == "next_word") and k not in middle:
                middle.append(k)
    columns = [*BASE_COLUMNS, *middle, *TAIL_COLUMNS]
    rows = [{c: r.get(c) for c in columns} for r in rows]
    return ComparisonTable(rows=rows, columns=columns, warnings=list(warnings))


def _reusable(ev: Mapping[str, Any], fingerprint: str, embedder_name: str, classifiers: Sequence[str], *,
              mauve: bool = False) -> bool:
    """Whether a run's stored evaluation answers this comparison: the same real records, embedder and classifiers,
    and MAUVE in it when MAUVE is asked for (an evaluation made without it would leave the column empty)."""
    return (
        (ev.get("real") or {}).get("fingerprint") == fingerprint
        and (ev.get("embedder") or {}).get("name") == embedder_name
        and list((ev.get("downstream") or {}).get("classifiers") or classifiers) == list(classifiers)
        and (not mauve or bool(ev.get("mauve")))
    )


def file_fingerprint(path: Any) -> str:
    """A data file's identity by content (SHA-256 of its bytes), so that byte-identical copies at different paths
    compare equal; an ``hf:`` spec or a missing file is identified by its name."""
    import hashlib

    p = Path(str(path)) if path else None
    if p is None or str(path).startswith("hf:") or not p.is_file():
        return f"name:{path}"
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def compare_runs(
    run_dirs: Sequence[str | os.PathLike[str]],
    *,
    real: Corpus | str | os.PathLike[str],
    embedder: Any = None,
    max_real: int | None = None,
    classifiers: Sequence[str] = DEFAULT_CLASSIFIERS,
    seed: int = 0,
    reuse: bool = True,
    quiet: bool | None = None,
    **evaluate_options: Any,
) -> ComparisonTable:
    """Evaluate each run against the same real records and tabulate.

    ``reuse``: a run whose ``evaluation.json`` was computed on the same real records (fingerprint), embedder and
    classifiers (and holds MAUVE when ``mauve=True``) is not evaluated again.
    """
    if not run_dirs:
        raise ConfigError("compare needs at least one run")
    views = [RunView(d) for d in run_dirs]
    first = views[0]
    real_corpus, real_path = load_real(real, text_column=first.text_column, label_columns=first.label_columns,
                                       max_real=max_real, rng=derive(seed, "compare", "real"))
    if not isinstance(real, Corpus):
        real_corpus = Corpus(real_corpus.ids, real_corpus.texts, real_corpus.labels, name=str(real_path))
    fp = corpus_fingerprint(real_corpus)
    emb = resolve_embedder(embedder if embedder is not None else first.embedder_config,
                           cache_dir=first.dir.embed_cache)
    warnings: list[str] = []
    privs = {file_fingerprint(v.data.get("private")) for v in views}
    if len(privs) > 1:
        names = sorted({str(v.data.get("private")) for v in views})
        warnings.append(f"runs use different private data (by content): {names}")
    sizes = {v.num_samples for v in views}
    if len(sizes) > 1:
        warnings.append(f"runs have different synthetic-set sizes (FID depends on n): {sorted(map(str, sizes))}")
    evaluations = []
    for v in views:
        ev = v.private_evaluation() if reuse else {}  # the whole one: the table shows timings
        if not (ev and _reusable(ev, fp, emb.name, classifiers, mauve=bool(evaluate_options.get("mauve")))):
            ev = evaluate_run(v.root, real=real_corpus, embedder=emb, classifiers=classifiers, seed=seed,
                              quiet=quiet, **evaluate_options)
        evaluations.append(ev)
    table = build_table(evaluations, warnings=warnings)
    table.real = {"path": str(real_path), "n": len(real_corpus), "fingerprint": fp}
    return table


def _runner() -> Any:
    try:
        from .. import runner  # type: ignore[import-not-found,unused-ignore]
    except ImportError as e:
        raise RunError(f"cannot run configurations: privtext.runner is not available ({e})") from None
    return runner


def _run_config(cfg: Any, *, out: Path | None) -> Path:
    return Path(_runner().run_config(cfg, out=out))


def compare_configs(
    configs: Sequence[Any],
    *,
    real: Corpus | str | os.PathLike[str],
    out_dir: str | os.PathLike[str] | None = None,
    overrides: Sequence[str] = (),
    seeds: Sequence[int] | None = None,
    **compare_options: Any,
) -> ComparisonTable:
    """Run each configuration (a :class:`~privtext.config.Config`, a YAML path, or an existing run directory),
    then :func:`compare_runs` the resulting runs.

    ``overrides`` (``--set KEY=VALUE``) apply to every YAML configuration. With ``out_dir`` each run goes to
    ``out_dir/<name>`` (name: the config's ``name``, else the file stem, else ``run<i>``). Every configuration
    passes :func:`privtext.runner.static_check` before the first run starts. ``seeds``: every
    configuration runs once per seed (``seed`` set, the run named ``<name>-s<seed>``; an existing run directory
    of that name is compared as it is, so an interrupted comparison picks up where it stopped); the table gets
    the columns ``config`` and ``seed`` (see :meth:`ComparisonTable.summary`).
    """
    from ..config import Config, load_config

    if compare_options.get("mauve"):  # a missing evaluation package fails before the runs, not after them
        from .fid import require_mauve

        require_mauve()
    run_dirs: list[Path | tuple[Any, Path | None]] = []  # a finished run, or (configuration, out) to run
    labels: list[tuple[str, int | None]] = []
    used: set[str] = set()
    for i, c in enumerate(configs):
        if isinstance(c, (str, os.PathLike)) and Path(c).is_dir():
            run_dirs.append(RunView(c).root)  # an existing run: compared as it is
            labels.append((Path(c).name, None))
            continue
        base = load_config(c, overrides=overrides) if isinstance(c, (str, os.PathLike)) else c
        if not isinstance(base, Config):
            raise ConfigError(f"compare: item {i} is neither a Config, a YAML path nor a run directory: {c!r}")
        stem = base.name or (Path(c).stem if isinstance(c, (str, os.PathLike)) else f"run{i}")
        name = stem
        k = 1
        while name in used:
            k += 1
            name = f"{stem}-{k}"
        used.add(name)
        for seed in (seeds if seeds else (None,)):
            if seed is None:
                cfg = base
            elif isinstance(c, (str, os.PathLike)):
                cfg = load_config(c, overrides=[*overrides, f"seed={int(seed)}"])
            else:
                cfg = Config.model_validate({**base.dump(), "seed": int(seed)})
            out = None
            if out_dir is not None:
                out = Path(out_dir) / (name if seed is None else f"{name}-s{seed}")
                if seed is not None and (out / "synthetic.jsonl").exists() and (out / "privacy.json").exists():
                    run_dirs.append(out)  # finished earlier (a resumed comparison)
                    labels.append((name, int(seed)))
                    continue
            elif seed is not None:
                src = cfg.source_path
                cfg = Config.model_validate({**cfg.dump(), "output": f"{cfg.output}-s{seed}"})
                cfg._source_path = src
            _runner().static_check(cfg)  # every configuration is checked before the first run starts
            run_dirs.append((cfg, out))
            labels.append((name, None if seed is None else int(seed)))
    done = [d if isinstance(d, Path) else _run_config(d[0], out=d[1]) for d in run_dirs]
    table = compare_runs(done, real=real, **compare_options)
    if seeds:
        for row, (name, seed) in zip(table.rows, labels, strict=True):
            row["config"], row["seed"] = name, seed
        table.columns = [table.columns[0], "config", "seed", *table.columns[1:]]
    return table


def rows_as_array(table: ComparisonTable, column: str) -> np.ndarray:
    return np.array([np.nan if r.get(column) is None else float(r[column]) for r in table.rows], dtype=np.float64)


__all__ = ["ComparisonTable", "build_table", "compare_configs", "compare_runs", "table_row"]
