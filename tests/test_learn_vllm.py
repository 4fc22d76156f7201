"""Learning with the vLLM backend (issue 38, docs/learn.md "vLLM"): the adapter's three forms agree (the privtext
checkpoint, peft's folder vLLM's LoRARequest loads, and the merged checkpoint: same logits to 1e-5 as base +
adapter); with a stand-in ``vllm`` module (vLLM itself needs a CUDA GPU) a DPO round trains in the worker
subprocess on the tiny GPT-2's Hugging Face weights, every later generate call carries a LoRARequest for the saved
adapter, a resume serves the checkpointed adapter without training and the next round continues it; the merge
fallback restarts the engine once on the merged checkpoint; the configuration check names the keys. The real
engine runs in a ``gpu`` test."""

from __future__ import annotations

import importlib.machinery
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("trl")
pytest.importorskip("accelerate")

from privtext.errors import BackendError, ConfigError  # noqa: E402
from privtext.learn.adapter import adapter_meta, load_adapter, save_adapter  # noqa: E402
from privtext.learn.dpo import attach_lora  # noqa: E402
from privtext.learn.launch import run_worker as REAL_RUN_WORKER  # noqa: E402
from privtext.learn.options import DPOOptions  # noqa: E402
from tests.conftest import toy_preference_pairs  # noqa: E402

#: chosen: the friendly / fresh versions; rejected: the same sentence, slow / cold
PAIRS = toy_preference_pairs(3)
LEARN = {"kind": "dpo", "dpo": {"beta": 0.1, "lr": 5e-3, "batch_size": 3, "epochs": 2, "lora_r": 4,
                                "lora_alpha": 8, "device": "cpu"}}
IDS = [[3, 7, 9, 11, 4, 8, 12, 5]]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny(tiny_gpt2: Path) -> Path:
    return tiny_gpt2


def _model(path: Path | str):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path)).eval()


def _logits(model: Any) -> Any:
    with torch.no_grad():
        return model(input_ids=torch.tensor(IDS)).logits


def _adapted(tiny: Path, seed: int = 0) -> Any:
    """The tiny GPT-2 with a LoRA adapter whose B is not zero (a fresh adapter changes nothing)."""
    m = attach_lora(_model(tiny), DPOOptions(lora_r=4, lora_alpha=8), rng=np.random.default_rng(seed))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "lora_B" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return m.eval()


# ------------------------------------------------------------------ the adapter's three forms


def test_the_peft_export_and_the_merged_checkpoint_equal_base_plus_adapter(tiny: Path, tmp_path: Path) -> None:
    from peft import PeftModel

    from privtext.learn.vllm import export_peft, merge_adapter, merge_from_folder

    model = _adapted(tiny)
    want = _logits(model)
    assert float((want - _logits(_model(tiny))).abs().max()) > 1e-2  # the adapter matters
    save_adapter(model, tmp_path / "ckpt")
    peft_dir = export_peft(model, tmp_path / "peft")
    assert {"adapter_config.json", "adapter_model.safetensors"} <= {p.name for p in peft_dir.iterdir()}
    # peft's folder (what vLLM's LoRARequest loads) and privtext's checkpoint hold the same adapter
    served = PeftModel.from_pretrained(_model(tiny), str(peft_dir)).eval()
    assert torch.allclose(_logits(served), want, atol=1e-5, rtol=0)
    again = attach_lora(_model(tiny), DPOOptions(lora_r=4, lora_alpha=8), rng=np.random.default_rng(7))
    load_adapter(again, tmp_path / "ckpt")
    assert torch.allclose(_logits(again.eval()), want, atol=1e-5, rtol=0)
    # merged into the weights: a plain checkpoint with no adapter left, the same function
    from transformers import AutoTokenizer

    merge_adapter(model, tmp_path / "merged", tokenizer=AutoTokenizer.from_pretrained(str(tiny)))
    merged = _model(tmp_path / "merged")
    assert not any("lora" in n for n, _ in merged.named_parameters())
    assert torch.allclose(_logits(merged), want, atol=1e-5, rtol=0)
    assert (tmp_path / "merged" / "tokenizer.json").exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # written whole, renamed into place
    # rebuilt from the base and peft's folder (a restore whose merged folder was deleted)
    merge_from_folder(str(tiny), peft_dir, tmp_path / "rebuilt")
    assert torch.allclose(_logits(_model(tmp_path / "rebuilt")), want, atol=1e-5, rtol=0)


# ------------------------------------------------------------------ a stand-in vllm module


