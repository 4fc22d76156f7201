"""The DPO worker program (privtext.learn.worker), the one ``accelerate launch`` starts on several GPUs: called here
in this process (its ``main``, as ``python -m`` calls it; no GPU), it reads the records and options, continues the previous adapter and writes the next one,
whose margins are above the previous adapter's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("trl")

from privtext.atomicio import dumps  # noqa: E402
from privtext.learn.adapter import adapter_meta, load_adapter, save_adapter  # noqa: E402
from privtext.learn.dpo import attach_lora, preference_margins  # noqa: E402
from privtext.learn.options import DPOOptions  # noqa: E402
from privtext.learn.pairs import pair_records  # noqa: E402

from .test_learn_dpo import PAIRS, PROMPT, _encoder, _model  # noqa: E402


def test_the_worker_trains_one_round_from_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from privtext.testing.tiny_lm import make_tiny_gpt2

    tiny = make_tiny_gpt2(tmp_path / "tiny")
    opts = DPOOptions(beta=0.1, lr=5e-3, batch_size=4, epochs=3, lora_r=4, lora_alpha=8)
    (tmp_path / "options.json").write_text(opts.model_dump_json())
    (tmp_path / "records.jsonl").write_text(
        "".join(dumps(r) + "\n" for r in pair_records(PAIRS, lambda p: PROMPT + " ")))
    prev = attach_lora(_model(tiny), opts, rng=np.random.default_rng(0))
    save_adapter(prev, tmp_path / "prev")  # the previous round's adapter (here: untrained)
    from privtext.learn.worker import main

    assert main(["--model", str(tiny), "--records", str(tmp_path / "records.jsonl"), "--options",
                 str(tmp_path / "options.json"), "--adapter-in", str(tmp_path / "prev"), "--adapter-out",
                 str(tmp_path / "next"), "--seed", "4"]) == 0
    assert capsys.readouterr().out.strip() == ""  # trl's log lines are not printed
    meta = adapter_meta(tmp_path / "next")
    assert meta is not None and meta["pairs"] == len(PAIRS) and meta["processes"] == 1
    assert meta["result"]["trainer"] == "trl" and meta["result"]["steps"] == 9
    enc = _encoder(tiny)
    pairs = enc.encode_all(PAIRS)
    after = attach_lora(_model(tiny), opts, rng=np.random.default_rng(9))
    load_adapter(after, tmp_path / "next")
    gain = preference_margins(after, pairs, pad_id=enc.pad_id) - preference_margins(prev, pairs, pad_id=enc.pad_id)
    assert float(np.mean(gain)) > 0.3
    assert json.loads((tmp_path / "next" / "adapter.json").read_text())["config"]["r"] == 4
