"""The report of each of the four methods: what it says about the method (WASP's rounds as a table, its last
voted round's votes; DP-KPS without iterations or votes), the statement in sections, no local path or time stamp;
and each renders in headless Chromium without errors, at a desktop and a phone's width (screenshots kept under
``$PRIVTEXT_TEST_ARTIFACTS/report-<method>.png`` when that is set)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from privtext.data import write_corpus
from privtext.evaluate import evaluate_run
from privtext.evaluate.release_scan import scan_release, summary
from privtext.report import build_report
from privtext.report.chromium import find_chromium, render
from privtext.testing.tinyrun import method_runs, toy_corpora

METHODS = ("augpe", "secpe", "wasp", "dpkps")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("method-reports")
    priv, pub, real = toy_corpora(rng=np.random.default_rng(3), n_private=43, n_pool=200)
    write_corpus(real.subset(np.arange(36)), root / "real.csv")
    runs = method_runs(root, private=priv, public=pub, augpe_iterations=3)
    for r in runs.values():
        evaluate_run(r, real=root / "real.csv", quiet=True, classifiers=("tfidf-logreg",))
    return {m: build_report(r) for m, r in runs.items()}


def _html(reports: dict[str, Path], method: str) -> str:
    return reports[method].read_text(encoding="utf-8")


@pytest.mark.parametrize("method", METHODS)
def test_report_states_the_guarantee_in_sections_and_holds_no_path_or_time(reports: dict[str, Path],
                                                                           method: str) -> None:
    html = _html(reports, method)
    statement = html.split('<div class="card statement', 1)[1].split("</div>", 1)[0]
    assert statement.count("<h4>") >= 2 and "<b>" in statement  # the headline, then a heading per part
    assert "<h4>Treated as public (used without noise)</h4><ul><li>" in statement or method == "secpe"
    assert "Noise: " not in statement  # the heading says it once
    findings = scan_release(reports[method].parent, files=["report.html"])
    assert not findings, summary(findings)
    # the plots' base64 data may hold "/tmp" by chance (a failure seen in CI): the text outside data URIs may not
    text = re.sub(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+", "data:…", html)
    assert not re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}", text) and "/tmp" not in text


def test_wasp_report_shows_its_rounds_as_a_table_and_the_last_voted_round(reports: dict[str, Path]) -> None:
    html = _html(reports, "wasp")
    assert "{'round'" not in html and "&#x27;round&#x27;" not in html  # no raw dict
    assert "WASP rounds" in html and "<h2>WASP generators</h2>" in html
    votes = html.split("<h2>Votes</h2>", 1)[1].split("<h2>", 1)[0]
    assert "data:image/png;base64," in votes  # a plot of a round that took a vote, not empty panels
    assert "Round 1 (the last one with a vote)" in votes and "Later round(s) 2 took no vote" in votes  # its unit
    assert "<h2>Per round</h2>" in html and ">round</th><th class=\"\">selected</th>" in html
    assert "method <b>wasp</b> · 3 rounds" in html


def test_dpkps_report_speaks_of_its_release_not_of_iterations(reports: dict[str, Path]) -> None:
    html = _html(reports, "dpkps")
    assert "complete iteration" not in html and "0 iterations" not in html
    assert "one release, no iterations" in html and "DP-KPS is not iterative" in html
    assert "DP-KPS takes no votes: it releases a DP vocabulary and per-class term histograms" in html
    assert "No vote information" not in html
    assert "<h2>DP-KPS keyphrases</h2>" in html


needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="chromium not installed (apt-get install chromium)")


@pytest.mark.chromium
@needs_chromium
@pytest.mark.parametrize("method", METHODS)
def test_each_method_report_renders_in_headless_chromium(reports: dict[str, Path], method: str,
                                                         tmp_path: Path) -> None:
    out = Path(os.environ.get("PRIVTEXT_TEST_ARTIFACTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    shot = out / f"report-{method}.png"
    res = render(reports[method], screenshot=shot, width=1200)
    assert res.ok, res.errors
    assert res.title == f"privtext report: {method}"
    assert res.page_width <= 1200 and res.broken_images == 0 and res.images >= (2 if method == "dpkps" else 3)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    phone = render(reports[method], screenshot=out / f"report-{method}-phone.png", width=390, height=844)
    assert phone.ok, phone.errors
    assert phone.page_width <= 390, phone.page_width  # wide tables scroll in place