class FakeVLLM:
    """``vllm`` with ``LLM`` (records its arguments and every generate call), ``SamplingParams`` and
    ``vllm.lora.request.LoRARequest``; the tokenizer is the tiny model's."""

    def __init__(self, tiny: Path):
        from transformers import AutoTokenizer

        self.engines: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.sleeps: list[str] = []
        fake = self
        tok = AutoTokenizer.from_pretrained(str(tiny))

        class LLM:
            def __init__(self, **kw: Any):
                fake.engines.append(kw)

            def get_tokenizer(self) -> Any:
                return tok

            def generate(self, texts: list[str], params: list[Any], use_tqdm: bool = False, **kw: Any) -> list[Any]:
                fake.calls.append({"n": len(texts), **kw})
                return [types.SimpleNamespace(prompt_token_ids=[1], outputs=[types.SimpleNamespace(
                    text=f"text {i}", token_ids=[2])]) for i in range(len(texts))]

            def sleep(self, level: int = 1) -> None:
                fake.sleeps.append(f"sleep {level}")

            def wake_up(self) -> None:
                fake.sleeps.append("wake")

        class LoRARequest:
            def __init__(self, lora_name: str, lora_int_id: int, lora_path: str):
                self.lora_name, self.lora_int_id, self.lora_path = lora_name, lora_int_id, lora_path

        self.vllm = types.ModuleType("vllm")
        self.vllm.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
        self.vllm.LLM = LLM
        self.vllm.SamplingParams = lambda **kw: kw
        self.lora = types.ModuleType("vllm.lora")
        self.request = types.ModuleType("vllm.lora.request")
        self.request.LoRARequest = LoRARequest

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "vllm", self.vllm)
        monkeypatch.setitem(sys.modules, "vllm.lora", self.lora)
        monkeypatch.setitem(sys.modules, "vllm.lora.request", self.request)


def _generator(tiny: Path, **options: Any) -> Any:
    from privtext.generate import GeneratorContext, build_generator

    return build_generator({"backend": "vllm", "model": str(tiny), "max_tokens": 8, **options}, GeneratorContext())


def _learner(gen: Any, learn: dict[str, Any] = LEARN) -> Any:
    from privtext.learn.factory import build_learner

    learner = build_learner(learn, gen, label_info=lambda g: None, seed=3, name="tiny")
    learner.pairs = lambda *a, **k: list(PAIRS)  # the pair builders are tested on real releases elsewhere
    return learner


