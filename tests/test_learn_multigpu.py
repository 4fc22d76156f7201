"""A DPO round on several GPUs (``evolution.learn.dpo.devices: K``, privtext.learn.launch): the command line
accelerate runs, the round through the real subprocess path with K = 1 on this CPU giving the same adapter as the
in-process trl round it replaces, the learning step handing a K-device round to it and reading the adapter back
into the generator, K = 2 as two CPU processes giving the adapter of one process with twice the batch, and the
refusal of more GPUs than are visible (naming the key, before a run folder exists). K = 2 on GPUs runs in a ``gpu``
test."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("trl")
pytest.importorskip("accelerate")

from privtext.errors import ConfigError  # noqa: E402
from privtext.learn import devices, launch  # noqa: E402
from tests.conftest import toy_preference_pairs  # noqa: E402

PAIRS = toy_preference_pairs(3)
DPO = {"trainer": "trl", "beta": 0.1, "lr": 5e-3, "batch_size": 3, "epochs": 2, "lora_r": 4, "lora_alpha": 8}
REAL_RUN_WORKER = launch.run_worker


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny(tiny_gpt2: Path) -> Path:
    return tiny_gpt2


def _learner(tiny: Path, **dpo: Any) -> Any:
    from privtext.generate import GeneratorContext, build_generator
    from privtext.learn.factory import build_learner

    gen = build_generator({"backend": "transformers", "model": str(tiny), "device": "cpu", "max_new_tokens": 4},
                          GeneratorContext())
    return build_learner({"kind": "dpo", "dpo": {**DPO, **dpo}}, gen, label_info=lambda g: None, seed=11,
                         name="tiny")


def _state(model: Any) -> dict[str, Any]:
    from peft import get_peft_model_state_dict

    return {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}


def _arg(cmd: list[str], flag: str) -> str | None:
    return cmd[cmd.index(flag) + 1] if flag in cmd else None


def test_the_command_line(tmp_path: Path) -> None:
    cmd = launch.worker_command(model="/m", records=tmp_path / "r.jsonl", options=tmp_path / "o.json",
                                adapter_out=tmp_path / "out", adapter_in=tmp_path / "prev", seed=42, processes=4)
    assert cmd[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert _arg(cmd, "--num_processes") == "4" and "--multi_gpu" in cmd and "--cpu" not in cmd
    assert _arg(cmd, "--num_machines") == "1" and _arg(cmd, "--mixed_precision") == "no"
    i = cmd.index("privtext.learn.worker")
    assert cmd[i - 1] == "-m" and cmd.index("--multi_gpu") < i  # accelerate's flags before the module
    assert cmd[i + 1:] == ["--model", "/m", "--records", str(tmp_path / "r.jsonl"), "--options",
                           str(tmp_path / "o.json"), "--adapter-out", str(tmp_path / "out"), "--seed", "42",
                           "--adapter-in", str(tmp_path / "prev")]
    one = launch.worker_command(model="/m", records=Path("r"), options=Path("o"), adapter_out=Path("a"), seed=1,
                                processes=1, cpu=True)
    assert _arg(one, "--num_processes") == "1" and "--multi_gpu" not in one and "--cpu" in one
    assert "--adapter-in" not in one
    # K CPU processes: accelerate refuses --cpu beside --multi_gpu, and --cpu alone starts one process
    two = launch.worker_command(model="/m", records=Path("r"), options=Path("o"), adapter_out=Path("a"), seed=1,
                                processes=2, cpu=True)
    assert _arg(two, "--num_processes") == "2" and "--multi_gpu" in two and "--cpu" not in two
    env = launch.worker_env(cpu=True)
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["PYTHONPATH"].split(":")[0].endswith("src")


def test_one_launched_process_trains_the_adapter_the_in_process_round_trains(tiny: Path, tmp_path: Path) -> None:
    """K = 1 through the subprocess (accelerate launch --cpu → privtext.learn.worker) and the in-process trl round:
    the same start adapter, pairs and seed give the same adapter (to 1e-5)."""
    here, there = _learner(tiny), _learner(tiny)
    assert all(torch.equal(a, b) for a, b in zip(_state(here.model).values(), _state(there.model).values(),
                                                 strict=True))  # the same seeded start
    start = _state(here.model)
    res_here = here.train(0, PAIRS)  # no folder: in this process
    res_there = launch.train_launched(there, 0, PAIRS, tmp_path, processes=1)
    a, b = _state(here.model), _state(there.model)
    assert max(float((a[k] - start[k]).abs().max()) for k in a) > 1e-3  # it trained
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5
    assert res_there["launched"] is True and res_there["processes"] == 1
    assert res_there["steps"] == res_here["steps"] == 4
    assert res_there["loss_first"] == pytest.approx(res_here["loss_first"], abs=1e-5)
    # what the worker read: the pairs' texts under the generator's rendered prompt, the options, the start adapter
    work = tmp_path / launch.LAUNCH
    assert (work / "start" / "adapter.json").exists() and (work / "adapter" / "adapter.json").exists()
    assert len((work / "records.jsonl").read_text().splitlines()) == len(PAIRS)


def test_two_cpu_processes_train_the_adapter_one_process_trains_with_twice_the_batch(tiny: Path,
                                                                                      tmp_path: Path) -> None:
    """K = 2 for real, on this CPU: accelerate starts two worker processes (joined with gloo), each with
    batch_size pairs a step, and averages their gradients. That is one process's round with 2 × batch_size pairs a
    step over the same shuffled order: the same adapter (to 0.1 % of the update), the same optimiser steps (trl's own count), and
    half the steps of one process with batch_size."""
    from privtext.learn.dpo import optimiser_steps
    from privtext.learn.options import DPOOptions

    assert len(PAIRS) % (2 * DPO["batch_size"]) == 0  # no padded last step: the two rounds see the same pairs
    here, there = _learner(tiny, batch_size=2 * DPO["batch_size"]), _learner(tiny)
    start = _state(here.model)
    res_here = here.train(0, PAIRS)
    res_there = launch.train_launched(there, 0, PAIRS, tmp_path, processes=2, cpu=True)
    a, b = _state(here.model), _state(there.model)
    update = torch.cat([(a[k] - start[k]).flatten() for k in a])
    apart = torch.cat([(a[k] - b[k]).flatten() for k in a])
    assert float(update.abs().max()) > 1e-3  # it trained
    # the same update up to float rounding, which Adam's first step (lr · g / (|g| + eps)) turns into up to lr for
    # the few weights whose gradient is ~0 (here 6 of 4 096): so the update's norm, not each weight, is compared
    assert float(apart.norm() / update.norm()) < 1e-3
    assert res_there["processes"] == 2 and res_there["launched"] is True
    per_process = DPOOptions.model_validate(DPO)
    assert res_there["steps"] == res_here["steps"] == optimiser_steps(len(PAIRS), per_process, processes=2) == 2
    assert optimiser_steps(len(PAIRS), per_process) == 4  # one process, batch_size pairs a step
    assert res_there["loss_first"] == pytest.approx(res_here["loss_first"], abs=1e-5)


def test_the_step_hands_a_k_device_round_to_the_launcher(tiny: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """dpo.devices: 2 → the step writes the round's inputs and runs accelerate with 2 processes (here on the CPU:
    the runner, watched, runs the command as it is); the adapter comes back into the generator's model and into
    the step's checkpoint."""
    from privtext.learn.adapter import load_adapter

    seen: list[list[str]] = []

    def runner(cmd: list[str], **kw: Any) -> None:
        seen.append(list(cmd))
        assert _arg(cmd, "--num_processes") == "2" and "--multi_gpu" in cmd
        REAL_RUN_WORKER(cmd, **kw)

    monkeypatch.setattr(launch, "run_worker", runner)
    learner = _learner(tiny, devices=2)
    learner.pairs = lambda *a, **k: list(PAIRS)
    folder = tmp_path / "iter_000" / "learn"
    rec = learner.step(0, None, None, folder=folder)
    assert len(seen) == 1 and rec.trained["launched"] is True and rec.pairs == len(PAIRS)
    assert rec.trained["processes"] == 2
    assert _arg(seen[0], "--adapter-in") == str(folder / "launch" / "start")
    back = _state(learner.model)
    other = _learner(tiny)
    load_adapter(other.model, folder / "launch" / "adapter")
    assert all(torch.equal(back[k], v) for k, v in _state(other.model).items())
    load_adapter(other.model, folder)  # the step's own checkpoint holds the launched round's adapter
    assert all(torch.equal(back[k], v) for k, v in _state(other.model).items())


