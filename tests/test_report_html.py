"""The run report: self-contained, escaped, complete; and it renders in headless Chromium without errors."""

from __future__ import annotations

import base64
import json
import re
import shutil
from html import escape as html_escape
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import privtext.cli as cli
from privtext.data import write_corpus
from privtext.evaluate import evaluate_run
from privtext.report import build_report, write_report
from privtext.report.chromium import find_chromium, render
from privtext.testing.tinyrun import tiny_run, toy_corpora

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = '<script>alert("x")</script> & <img src="https://example.com/t.png">'


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    rng = np.random.default_rng(0)
    priv, pool, real = toy_corpora(rng=rng, n_private=40, n_pool=160)
    write_corpus(priv, root / "private.csv")
    write_corpus(real, root / "real.csv")
    r = tiny_run(root / "run", private=priv, public=pool, iterations=3, num_samples=20, privacy={"mu": 1.0})
    # a synthetic text that would be markup if it were not escaped
    lines = (r / "synthetic.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["text"] = HOSTILE
    lines[0] = json.dumps(rec)
    (r / "synthetic.jsonl").write_text("\n".join(lines) + "\n")
    evaluate_run(r, real=root / "real.csv", quiet=True, classifiers=("tfidf-logreg",),
                 secrets=["pizza", "lobby"])
    return r


@pytest.fixture(scope="module")
def page(run: Path) -> Path:
    path = build_report(run)
    assert path == run / "report.html"
    return path


def _attrs(html: str, name: str) -> list[str]:
    return re.findall(rf'\b{name}\s*=\s*"([^"]*)"', html)


def test_report_is_self_contained(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "<script" not in html.lower() and "<link" not in html.lower() and "@import" not in html
    srcs = _attrs(html, "src")
    assert len(srcs) >= 4 and all(s.startswith("data:image/png;base64,") for s in srcs)
    for s in srcs:
        png = base64.b64decode(s.split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    assert not _attrs(html, "href")
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", html)


def test_report_escapes_run_text(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    assert HOSTILE not in html and "<script>alert" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;img" in html


def test_report_has_every_section(run: Path, page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    ev = json.loads((run / "evaluation.json").read_text())
    for heading in ("Privacy guarantee", "Summary", "Downstream utility", "Per iteration", "Lengths", "Votes",
                    "Sample outputs"):
        assert f"<h2>{heading}</h2>" in html, heading
    privacy = json.loads((run / "privacy.json").read_text())
    assert html_escape(privacy["headline"]) in html  # the plain-words statement
    assert "μ=1-GDP" in html
    # and what it means for a reader who is not a specialist, right after it (issue 35, item 5)
    meaning = f"<h4>What this means</h4><p>{html_escape(privacy['meaning']['words'])}</p>"
    assert meaning in html and html.index(meaning) < html.index("Treated as public")
    assert "What μ = 1 means" in privacy["meaning"]["words"] and "Not covered" not in html
    # the shareable report holds no private diagnostics (run time, exact counts, secret statistics)
    for heading in ("Runtime and LLM usage", "Secret exposure", "Private diagnostics"):
        assert f"<h2>{heading}</h2>" not in html, heading
    assert "--diagnostics" in html
    assert f"{ev['fid']['fid']:.4g}" in html  # headline FID as computed
    for t in ev["per_iteration"]:
        assert f"{t['fid']:.4g}" in html
    # the OnlyPrivate baseline (trained on private records, no noise) is a private diagnostic
    assert "only-private" not in html and "zero-shot" in html and "majority class" in html
    assert "Prompt audit" in html
    # no time stamp and no local path in a shareable page
    assert not re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}", html)
    assert str(run.parent) not in html and "real.csv" in html
    # only synthetic text is shown: no real record appears in the page
    real = (run.parent / "real.csv").read_text().splitlines()[1:]
    assert not any(line.split(",")[1] in html for line in real if line.count(",") >= 3)


def test_report_without_evaluation_says_how_to_get_one(run: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    shutil.copytree(run, bare)
    (bare / "evaluation.json").unlink()
    html = write_report(bare).read_text(encoding="utf-8")
    assert "privtext evaluate" in html and "<h2>Votes</h2>" in html
    assert "data:image/png;base64," in html  # votes still drawn from the run itself


def test_report_of_an_unfinished_run(run: Path, tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    shutil.copytree(run, partial)
    for f in ("evaluation.json", "privacy.json", "synthetic.jsonl", "private/metrics.json"):
        (partial / f).unlink()
    html = build_report(partial).read_text(encoding="utf-8")
    assert "did not finish" in html and "<h2>Sample outputs</h2>" in html


def test_diagnostic_report_is_private_and_complete(run: Path) -> None:
    """``--diagnostics`` adds run time, exact counts and secret statistics, and goes under private/."""
    path = build_report(run, diagnostics=True)
    assert path == run / "private" / "report.html"
    html = path.read_text(encoding="utf-8")
    for heading in ("Private diagnostics", "Runtime and LLM usage", "Secret exposure"):
        assert f"<h2>{heading}</h2>" in html, heading
    assert "LLM calls" in html and "PRIVATE DIAGNOSTICS" in html
    assert "only-private (PRIVATE: trained on the private records, no noise)" in html
    diag = json.loads((run / "private" / "diagnostics.json").read_text())
    assert diag["records"]["private"] == 40  # the exact count lives here, and only here
    assert '"private": 40' not in (run / "privacy.json").read_text()


def test_cli_report(run: Path, tmp_path: Path) -> None:
    if not any(c.name == "report" for c in cli.app.registered_commands):
        cli._mount()
    out = tmp_path / "r.html"
    res = CliRunner().invoke(cli.app, ["report", str(run), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["report"] == str(out) and out.exists() and d["bytes"] == out.stat().st_size


# -------------------------------------------------------------------------------------- headless Chromium

needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="chromium not installed (apt-get install chromium)")


@pytest.mark.chromium
@needs_chromium
def test_report_renders_in_headless_chromium_without_errors(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    res = render(page, screenshot=shot, width=1200)
    assert res.ok, res.errors
    assert res.title.startswith("privtext report")
    assert res.images >= 4 and res.broken_images == 0 and res.page_height > 2000
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000
    assert res.page_width <= 1200  # nothing wider than a desktop window


@pytest.mark.chromium
@needs_chromium
def test_report_fits_a_phone(page: Path, tmp_path: Path) -> None:
    """At a phone's width (390 px) the page does not scroll sideways: images shrink, wide tables scroll in place."""
    res = render(page, screenshot=tmp_path / "phone.png", width=390, height=844)
    assert res.ok, res.errors
    assert res.page_width <= 390, res.page_width
    assert res.images >= 4 and res.broken_images == 0


@pytest.mark.chromium
@needs_chromium
def test_chromium_check_catches_errors(tmp_path: Path) -> None:
    """The renderer must see what a broken page does: console errors, exceptions, external requests."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><title>bad</title></head><body><p>x</p>'
                   '<img src="http://127.0.0.1:9/missing.png">'
                   '<script>console.error("boom"); undefinedFunction();</script></body></html>')
    res = render(bad)
    assert not res.ok
    assert any("boom" in e for e in res.console_errors)
    assert res.exceptions and "undefinedFunction" in res.exceptions[0]
    assert res.external_requests == ["http://127.0.0.1:9/missing.png"] and res.broken_images == 1


def test_vote_plot_has_a_panel_per_label_with_full_titles(monkeypatch: pytest.MonkeyPatch) -> None:
    from privtext.report import plots

    seen = {}
    monkeypatch.setattr(plots, "_png", lambda fig: seen.setdefault("fig", fig) and b"png")
    long = "Business Category: Restaurants and Bars of the Downtown Area"
    dist = {f"{long} | Stars: {i}": {"sorted_votes": [3.0, 1.0, 0.0], "total_votes": 10 - i} for i in range(10)}
    assert plots.votes_plot(dist) == b"png"
    axes = [a for a in seen["fig"].axes if a.axison]
    titles = [a.get_title().replace("\n", " ") for a in axes]
    assert len(axes) == 10 and sorted(titles) == sorted(dist)  # every label, titles wrapped, never cut


def test_samples_come_from_every_label(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    priv, pool, _ = toy_corpora(rng=rng, n_private=60, n_pool=240, topics=("food", "hotel", "shop"))
    r = tiny_run(tmp_path / "run", private=priv, public=pool, iterations=1, num_samples=24, privacy={"mu": 1.0})
    html = build_report(r, samples_per_label=2, max_samples=4).read_text(encoding="utf-8")
    section = html.split("<h2>Sample outputs</h2>", 1)[1]
    labels = {(c, m) for c in ("food", "hotel", "shop") for m in ("good", "bad")}
    found = {(c, m) for c, m in labels if f'<span class="tag">{c}</span><span class="tag">{m}</span>' in section}
    assert found == labels
