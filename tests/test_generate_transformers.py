"""The transformers backend on a tiny randomly initialised GPT-2 (tokenizer trained in the test), and the vLLM
backend's request mapping (vLLM itself needs a GPU: the real test is marked ``gpu``)."""

from __future__ import annotations

import importlib.util
import os
import sys
import types

import numpy as np
import pytest

pytest.importorskip("transformers")
import torch

from privtext.atomicio import PromptLog
from privtext.errors import BackendError, ConfigError, MissingDependencyError
from privtext.generate import GeneratorContext, LabelInfo, VariationSpec, build_generator
from privtext.generate.vllm_backend import VLLMOptions, sampling_params
from privtext.testing import SIMPLE_CHAT_TEMPLATE, make_tiny_gpt2


@pytest.fixture(scope="module")
def plain_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(make_tiny_gpt2(tmp_path_factory.mktemp("plain")))


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(make_tiny_gpt2(tmp_path_factory.mktemp("chat"), chat_template=SIMPLE_CHAT_TEMPLATE))


def make(path: str, log: PromptLog | None = None, **opts):
    cfg = {"backend": "transformers", "model": path, "max_new_tokens": 5, "torch_threads": 1, **opts}
    return build_generator(cfg, GeneratorContext(prompt_log=log))


def test_plain_prompt_without_chat_template(plain_model: str) -> None:
    log = PromptLog(None)
    g = make(plain_model, log)
    assert not g.use_chat
    out = g.random(LabelInfo(("topic",), ("Topic: Food",)), 3, rng=np.random.default_rng(0))
    assert len(out) == 3
    rec = log.memory[0]
    assert isinstance(rec["prompt"], str) and "Topic: Food" in rec["prompt"]
    assert rec["prompt"].startswith(g.family.system)


def test_chat_template_path(chat_model: str) -> None:
    log = PromptLog(None)
    g = make(chat_model, log)
    assert g.use_chat
    prompt = g.family.random_prompt(None, np.random.default_rng(0))
    text, logged = g.render(prompt)
    assert text.startswith("<|system|> ") and text.endswith("<|assistant|>") and "<|user|> " in text
    assert logged == prompt.messages()
    out = g.seeded([["the food", "fresh"]], "review", rng=np.random.default_rng(0))
    assert len(out) == 1
    assert isinstance(log.memory[0]["prompt"], list) and log.memory[0]["prompt"][-1]["role"] == "user"
    # chat_template: never falls back to plain text
    assert not make(chat_model, chat_template="never").use_chat


def test_chat_template_always_needs_one(plain_model: str) -> None:
    with pytest.raises(ConfigError, match="chat template"):
        make(plain_model, chat_template="always")


def test_global_torch_rng_is_untouched(plain_model: str) -> None:
    g = make(plain_model)
    state = torch.random.get_rng_state().clone()
    a = g.random(None, 3, rng=np.random.default_rng(4))
    assert torch.equal(state, torch.random.get_rng_state())
    torch.manual_seed(123)  # changing the global seed does not change the output
    assert g.random(None, 3, rng=np.random.default_rng(4)) == a


def test_batches_and_token_stats(plain_model: str) -> None:
    g = make(plain_model, batch_size=2, max_new_tokens=4, min_new_tokens=4)
    out = g.variation(["the food was great ."] * 5, None, VariationSpec(kind="paraphrase"),
                      rng=np.random.default_rng(0))
    assert len(out) == 5
    assert g.stats.calls >= 3  # ceil(5 / 2) batches (plus any empty-reply retries)
    assert g.stats.prompt_tokens > 5 * 10
    assert 5 * 4 <= g.stats.completion_tokens <= g.stats.calls * 2 * 4
    assert g.stats.seconds > 0


def test_generation_kwargs_mapping(plain_model: str) -> None:
    g = make(plain_model, temperature=0.7, top_p=0.9, top_k=40, no_repeat_ngram_size=3, repetition_penalty=1.2,
             max_new_tokens=9)
    kw = g.generation_kwargs()
    assert kw["do_sample"] is True and kw["temperature"] == 0.7 and kw["top_p"] == 0.9 and kw["top_k"] == 40
    assert kw["no_repeat_ngram_size"] == 3 and kw["repetition_penalty"] == 1.2 and kw["max_new_tokens"] == 9
    assert kw["pad_token_id"] == g.tokenizer.pad_token_id
    assert g.tokenizer.padding_side == "left"


def test_left_padding_makes_batching_transparent(plain_model: str) -> None:
    """Greedy decoding of a short prompt gives the same tokens alone and batched with a long one."""
    g = make(plain_model)
    tok, model = g.tokenizer, g.model
    short, long_ = "the food was", "the staff seemed friendly as usual and the pizza was fresh in the end"
    with torch.inference_mode():
        alone = model.generate(**tok([short], return_tensors="pt"), do_sample=False, max_new_tokens=4,
                               pad_token_id=tok.pad_token_id)
        enc = tok([short, long_], return_tensors="pt", padding=True)
        both = model.generate(**enc, do_sample=False, max_new_tokens=4, pad_token_id=tok.pad_token_id)
    assert alone[0, -4:].tolist() == both[0, -4:].tolist()


def test_bad_model_path_is_a_backend_error(tmp_path) -> None:
    with pytest.raises(BackendError, match="cannot load model"):
        make(str(tmp_path / "missing-model"))


def test_unknown_option(plain_model: str) -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'max_new_tokens'"):
        make(plain_model, max_new_token=5)


def test_cuda_device_without_cuda(plain_model: str) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ConfigError, match="CUDA is not available"):
        make(plain_model, device="cuda")


