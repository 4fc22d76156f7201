"""The causal language models ``method: dpft`` fine-tunes: one interface over the small LM trained here on the
public corpus (:mod:`privtext.generate.lm`) and any Hugging Face causal LM (full fine-tuning, or LoRA through
peft).

A :class:`TrainableLM` turns a record (text + public label values) into a training sequence, a label into a
sampling prompt, and samples texts; it names the trainable parameters (the ones DP-SGD updates and a release
keeps) and says in words where the model's weights came from (the statement lists it as public).

* :class:`PublicSmallLM` — :func:`~privtext.generate.lm.build_public_lm` (cached by corpus and settings): the
  labels are control codes (``<|label1=Business Category: Bars|>``), a record is the *free* format
  ``<|bos|> codes <|text|> text <|eos|>`` (:meth:`~privtext.generate.lm.ControlEncoder.record`); full fine-tuning
  (every parameter), or LoRA adapters (``dpft.lora``; peft's default for GPT-2 is ``c_attn``).
* :class:`HFCausalLM` — ``AutoModelForCausalLM`` from a local folder or the hub cache: the labels are a plain-text
  header (``label1: Business Category: Bars`` on its own line, one per column), then the text and the
  tokenizer's end-of-text token; full fine-tuning, or LoRA adapters (``dpft.lora``) on the named modules with
  the base weights frozen.

A sequence longer than ``max_length`` tokens keeps its first ``max_length`` (without the end token): a record
then contributes only its beginning, as the statement says.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ...errors import BackendError, ConfigError, MissingDependencyError
from ...rng import spawn_seed


def prompt_length(seq: Sequence[int], prompt: Sequence[int]) -> int:
    """How many leading tokens of the training sequence ``seq`` are its sampling prompt (their common prefix:
    a tokenizer may merge the prompt's last token with the text's first)."""
    n = 0
    for a, b in zip(seq, prompt, strict=False):
        if a != b:
            break
        n += 1
    return n


class TrainableLM(Protocol):
    model: Any
    pad_id: int
    origin: str

    def training_sequence(self, text: str, label: Mapping[str, str] | None) -> list[int]: ...

    def prompt(self, label: Mapping[str, str] | None) -> list[int]: ...

    def render(self, ids: Sequence[int]) -> str: ...

    def sample(self, prompts: Sequence[Sequence[int]], rng: np.random.Generator,
               stats: dict[str, int]) -> list[str]: ...

    def trainable(self) -> list[tuple[str, Any]]: ...


@dataclass(frozen=True)
class SequenceLoss:
    """The per-step loss of a DP-SGD run on token sequences: ``make(model, device)(indices)`` is the mean over those
    records of each record's own mean next-token loss (Opacus' ``loss_reduction="mean"``). A picklable value, so
    the driver and every worker compute the same loss.

    ``starts[i]``: the tokens of sequence ``i`` before this index are its sampling prompt (``<|bos|>``, the label
    codes, ``<|text|>``, or a model's label header): they are inputs, not targets, so the loss is the text's (and
    its end's) given the labels — what sampling asks of the model. ``None``: every token is a target (the codes
    too, which teaches the label prior that the DP label histogram already gives)."""

    seqs: Sequence[Sequence[int]]
    pad_id: int
    starts: Sequence[int] | None = None

    def make(self, model: Any, device: Any) -> Callable[[np.ndarray], Any]:
        from ...generate.lm.train import IGNORE, collate, sequence_losses

        def loss_of(idx: np.ndarray) -> Any:
            batch = collate([self.seqs[int(i)] for i in idx], pad_id=self.pad_id, device=device)
            if self.starts is not None:  # the prompt's tokens are given, not targets
                for r, i in enumerate(idx):
                    batch["labels"][r, :int(self.starts[int(i)])] = IGNORE
            return sequence_losses(model, batch).mean()

        return loss_of


def _distinct_words(values: Sequence[str]) -> list[str]:
    """Each value without the words every value of its column shares at the start and the end
    (``Business Category: Bars`` → ``Bars``, ``Review Stars: 4.0`` → ``4.0``); a value left empty keeps its words."""
    split = [v.split() for v in values]
    if len(split) < 2:
        return list(values)
    head = 0
    while all(len(w) > head for w in split) and len({w[head] for w in split}) == 1:
        head += 1
    tail = 0
    while all(len(w) > head + tail for w in split) and len({w[len(w) - 1 - tail] for w in split}) == 1:
        tail += 1
    return [" ".join(w[head:len(w) - tail]) or v for w, v in zip(split, values, strict=True)]


def init_codes_from_their_words(lm: Any, tokens: Sequence[str]) -> None:
    """Set the embedding rows of the label codes ``tokens`` (reserved for values no public text carries, so
    pretraining never fed them: the output softmax only pushed them all the same way, and they end up nearly
    parallel — cosine ≈ 0.98 on the Yelp public split — which fine-tuning cannot tell apart) to the mean public
    embedding of the words that tell the value from the column's other values, rescaled to the mean norm of the
    text tokens' rows. Uses the public schema and the public model only (no private data); the rows of codes the
    public corpus trained are left alone. Deterministic: the control and every fine-tuned run start alike."""
    import torch

    book = lm.encoder.codebook
    wanted = set(tokens)
    wte = lm.model.get_input_embeddings().weight
    with torch.no_grad():
        n_text = wte[lm.encoder.n_special:]
        scale = float(n_text.norm(dim=1).mean())
        for col, values in zip(book.columns, book.values, strict=True):
            for value, words in zip(values, _distinct_words(list(values)), strict=True):
                tok = book.label_token(col, value)
                if tok not in wanted:
                    continue
                ids = lm.encoder.text_ids(words)
                if not ids:
                    continue
                v = wte[ids].float().mean(dim=0)
                wte[lm.encoder.label_id[(col, value)]] = (v * (scale / max(float(v.norm()), 1e-12))).to(wte.dtype)


def _truncate(ids: list[int], max_length: int) -> list[int]:
    return ids if len(ids) <= max_length else ids[:max_length]


class PublicSmallLM:
    """The small GPT-2 of :mod:`privtext.generate.lm`, trained on the public corpus (cached)."""

    def __init__(self, lm: Any, *, max_length: int, sampling: Any, lora: Mapping[str, Any] | None = None,
                 empty_retries: int = 2, train_codes: bool = False, init_seed: int | None = None):
        from ...generate.lm import PAD

        self.lm = lm
        # peft injects the adapters into lm.model in place (the PeftModel only wraps it), so lm.sample draws from
        # the adapted model; DP-SGD trains the PeftModel's trainable parameters, the adapters alone
        self.model = lm.model if lora is None else _with_lora(lm.model, lora, init_seed)
        self.encoder = lm.encoder
        self.pad_id = PAD
        self.max_length = min(int(max_length), lm.n_positions)
        self.sampling = sampling
        self.empty_retries = int(empty_retries)
        info = lm.info
        self.origin = (f"a GPT-2 of {info.get('parameters', 0) / 1e6:.2g} M parameters trained here on the public "
                       f"corpus ({info.get('public_texts', '?')} texts; privtext's lm generator)")
        untrained = list(info.get("untrained_codes") or ())
        if untrained:
            init_codes_from_their_words(lm, untrained)
            self.origin += (f", with {len(untrained)} label code(s) of the declared schema that no public text "
                            "carries, their embeddings set from the public embeddings of their values' words")
        if lora is not None:
            self.origin += f", with LoRA adapters (rank {lora['r']}) initialised as peft does"
        codes = sorted(set(self.encoder.label_id.values()))
        if train_codes and lora is not None and codes:  # full fine-tuning trains the embeddings already
            from .codedelta import attach_code_deltas

            attach_code_deltas(lm.model, codes)
            self.origin += f", and a trainable delta (starting at 0) on each of the {len(codes)} label codes' input "
            self.origin += "embeddings"

    def training_sequence(self, text: str, label: Mapping[str, str] | None) -> list[int]:
        return _truncate(self.encoder.record(text, label), self.max_length)

    def prompt(self, label: Mapping[str, str] | None) -> list[int]:
        return self.encoder.free(self.encoder.label_ids(label)[0], None)

    def render(self, ids: Sequence[int]) -> str:
        return str(self.encoder.render(ids))

    def sample(self, prompts: Sequence[Sequence[int]], rng: np.random.Generator, stats: dict[str, int]) -> list[str]:
        out = [""] * len(prompts)
        todo = list(range(len(prompts)))
        for _ in range(self.empty_retries + 1):
            if not todo:
                break
            new = self.lm.sample([prompts[i] for i in todo], rng, settings=self.sampling, stats=stats)
            for i, ids in zip(todo, new, strict=True):
                out[i] = self.encoder.decode(ids)
            todo = [i for i in todo if not out[i]]
        return out

    def trainable(self) -> list[tuple[str, Any]]:
        return [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]


class HFCausalLM:
    """A Hugging Face causal LM (local folder or hub cache), fully fine-tuned or with LoRA adapters."""

    def __init__(self, name: str, *, device: Any, max_length: int, lora: Mapping[str, Any] | None,
                 temperature: float, top_p: float, top_k: int, max_new_tokens: int, min_new_tokens: int,
                 batch_size: int, init_seed: int | None = None):
        try:
            import transformers
        except ImportError:
            raise MissingDependencyError("transformers", "dpft", "method dpft with a Hugging Face model") from None
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(name)
            model = transformers.AutoModelForCausalLM.from_pretrained(name)
        except (OSError, ValueError) as e:
            raise BackendError(f"dpft.model: cannot load {name!r} with transformers: {e}") from None
        tok = self.tokenizer
        if tok.eos_token_id is None:
            raise ConfigError(f"dpft.model {name!r}: its tokenizer has no end-of-text token")
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        tok.padding_side = "left"
        self.pad_id = int(tok.pad_token_id)
        self.eos_id = int(tok.eos_token_id)
        self.start_id = int(tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id)
        n_pos = getattr(model.config, "n_positions", None) or getattr(model.config, "max_position_embeddings", None)
        self.max_length = min(int(max_length), int(n_pos)) if n_pos else int(max_length)
        n_params = sum(p.numel() for p in model.parameters())
        self.origin = f"the Hugging Face causal LM {name!r} ({n_params / 1e6:.3g} M parameters), as published"
        # on its device BEFORE peft wraps it (Opacus issue #820: with peft ≥ 0.14, a model moved after
        # get_peft_model could train LoRA weights that inference then could not use; the small public LM is built
        # on its device too). tests/test_dpft.py checks the adapters' update against per-record gradients.
        model = model.to(device)
        if lora is not None:
            model = _with_lora(model, lora, init_seed)
            self.origin += f", with LoRA adapters (rank {lora['r']}) initialised as peft does"
        self.model = model
        self.gen_kw = {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": top_k,
                       "max_new_tokens": max_new_tokens, "min_new_tokens": min_new_tokens,
                       "pad_token_id": self.pad_id, "eos_token_id": self.eos_id}
        self.batch_size = int(batch_size)

    @staticmethod
    def header(label: Mapping[str, str] | None) -> str:
        return "".join(f"{c}: {v}\n" for c, v in (label or {}).items())

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def training_sequence(self, text: str, label: Mapping[str, str] | None) -> list[int]:
        ids = [self.start_id, *self._ids(self.header(label) + " ".join(text.split())), self.eos_id]
        return _truncate(ids, self.max_length)

    def prompt(self, label: Mapping[str, str] | None) -> list[int]:
        return [self.start_id, *self._ids(self.header(label))]

    def render(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))

    def sample(self, prompts: Sequence[Sequence[int]], rng: np.random.Generator, stats: dict[str, int]) -> list[str]:
        import torch

        from ...generate.lm.tokenizer import strip_invalid

        device = next(self.model.parameters()).device
        out: list[str] = []
        was = self.model.training
        self.model.eval()
        try:
            for s in range(0, len(prompts), self.batch_size):
                rows = [list(p) for p in prompts[s:s + self.batch_size]]
                width = max(len(r) for r in rows)
                ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for i, r in enumerate(rows):
                    ids[i, width - len(r):] = torch.as_tensor(r)
                    mask[i, width - len(r):] = 1
                with _seeded_torch(spawn_seed(rng), device), torch.inference_mode():
                    gen = self.model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                                              **self.gen_kw)
                new = gen[:, width:].cpu().tolist()
                for row in new:
                    if self.eos_id in row:
                        row = row[:row.index(self.eos_id)]
                    # a row cut inside a multi-byte character decodes to U+FFFD: never written to a record
                    out.append(strip_invalid(str(self.tokenizer.decode([t for t in row if t != self.pad_id],
                                                                       skip_special_tokens=True))).strip())
                stats["calls"] = stats.get("calls", 0) + 1
                stats["prompt_tokens"] = stats.get("prompt_tokens", 0) + sum(len(r) for r in rows)
                stats["completion_tokens"] = stats.get("completion_tokens", 0) + sum(len(r) for r in new)
        finally:
            self.model.train(was)
        return out

    def trainable(self) -> list[tuple[str, Any]]:
        return [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]


def _with_lora(model: Any, lora: Mapping[str, Any], init_seed: int | None = None) -> Any:
    """``model`` with peft's LoRA adapters. Their A matrices start random (peft draws from torch's global
    generator): with ``init_seed`` that draw is seeded, so a run's adapters start the same for its seed (the run's
    public randomness), in any process and whatever ran before it."""
    try:
        import peft
    except ImportError:
        raise MissingDependencyError("peft", "dpft", "LoRA fine-tuning (dpft.lora)") from None
    cfg = peft.LoraConfig(r=int(lora["r"]), lora_alpha=float(lora.get("alpha") or 2 * int(lora["r"])),
                          lora_dropout=0.0, bias="none", target_modules=lora.get("target_modules"),
                          task_type="CAUSAL_LM")
    try:
        device = next(model.parameters()).device  # a CUDA model's adapters draw from the CUDA generator
        with contextlib.nullcontext() if init_seed is None else _seeded_torch(init_seed, device):
            return peft.get_peft_model(model, cfg)
    except ValueError as e:
        raise ConfigError(f"dpft.lora: {e} (set dpft.lora.target_modules to the model's attention/MLP module "
                          "names)") from None


@contextlib.contextmanager
def _seeded_torch(seed: int, device: Any) -> Iterator[None]:
    """torch's global generator(s) seeded for one ``generate`` call (``transformers`` draws from them), and
    restored afterwards."""
    import torch

    devices = [device.index or 0] if getattr(device, "type", "cpu") == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed % (2**63))
        yield


__all__ = ["HFCausalLM", "PublicSmallLM", "SequenceLoss", "TrainableLM", "prompt_length"]
