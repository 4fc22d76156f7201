"""``privtext evaluate``, ``privtext compare`` and ``privtext report``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

RealOpt = Annotated[Path, typer.Option("--real", help="real corpus to compare with (CSV/TSV/JSONL/Parquet)")]
EmbOpt = Annotated[str | None, typer.Option(
    "--embedder", help="embedder: backend[:model], e.g. sentence-transformers, hashing (default: the run's)")]
MaxRealOpt = Annotated[int | None, typer.Option("--max-real", help="use a seeded sample of at most N real records")]
ClfOpt = Annotated[list[str] | None, typer.Option(
    "--classifier", help="downstream classifier (repeatable): embedding-logreg, tfidf-logreg, hf-finetune")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print machine-readable JSON")]
NoBaselinesOpt = Annotated[bool, typer.Option("--no-baselines", help="skip OnlyPrivate and zero-shot")]
ClfOptOpt = Annotated[list[str] | None, typer.Option(
    "--classifier-option", help="CLASSIFIER.KEY=VALUE (repeatable), e.g. hf-finetune.model=/models/roberta-base")]


def parse_classifier_options(items: list[str] | None) -> dict[str, dict[str, Any]]:
    """``["hf-finetune.model=roberta-base", "hf-finetune.epochs=2"]`` → ``{"hf-finetune": {...}}``."""
    import yaml

    from ..errors import ConfigError

    out: dict[str, dict[str, Any]] = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        name, dot, opt = key.partition(".")
        if not (eq and dot and name.strip() and opt.strip()):
            raise ConfigError(f"--classifier-option expects CLASSIFIER.KEY=VALUE, got {item!r}")
        try:
            parsed = yaml.safe_load(value) if value != "" else ""
        except yaml.YAMLError:
            parsed = value
        out.setdefault(name.strip(), {})[opt.strip()] = parsed
    return out


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * float(x):.2f}%"


def _g(x: Any) -> str:
    return "—" if x is None else f"{float(x):.4g}"


def _print_evaluation(ev: dict[str, Any], path: Path) -> None:
    from rich.table import Table

    from .app import out

    out.print(f"[bold]{ev['name']}[/] ({ev['method']}, {ev['guarantee_text']}) — "
              f"{ev['synthetic']['n']} synthetic vs {ev['real']['n']} real, embedder {ev['embedder']['name']}",
              highlight=False)
    t = Table(title="distribution", show_header=False, title_justify="left")
    t.add_column("metric", style="bold")
    t.add_column("value", justify="right")
    t.add_row("FID (synthetic)", _g(ev["fid"]["fid"]))
    if ev.get("fid_zero_shot"):
        t.add_row("FID (zero-shot)", _g(ev["fid_zero_shot"]["fid"]))
    if ev.get("fid", {}).get("rank_deficient"):
        t.add_row("FID ridge (n ≤ d)", _g(ev["fid"]["ridge"]))
    pr = ev.get("precision_recall")
    if pr:
        t.add_row(f"precision / recall (k={pr['k']})", f"{_pct(pr['precision'])} / {_pct(pr['recall'])}")
    if ev.get("mauve"):
        t.add_row("MAUVE", _g(ev["mauve"]["mauve"]))
    L = ev.get("lengths") or {}
    if L:
        t.add_row("mean length synthetic / real (words)", f"{L['synthetic_mean']:.1f} / {L['real_mean']:.1f}")
        t.add_row("length Wasserstein / KS", f"{L['wasserstein']:.3g} / {L['ks_statistic']:.3g}")
    rt = ev.get("runtime") or {}
    if rt.get("llm_calls") is not None:
        t.add_row("LLM calls", str(rt["llm_calls"]))
    s = ev.get("secrets")
    if s:
        base = "" if s.get("baseline_exposed") is None else f" (zero-shot baseline {s['baseline_exposed']})"
        t.add_row("secrets found verbatim", f"{s['exposed']} of {s['n_secrets']}{base}")
    out.print(t)
    ds = ev.get("downstream")
    if ds:
        for cname, per_set in ds["results"].items():
            labels = sorted({c for r in per_set.values() for c in r})
            dt = Table(title=f"downstream accuracy on real data: {cname}", title_justify="left")
            dt.add_column("trained on", style="bold")
            for c in labels:
                dt.add_column(c, justify="right")
            for sname, res in per_set.items():
                dt.add_row(sname.replace("_", "-"), *[_pct(res.get(c, {}).get("accuracy")) for c in labels])
            maj = [next((r[c]["majority_accuracy"] for r in per_set.values() if c in r), None) for c in labels]
            dt.add_row("[dim]majority class[/]", *[_pct(m) for m in maj])
            out.print(dt)
    nw = ev.get("next_word")
    if nw:
        nt = Table(title="next-word prediction on real text", title_justify="left")
        for col in ("trained on", "accuracy", "in-vocabulary", "OOV rate", "most frequent word"):
            nt.add_column(col, justify="left" if col == "trained on" else "right")
        for sname, r in nw.items():
            nt.add_row(sname.replace("_", "-"), _pct(r["accuracy"]), _pct(r["accuracy_in_vocab"]),
                       _pct(r["oov_rate"]), _pct(r["unigram_accuracy"]))
        out.print(nt)
    per_it = ev.get("per_iteration") or []
    if per_it:
        labels = sorted({c for r in per_it for c in (r.get("accuracy") or {})})
        it = Table(title="per iteration (selected samples)", title_justify="left")
        it.add_column("t", justify="right")
        it.add_column("selected", justify="right")
        it.add_column("FID", justify="right")
        for c in labels:
            it.add_column(c, justify="right")
        for r in per_it:
            it.add_row(str(r["iteration"]), str(r["n_selected"]), _g(r.get("fid")),
                       *[_pct((r.get("accuracy") or {}).get(c)) for c in labels])
        out.print(it)
    for n in ev.get("notes") or []:
        out.print(f"[dim]{n}[/]", highlight=False)
    out.print(f"[bold]written[/] {path}", highlight=False)


def evaluate_cmd(
    run_dir: Annotated[Path, typer.Argument(help="run directory")],
    real: RealOpt,
    embedder: EmbOpt = None,
    max_real: MaxRealOpt = None,
    classifier: ClfOpt = None,
    classifier_option: ClfOptOpt = None,
    no_baselines: NoBaselinesOpt = False,
    next_word: Annotated[bool | None, typer.Option(
        "--next-word/--no-next-word", help="next-word LM accuracy (default: only for unlabelled data)")] = None,
    next_word_steps: Annotated[int | None, typer.Option(
        "--next-word-steps", help="training steps of the next-word LM (default 300)")] = None,
    secrets: Annotated[Path | None, typer.Option(
        "--secrets", help="file of declared secrets (one per line, or a JSON list) to count verbatim")] = None,
    mauve: Annotated[bool, typer.Option("--mauve", help="also compute MAUVE (needs the mauve extra)")] = False,
    knn_k: Annotated[int, typer.Option("--knn-k", help="k of kNN precision/recall")] = 3,
    private: Annotated[Path | None, typer.Option(
        "--private", help="private corpus for the OnlyPrivate baseline (default: the run's data.private)")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="evaluation seed (default: the run's)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Evaluate a run against real data; writes RUN_DIR/evaluation.json."""
    from ..evaluate.runstats import load_secrets
    from ..evaluate.suite import DEFAULT_CLASSIFIERS, evaluate_run
    from .app import print_json

    ev = evaluate_run(
        run_dir, real=real, embedder=embedder, max_real=max_real,
        classifiers=tuple(classifier) if classifier else DEFAULT_CLASSIFIERS, baselines=not no_baselines,
        classifier_options=parse_classifier_options(classifier_option),
        private=str(private) if private else None, next_word=next_word, knn_k=knn_k, mauve=mauve,
        next_word_options={"steps": next_word_steps} if next_word_steps else None,
        secrets=load_secrets(str(secrets)) if secrets else None, seed=seed,
    )
    path = Path(run_dir) / "evaluation.json"
    if as_json:
        print_json(ev)
    else:
        _print_evaluation(ev, path)