# ------------------------------------------------------------------------------------------------ vLLM


def test_vllm_sampling_params_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    class SamplingParams:
        def __init__(self, **kw):
            calls.append(kw)

    stub = types.SimpleNamespace(SamplingParams=SamplingParams)
    monkeypatch.setitem(sys.modules, "vllm", stub)
    opts = VLLMOptions(model="m", temperature=0.8, top_p=0.95, top_k=0, max_tokens=77, stop=["###"])
    sampling_params(stub, opts, seed=42)
    kw = calls[-1]
    assert kw["temperature"] == 0.8 and kw["top_p"] == 0.95 and kw["max_tokens"] == 77 and kw["n"] == 1
    assert kw["top_k"] == -1 and kw["seed"] == 42 and kw["stop"] == ["###"]
    sampling_params(stub, VLLMOptions(model="m", top_k=50), seed=1)
    assert calls[-1]["top_k"] == 50 and "stop" not in calls[-1]


def test_vllm_missing_is_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    with pytest.raises(MissingDependencyError, match=r"privtext\[vllm\]"):
        build_generator({"backend": "vllm", "model": "any"}, GeneratorContext())


def test_vllm_options_are_validated() -> None:
    with pytest.raises(ConfigError, match="gpu_memory_utilization"):
        build_generator({"backend": "vllm", "model": "m", "gpu_memory_utilization": 1.5}, GeneratorContext())


@pytest.mark.gpu
def test_vllm_real_engine() -> None:
    """Needs a CUDA GPU, vllm, and a model folder in PRIVTEXT_VLLM_MODEL."""
    pytest.importorskip("vllm")
    model = os.environ.get("PRIVTEXT_VLLM_MODEL")
    if not model or not torch.cuda.is_available():
        pytest.skip("set PRIVTEXT_VLLM_MODEL and run on a CUDA machine")
    log = PromptLog(None)
    g = build_generator({"backend": "vllm", "model": model, "max_tokens": 32, "gpu_memory_utilization": 0.5},
                        GeneratorContext(prompt_log=log))
    out = g.random(None, 4, rng=np.random.default_rng(0))
    assert len(out) == 4 and all(isinstance(t, str) for t in out)
    assert out == g.random(None, 4, rng=np.random.default_rng(0))  # per-request seeds
    assert log.count == 8 and g.stats.completion_tokens > 0
    g.close()


# ------------------------------------------------------------------------------------------------ backend: local


def test_local_backend_without_cuda_is_transformers(plain_model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from privtext.generate import local
    from privtext.generate.hf import TransformersGenerator

    monkeypatch.setattr(local, "cuda_available", lambda: False)
    log = PromptLog(None)
    g = build_generator({"backend": "local", "model": plain_model, "max_new_tokens": 5, "temperature": 0.7,
                         "transformers": {"torch_threads": 1}}, GeneratorContext(prompt_log=log))
    assert isinstance(g, TransformersGenerator)
    assert g.options.max_new_tokens == 5 and g.options.temperature == 0.7 and g.options.torch_threads == 1
    assert g.engine_choice == {"engine": "transformers", "why": "no CUDA GPU"}
    assert len(g.random(None, 2, rng=np.random.default_rng(0))) == 2 and len(log.memory) == 2
    monkeypatch.setattr(local, "cuda_available", lambda: True)
    monkeypatch.setattr(local, "vllm_installed", lambda: False)
    g = build_generator({"backend": "local", "model": plain_model, "max_new_tokens": 5,
                         "transformers": {"device": "cpu"}}, GeneratorContext())
    assert isinstance(g, TransformersGenerator) and "no vllm" in g.engine_choice["why"]


def test_local_backend_with_cuda_and_vllm_is_vllm_with_prefix_caching(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine choice and the option mapping (vLLM itself needs a GPU: a stub engine records its arguments)."""
    import importlib.machinery

    from privtext.generate import local
    from privtext.generate.vllm_backend import VLLMGenerator

    engines: list[dict] = []

    class LLM:
        def __init__(self, **kw):
            engines.append(kw)

        def get_tokenizer(self):
            return types.SimpleNamespace(chat_template=None)

        def generate(self, texts, params, use_tqdm=False):
            return [types.SimpleNamespace(prompt_token_ids=[1, 2], outputs=[types.SimpleNamespace(
                text=f" text {i} ", token_ids=[3])]) for i in range(len(texts))]

    stub = types.ModuleType("vllm")
    stub.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    stub.LLM = LLM
    stub.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", stub)
    monkeypatch.setattr(local, "cuda_available", lambda: True)
    g = build_generator({"backend": "local", "model": "/models/m", "max_new_tokens": 7, "min_new_tokens": 2,
                         "vllm": {"gpu_memory_utilization": 0.5}}, GeneratorContext())
    assert isinstance(g, VLLMGenerator) and g.engine_choice["engine"] == "vllm"
    assert g.options.max_tokens == 7 and g.options.min_tokens == 2
    kw = engines[-1]
    assert kw["model"] == "/models/m" and kw["enable_prefix_caching"] is True and kw["gpu_memory_utilization"] == 0.5
    assert g.random(None, 3, rng=np.random.default_rng(0)) == ["text 0", "text 1", "text 2"]
    # engine: transformers forces transformers even here; a bad engine or option names the key
    with pytest.raises(ConfigError, match="engine"):
        build_generator({"backend": "local", "model": "m", "engine": "tgi"}, GeneratorContext())
    with pytest.raises(ConfigError, match="gpu_memory_utilization"):
        build_generator({"backend": "local", "model": "m", "vllm": {"gpu_memory_utilization": 2}},
                        GeneratorContext())
