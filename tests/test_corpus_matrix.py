"""The corpus matrix in tests (issue 35): every prompting method with its default configuration, scaled down, on
a corpus shaped like a user's own support tickets — short messages, a 2-word private ticket the public text also
holds, public text without labels — in the three set-ups a user meets: labelled public text, unlabelled public text
with the label values declared, and no labels at all.

What each cell must show (``benchmarks/corpus_matrix.py`` runs the full-size matrix and docs/corpus-matrix.md holds
its table):

* the run finishes (a refusal, which must come before the run folder exists, fails the test here: every default
  must work on this common set-up; DP-KPS's default vocabulary size refused it until its default took the whole
  public vocabulary of a small corpus);
* a finished run's statement is private and its prompt audit passed: no false NOT PRIVATE on real short texts
  (before issue 35 every prompting run here said NOT PRIVATE, because "pending transaction?" is a private ticket
  and a public one);
* the same run with a private ticket planted into one prompt says NOT PRIVATE (the check is not asleep).

Only the scale is set (``num_samples``, ``iterations``); the generator (the n-gram trained on the public text), the
embedder (the packaged MiniLM), the label distribution (``auto``) and every method option are the defaults.
Banking77 from ../shared/data; skipped where it is absent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privtext.config import config_from_dict
from privtext.errors import ConfigError
from privtext.runner import run_config
from tests.conftest import plant_in_first_prompt, shared_file

#: ten intents of Banking77 (the issue's ticket set-up uses ten)
INTENTS = ("card_arrival", "pending_card_payment", "exchange_rate", "lost_or_stolen_card", "top_up_failed",
           "cash_withdrawal_charge", "declined_transfer", "verify_my_identity", "change_pin", "refund_not_showing_up")
TWO_WORDS = "pending transaction?"
#: a private ticket with a secret (an e-mail address, found by SecPE's default detector) that no public text holds
WITH_SECRET = "Please send the refund to jane.doe.4711@examplemail.com because it is still not showing up"
METHODS = ("augpe", "secpe", "wasp", "dpkps")
SETUPS = ("labelled", "declared", "none")


def _norm(t: str) -> str:
    return " ".join(re.findall(r"\w+", t.lower()))


@pytest.fixture(scope="module")
def tickets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """160 private tickets of the ten intents (one of them the two words "pending transaction?", one with an e-mail
    address), 240 public
    messages: of the same intents with their labels (``public-labelled.csv``), or of other intents without labels
    (``public.csv``), which hold the two words too (as in the user's data, where they occur three times)."""
    import csv

    path = shared_file("banking77", "train.csv")
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    rng = np.random.default_rng(0)
    ours = [rows[i] for i in rng.permutation(len(rows)) if rows[i]["category"] in INTENTS]
    other = [rows[i] for i in rng.permutation(len(rows)) if rows[i]["category"] not in INTENTS]
    two = [r for r in other if _norm(r["text"]) == _norm(TWO_WORDS)]
    d = tmp_path_factory.mktemp("tickets")
    private = [{"ticket_id": "T0", "message": TWO_WORDS, "intent": "pending_card_payment"},
               {"ticket_id": "T1", "message": WITH_SECRET, "intent": "refund_not_showing_up"}]
    private += [{"ticket_id": f"T{k + 2}", "message": r["text"], "intent": r["category"]}
                for k, r in enumerate(ours[:158])]
    seen = {_norm(r["message"]) for r in private}
    labelled = [{"message": r["text"], "intent": r["category"]} for r in ours[159:] if _norm(r["text"]) not in seen]
    unlabelled = [{"message": TWO_WORDS}] * max(1, 3 - len(two)) + [{"message": r["text"]} for r in other[:240]]
    for name, table, cols in (("private.csv", private, ["ticket_id", "message", "intent"]),
                              ("public-labelled.csv", labelled[:240], ["message", "intent"]),
                              ("public.csv", unlabelled, ["message"])):
        with open(d / name, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(table)
    return d


def _config(d: Path, method: str, setup: str, out: Path) -> dict[str, Any]:
    """A user's configuration of one cell: files, columns, labels, budget; scale only, every option default."""
    data: dict[str, Any] = {"private": str(d / "private.csv"), "text_column": "message", "id_column": "ticket_id",
                            "public": str(d / ("public-labelled.csv" if setup == "labelled" else "public.csv"))}
    if setup != "none":
        data["label_columns"] = ["intent"]
    if setup == "declared":
        data["label_values"] = {"intent": list(INTENTS)}
    privacy: dict[str, Any] = {"epsilon": 4.0, "delta": 1e-5}
    if method == "dpkps":
        privacy = {"epsilon": 4.0}
    elif method == "secpe":
        privacy = {"secret": {"p": 1e-4, "r": 1e-2}}
    return {"method": method, "data": data, "privacy": privacy, "output": str(out), "seed": 0,
            "synthesis": {"num_samples": 40}, "evolution": {"iterations": 2}}


def _run(d: Path, method: str, setup: str, out: Path) -> tuple[dict[str, Any] | None, str]:
    """The run's privacy.json, or None and the refusal's message where it was refused before its folder existed."""
    try:
        config = config_from_dict(_config(d, method, setup, out))
        run_config(config)
    except ConfigError as e:
        assert not out.exists(), f"{method}/{setup} refused ({e}) after writing {out}"
        assert str(e).strip(), "a refusal says why"
        return None, str(e)
    return json.loads((out / "privacy.json").read_text(encoding="utf-8")), ""


@pytest.mark.parametrize("setup", SETUPS)
@pytest.mark.parametrize("method", METHODS)
def test_a_cell_finishes_private_or_is_refused_before_writing(tickets: Path, tmp_path: Path, method: str,
                                                              setup: str) -> None:
    st, refusal = _run(tickets, method, setup, tmp_path / "run")
    assert st is not None, f"{method} refused a user's common set-up ({setup}): {refusal}"
    assert st["private"] is True, f"false alarm on real short tickets: {st['headline']}"
    assert st["prompt_audit"]["passed"] is True
    assert "NOT PRIVATE" not in st["headline"]
    synthetic = [json.loads(line) for line in open(tmp_path / "run" / "synthetic.jsonl", encoding="utf-8")]
    assert synthetic, "a finished run writes synthetic records"
    if setup != "none":
        labels = {r.get("intent") or (r.get("labels") or {}).get("intent") for r in synthetic}
        assert labels <= set(INTENTS), f"labels outside the declared values: {labels - set(INTENTS)}"


@pytest.mark.parametrize("method", METHODS)
def test_a_private_ticket_planted_in_a_prompt_still_says_not_private(tickets: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     method: str) -> None:
    """The same default set-up (declared labels, unlabelled public text) with a private ticket that no public
    text holds appended to the first prompt: the audit must find it (the ticket with an e-mail address, so that it
    is private for SecPE too, which treats secret-free records as public)."""
    leak = WITH_SECRET
    done = plant_in_first_prompt(monkeypatch, leak)
    st, refusal = _run(tickets, method, "declared", tmp_path / "run")
    assert st is not None and done, f"the planted prompt was not written ({refusal or 'no prompt logged'})"
    assert st["private"] is False and st["prompt_audit"]["passed"] is False
    assert "No guarantee holds" in st["headline"]