def compare_cmd(
    configs: Annotated[list[Path], typer.Argument(help="YAML configurations and/or existing run directories")],
    real: RealOpt,
    csv: Annotated[Path | None, typer.Option("--csv", help="also save the table as CSV here")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="override a key in every configuration: a.b=value (repeatable)")] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out-dir", help="put each run in OUT_DIR/<name> (default: each config's output)")] = None,
    embedder: EmbOpt = None,
    max_real: MaxRealOpt = None,
    classifier: ClfOpt = None,
    classifier_option: ClfOptOpt = None,
    no_baselines: NoBaselinesOpt = False,
    secrets: Annotated[Path | None, typer.Option(
        "--secrets", help="file of declared secrets to count verbatim in each run's output")] = None,
    seed: Annotated[int, typer.Option("--seed", help="seed for the real sample and the classifiers")] = 0,
    seeds: Annotated[str | None, typer.Option(
        "--seeds", help="run every configuration once per seed (comma-separated, e.g. 0,1,2; runs named "
        "NAME-sSEED) and add a summary: mean ± sd and spread per configuration")] = None,
    mauve: Annotated[bool | None, typer.Option(
        "--mauve/--no-mauve", help="MAUVE on the embeddings (default: when privtext[mauve] is installed)")] = None,
    summary_csv: Annotated[Path | None, typer.Option("--summary-csv", help="save the per-configuration "
                                                     "summary (with --seeds) as CSV here")] = None,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="save the table (with --seeds: the "
                                                  "summary) as Markdown here")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run several configurations on the same data and print one comparison table."""
    import importlib.util

    from ..errors import ConfigError
    from ..evaluate.compare import compare_configs
    from ..evaluate.runstats import load_secrets
    from ..evaluate.suite import DEFAULT_CLASSIFIERS
    from .app import out, print_json

    try:
        seed_list = [int(x) for x in seeds.split(",") if x.strip()] if seeds else None
    except ValueError:
        raise ConfigError(f"--seeds expects comma-separated integers, got {seeds!r}") from None
    use_mauve = mauve if mauve is not None else importlib.util.find_spec("mauve") is not None
    table = compare_configs(
        [str(c) for c in configs], real=real, out_dir=out_dir, overrides=set_ or [], embedder=embedder,
        max_real=max_real, classifiers=tuple(classifier) if classifier else DEFAULT_CLASSIFIERS, seed=seed,
        baselines=not no_baselines, secrets=load_secrets(str(secrets)) if secrets else None,
        classifier_options=parse_classifier_options(classifier_option), seeds=seed_list, mauve=use_mauve,
    )
    summary = table.summary() if seed_list else None
    if csv is not None:
        table.to_csv(csv)
    if summary is not None and summary_csv is not None:
        summary.to_csv(summary_csv)
    if markdown is not None:
        from ..atomicio import atomic_write_text

        atomic_write_text(markdown, (summary or table).to_markdown())
    if as_json:
        print_json({**table.to_dict(), "summary": summary.to_dict() if summary else None,
                    "csv": str(csv) if csv else None})
        return
    shown = [table] if summary is None else [table, summary]
    for t in shown:
        if out.is_terminal:
            out.print(t.to_rich())
        else:  # piped or captured: do not squeeze the table into 80 columns
            from rich.console import Console

            Console(width=200, highlight=False).print(t.to_rich())
    for w in table.warnings:
        out.print(f"[yellow]warning:[/] {w}", highlight=False)
    for path in (csv, summary_csv if summary else None, markdown):
        if path is not None:
            out.print(f"[bold]written[/] {path}", highlight=False)


def diagnose_cmd(
    run_dir: Annotated[Path, typer.Argument(help="run directory")],
    embedder: EmbOpt = None,
    prompts: Annotated[bool, typer.Option(
        "--prompts", help="what the prompt audit flagged: the matched text, the private record, why no public "
        "source explains it (prints private text)")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Where the private signal went, per iteration (reads the private corpus: a private diagnostic,
    written to RUN_DIR/private/diagnostics.json); --prompts: what the prompt audit flagged."""
    from ..evaluate.diagnose import diagnose_run, prompt_findings, prompt_lines, summary_lines
    from .app import out, print_json

    if prompts:
        pf = prompt_findings(run_dir)
        if as_json:
            print_json(pf)
        else:
            for line in prompt_lines(pf):
                out.print(line, highlight=False, markup=False, soft_wrap=True)
        return
    d = diagnose_run(run_dir, embedder=embedder)
    if as_json:
        print_json(d)
    else:
        for line in summary_lines(d):
            out.print(line, highlight=False)