class WorkerSpy:
    """Records every worker command; runs it unless ``refuse`` (then a resume that trains fails the test)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, refuse: bool = False):
        from privtext.learn import launch

        self.commands: list[list[str]] = []
        real = REAL_RUN_WORKER

        def spy(cmd: list[str], **kw: Any) -> None:
            self.commands.append(list(cmd))
            if refuse:
                raise AssertionError("a finished step was trained again")
            real(cmd, **kw)

        monkeypatch.setattr(launch, "run_worker", spy)


def _arg(cmd: list[str], flag: str) -> str | None:
    return cmd[cmd.index(flag) + 1] if flag in cmd else None


def test_a_vllm_round_is_served_through_a_lora_request_and_a_resume_reloads_it(
        tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from privtext.learn.vllm import VLLMDPOLearner

    fake = FakeVLLM(tiny)
    fake.install(monkeypatch)
    gen = _generator(tiny, enable_lora=True, max_lora_rank=8)
    engine = fake.engines[-1]
    assert engine["enable_lora"] is True and engine["max_lora_rank"] == 8 and engine["max_loras"] == 1
    learner = _learner(gen)
    assert isinstance(learner, VLLMDPOLearner) and learner.model is None  # no training copy in this process
    spy = WorkerSpy(monkeypatch)
    step0 = tmp_path / "iter_000" / "learn"
    rec = learner.step(0, None, None, folder=step0)
    assert not rec.resumed and rec.pairs == len(PAIRS) and rec.trained["launched"] is True
    assert rec.trained["processes"] == 1 and rec.trained["steps"] == 4  # 2 epochs × ⌈6 / 3⌉
    (cmd,) = spy.commands
    assert cmd[1:3] == ["-m", "accelerate.commands.launch"] and _arg(cmd, "--num_processes") == "1"
    assert "--cpu" in cmd and "--multi_gpu" not in cmd and _arg(cmd, "-m") == "accelerate.commands.launch"
    assert cmd[cmd.index("privtext.learn.worker") - 1] == "-m" and _arg(cmd, "--model") == str(tiny)
    assert _arg(cmd, "--adapter-in") is None and _arg(cmd, "--peft-out") == str(step0 / "peft")
    assert _arg(cmd, "--merged-out") is None  # serve: lora
    # the records the worker trained on: the generator's rendered prompt and the pairs' texts, nothing else
    lines = (step0 / "launch" / "records.jsonl").read_text().splitlines()
    assert [json.loads(x)["chosen"] for x in lines] == [p.chosen for p in PAIRS]
    # the request every later generate call carries: the adapter saved with the step, a new id per round
    req = gen.lora_request
    assert req.lora_path == str(step0 / "peft") and req.lora_int_id == 1 and req.lora_name == "privtext-iter-000"
    assert gen.random(None, 3, rng=np.random.default_rng(0)) == ["text 0", "text 1", "text 2"]
    assert fake.calls[-1]["lora_request"] is req
    # the peft folder vLLM loads is the trained adapter the checkpoint holds (and it did train)
    from peft import PeftModel

    ckpt = attach_lora(_model(tiny), DPOOptions(**LEARN["dpo"]), rng=np.random.default_rng(1))
    load_adapter(ckpt, step0)
    served = PeftModel.from_pretrained(_model(tiny), str(step0 / "peft")).eval()
    assert torch.allclose(_logits(served), _logits(ckpt.eval()), atol=1e-5, rtol=0)
    assert float((_logits(served) - _logits(_model(tiny))).abs().max()) > 1e-4
    assert adapter_meta(step0)["pairs"] == len(PAIRS)

    # resume: a new engine and learner; the finished step is served again, nothing is trained
    gen2 = _generator(tiny, enable_lora=True, max_lora_rank=8)
    learner2 = _learner(gen2)
    refuse = WorkerSpy(monkeypatch, refuse=True)
    again = learner2.step(0, None, None, folder=step0)
    assert again.resumed and refuse.commands == [] and again.trained == rec.trained
    assert gen2.lora_request.lora_path == str(step0 / "peft") and gen2.lora_request.lora_int_id == 1
    # the next round continues the checkpointed adapter, under a new id
    spy2 = WorkerSpy(monkeypatch)
    step1 = tmp_path / "iter_001" / "learn"
    learner2.step(1, None, None, folder=step1)
    assert _arg(spy2.commands[-1], "--adapter-in") == str(step0)
    assert gen2.lora_request.lora_path == str(step1 / "peft") and gen2.lora_request.lora_int_id == 2
    gen2.random(None, 2, rng=np.random.default_rng(0))
    assert fake.calls[-1]["lora_request"].lora_path == str(step1 / "peft")


def test_the_merge_fallback_restarts_the_engine_once_on_the_merged_weights(
        tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    fake = FakeVLLM(tiny)
    fake.install(monkeypatch)
    gen = _generator(tiny, sleep_while_learning=True)
    assert "enable_lora" not in fake.engines[-1] and fake.engines[-1]["enable_sleep_mode"] is True
    learn = {**LEARN, "dpo": {**LEARN["dpo"], "serve": "merge"}}
    learner = _learner(gen, learn)
    spy = WorkerSpy(monkeypatch)
    step0 = tmp_path / "iter_000" / "learn"
    learner.step(0, None, None, folder=step0)
    assert _arg(spy.commands[-1], "--merged-out") == str(step0 / "merged")
    assert fake.sleeps == ["sleep 1", "wake"]  # asleep while the worker trained
    assert len(fake.engines) == 1 and gen.lora_request is None  # restarted lazily, at the next call
    gen.random(None, 2, rng=np.random.default_rng(0))
    assert len(fake.engines) == 2 and fake.engines[-1]["model"] == str(step0 / "merged")
    assert fake.engines[-1]["tokenizer"] == str(tiny) and "lora_request" not in fake.calls[-1]
    # the merged checkpoint is base + the checkpointed adapter
    ckpt = attach_lora(_model(tiny), DPOOptions(**LEARN["dpo"]), rng=np.random.default_rng(1))
    load_adapter(ckpt, step0)
    assert torch.allclose(_logits(_model(step0 / "merged")), _logits(ckpt.eval()), atol=1e-5, rtol=0)
    # resume with the merged folder deleted: rebuilt from peft/, not retrained; one restart however many restores
    shutil.rmtree(step0 / "merged")
    gen2 = _generator(tiny)
    learner2 = _learner(gen2, learn)
    refuse = WorkerSpy(monkeypatch, refuse=True)
    assert learner2.step(0, None, None, folder=step0).resumed and refuse.commands == []
    learner2.step(0, None, None, folder=step0)
    n = len(fake.engines)
    gen2.random(None, 2, rng=np.random.default_rng(0))
    assert len(fake.engines) == n + 1 and fake.engines[-1]["model"] == str(step0 / "merged")
    assert torch.allclose(_logits(_model(step0 / "merged")), _logits(ckpt.eval()), atol=1e-5, rtol=0)


def test_use_adapter_refuses_an_engine_without_lora_and_a_folder_without_an_adapter(
        tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeVLLM(tiny).install(monkeypatch)
    with pytest.raises(BackendError, match="enable_lora"):
        _generator(tiny).use_adapter(tmp_path, name="x", lora_id=1)
    with pytest.raises(BackendError, match=r"adapter_config\.json"):
        _generator(tiny, enable_lora=True).use_adapter(tmp_path, name="x", lora_id=1)
    with pytest.raises(ConfigError, match=r"generator\.enable_lora"):
        _learner(_generator(tiny))


# ------------------------------------------------------------------ the configuration check


def _config(generator: dict[str, Any], dpo: dict[str, Any]) -> Any:
    from privtext.config import GeneratorConfig

    return types.SimpleNamespace(evolution=types.SimpleNamespace(learn={"kind": "dpo", "dpo": dpo},
                                                                 final="population"),
                                 generator=GeneratorConfig(**generator))


@pytest.mark.parametrize("generator,dpo,words", [
    ({"backend": "vllm", "model": "m"}, {}, ["evolution.learn.dpo.serve", "generator.enable_lora: true"]),
    ({"backend": "vllm", "model": "m", "enable_lora": True}, {"lora_r": 32},
     ["evolution.learn.dpo.lora_r: 32", "max_lora_rank 16"]),
    ({"backend": "vllm", "model": "m", "enable_lora": True}, {"trainer": "native"}, ["dpo.trainer: native"]),
    ({"backend": "lm"}, {"devices": 2}, ["evolution.learn.dpo.devices: 2", "lm generator"]),
])
def test_the_config_check_names_the_key(generator: dict[str, Any], dpo: dict[str, Any], words: list[str]) -> None:
    from privtext.learn.options import check_learn_config

    with pytest.raises(ConfigError) as e:
        check_learn_config(_config(generator, dpo), learns=True, method="augpe")
    for w in words:
        assert w in str(e.value)


def test_the_config_check_accepts_vllm_with_lora_or_merge() -> None:
    from privtext.learn.options import check_learn_config

    o = check_learn_config(_config({"backend": "vllm", "model": "m", "enable_lora": True, "max_lora_rank": 8},
                                   {"lora_r": 8}), learns=True, method="augpe")
    assert o.dpo.serve == "lora"
    o = check_learn_config(_config({"backend": "vllm", "model": "m"}, {"serve": "merge"}), learns=True,
                           method="augpe")
    assert o.dpo.serve == "merge"


# ------------------------------------------------------------------ the real engine


@pytest.mark.gpu
def test_vllm_real_engine_generates_with_the_trained_adapter(tmp_path: Path) -> None:
    """Needs a CUDA GPU, vllm, and a model folder vLLM serves LoRA on (PRIVTEXT_VLLM_MODEL, e.g. a small Llama or
    Qwen2 checkpoint): one DPO round in the worker on the GPU (vLLM asleep meanwhile), then greedy generation
    through vLLM carries the round's LoRARequest and differs from the base model's greedy text."""
    pytest.importorskip("vllm")
    model = os.environ.get("PRIVTEXT_VLLM_MODEL")
    if not model or not torch.cuda.is_available():
        pytest.skip("set PRIVTEXT_VLLM_MODEL and run on a CUDA machine")
    from privtext.generate import GeneratorContext, build_generator

    gen = build_generator({"backend": "vllm", "model": model, "max_tokens": 16, "temperature": 0,
                           "enable_lora": True, "max_lora_rank": 8, "gpu_memory_utilization": 0.4,
                           "sleep_while_learning": True}, GeneratorContext())
    learn = {"kind": "dpo", "dpo": {"beta": 0.5, "lr": 5e-3, "batch_size": 3, "epochs": 8, "lora_r": 8,
                                    "lora_alpha": 16}}
    learner = _learner(gen, learn)
    base = gen.random(None, 2, rng=np.random.default_rng(0))
    rec = learner.step(0, None, None, folder=tmp_path / "iter_000" / "learn")
    assert rec.trained["launched"] and gen.lora_request is not None
    tuned = gen.random(None, 2, rng=np.random.default_rng(0))
    assert tuned != base
    gen.close()