def test_more_gpus_than_visible_are_refused_naming_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "visible_cuda_devices", lambda: 0)
    with pytest.raises(ConfigError) as e:
        devices.check_devices(2)
    assert "evolution.learn.dpo.devices: 2" in str(e.value) and "0 CUDA devices are visible" in str(e.value)
    devices.check_devices(1)  # one device: the run's own process, nothing to check
    monkeypatch.setattr(devices, "visible_cuda_devices", lambda: 2)
    devices.check_devices(2)
    with pytest.raises(ConfigError, match="3 GPUs, but 2 CUDA devices"):
        devices.check_devices(3)


def test_a_run_asking_for_more_gpus_fails_before_its_folder_exists(tiny: Path, tmp_path: Path) -> None:
    from privtext.config import config_from_dict
    from privtext.data import Corpus, write_corpus
    from privtext.runner import run_config

    if launch.visible_cuda_devices() >= 8:
        pytest.skip("this machine has 8 GPUs")
    texts = [f"{s} was {a} today ." for s in ("the food", "the room", "our waiter") for a in ("great", "slow")]
    write_corpus(Corpus.from_texts(texts * 4), tmp_path / "private.csv")
    write_corpus(Corpus.from_texts(texts * 4), tmp_path / "public.csv")
    out = tmp_path / "run"
    raw = {"method": "augpe", "seed": 1, "data": {"private": str(tmp_path / "private.csv"),
                                                  "public": str(tmp_path / "public.csv")},
           "generator": {"backend": "transformers", "model": str(tiny), "device": "cpu", "max_new_tokens": 4},
           "embedder": {"backend": "hashing", "dim": 32, "cache": False},
           "privacy": {"epsilon": 4.0, "delta": 1e-4},
           "synthesis": {"num_samples": 4},
           "evolution": {"iterations": 2, "learn": {"kind": "dpo", "dpo": {"devices": 8}}},
           "output": str(out)}
    with pytest.raises(ConfigError) as e:
        run_config(config_from_dict(raw))
    assert "evolution.learn.dpo.devices: 8" in str(e.value) and "CUDA device" in str(e.value)
    assert not out.exists()


@pytest.mark.gpu
def test_two_gpus_train_one_round(tiny: Path, tmp_path: Path) -> None:
    """Needs 2 CUDA devices: accelerate starts two worker processes; the adapter comes back, written once, by the
    main process, and says two processes trained it; the chosen-over-rejected margin rises."""
    if launch.visible_cuda_devices() < 2:
        pytest.skip("needs 2 CUDA devices")
    from privtext.learn.dpo import preference_margins
    from privtext.learn.encode import HFPairEncoder

    learner = _learner(tiny, devices=2, batch_size=1, epochs=10)
    enc = HFPairEncoder(learner.generator.tokenizer, prompt_text=learner.prompt_text, max_length=64)
    tokens = enc.encode_all(PAIRS)
    before = preference_margins(learner.model, tokens, pad_id=enc.pad_id)
    res = launch.train_launched(learner, 0, PAIRS, tmp_path, processes=2, cpu=False)
    assert res["processes"] == 2 and res["launched"] is True
    after = preference_margins(learner.model, tokens, pad_id=enc.pad_id)
    assert float(np.mean(after - before)) > 0.3