def report_cmd(
    run_dir: Annotated[Path, typer.Argument(help="run directory")],
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", "--out", help="HTML file (default RUN_DIR/report.html)")] = None,
    real: Annotated[Path | None, typer.Option(
        "--real", help="evaluate against this corpus first (else use RUN_DIR/evaluation.json if present)")] = None,
    embedder: EmbOpt = None,
    max_real: MaxRealOpt = None,
    samples: Annotated[int, typer.Option("--samples", help="sample outputs per label")] = 2,
    diagnostics: Annotated[bool, typer.Option(
        "--diagnostics", help="include the private diagnostics (exact counts, run time, secret statistics); "
        "writes RUN_DIR/private/report.html, which must not be shared")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write a self-contained HTML report (privacy statement, metrics, plots, samples)."""
    from ..evaluate.suite import evaluate_run
    from ..report import build_report
    from .app import out, print_json

    ev = evaluate_run(run_dir, real=real, embedder=embedder, max_real=max_real) if real is not None else None
    path = build_report(run_dir, evaluation=ev, out=output, samples_per_label=samples, diagnostics=diagnostics)
    if as_json:
        print_json({"report": str(path), "bytes": path.stat().st_size, "evaluated": ev is not None})
    else:
        out.print(f"[bold]report[/] {path}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``evaluate``, ``compare``, ``diagnose`` and ``report`` to the command line."""
    from .app import handle_errors

    for name, command in (("evaluate", evaluate_cmd), ("compare", compare_cmd), ("diagnose", diagnose_cmd),
                          ("report", report_cmd)):
        app.command(name)(handle_errors(command))


__all__ = ["register"]
