"""The papers' downstream protocol: fine-tune a Hugging Face encoder for sequence classification.

SecPE (§4) and Aug-PE fine-tune RoBERTa-base on the synthetic set and report accuracy on real test data. Here the
model is any ``AutoModelForSequenceClassification`` checkpoint, given by hub name (from the local cache; no
downloads happen here) or by a local folder; its tokenizer comes from the same place unless one is passed.

Training is a plain AdamW loop with linear warm-up/decay, on CUDA when available. Randomness (head
initialisation, shuffling, dropout) is drawn inside ``torch.random.fork_rng`` from a seed taken from the given
``rng``, so the caller's global torch state is left as it was. Needs ``pip install 'privtext[eval]'``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import BackendError, DataError, optional_import
from ..rng import spawn_seed


def _imports() -> tuple[Any, Any]:
    purpose = "fine-tuning a Hugging Face classifier"
    return (optional_import("torch", "eval", purpose, package="transformers"),
            optional_import("transformers", "eval", purpose))


class HFEncoderClassifier:
    """Fine-tune ``model`` (e.g. ``"roberta-base"`` or a local path) on (text, label) pairs.

    ``history`` holds the mean training loss of each logged window (every ``log_every`` steps and at the end).
    """

    name = "hf-finetune"

    def __init__(
        self,
        *,
        model: str = "roberta-base",
        tokenizer: Any = None,
        epochs: float = 3.0,
        batch_size: int = 16,
        lr: float = 2e-5,
        weight_decay: float = 0.01,
        warmup_fraction: float = 0.06,
        max_length: int = 128,
        max_steps: int | None = None,
        device: str | None = None,
        log_every: int = 10,
        eval_batch_size: int = 64,
    ):
        if epochs <= 0 and not max_steps:
            raise DataError(f"epochs must be positive, got {epochs!r}")
        if batch_size < 1:
            raise DataError(f"batch_size must be at least 1, got {batch_size!r}")
        if lr <= 0:
            raise DataError(f"lr must be positive, got {lr!r}")
        if not 0 <= warmup_fraction < 1:
            raise DataError(f"warmup_fraction must be in [0, 1), got {warmup_fraction!r}")
        self.model_name, self.tokenizer = model, tokenizer
        self.epochs, self.batch_size, self.lr, self.weight_decay = epochs, batch_size, lr, weight_decay
        self.warmup_fraction, self.max_length, self.max_steps = warmup_fraction, max_length, max_steps
        self.device, self.log_every, self.eval_batch_size = device, log_every, eval_batch_size
        self.history: list[float] = []
        self.classes: list[str] = []
        self._model: Any = None

    def _device(self, torch: Any) -> str:
        if self.device:
            return self.device
        return "cuda" if torch.cuda.is_available() else "cpu"

    def _load(self, transformers: Any, num_labels: int) -> tuple[Any, Any]:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        tok = self.tokenizer
        hf_logging = transformers.logging
        level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # the head is re-initialised on purpose; no load report
        try:
            if tok is None:
                tok = transformers.AutoTokenizer.from_pretrained(self.model_name)
            model = transformers.AutoModelForSequenceClassification.from_pretrained(
                self.model_name, num_labels=num_labels,
                id2label=dict(enumerate(self.classes)), label2id={c: i for i, c in enumerate(self.classes)},
                ignore_mismatched_sizes=True,
            )
        except OSError as e:
            raise BackendError(
                f"cannot load classifier model {self.model_name!r} offline ({e}); pass a local folder or a model "
                "already in the Hugging Face cache"
            ) from None
        finally:
            hf_logging.set_verbosity(level)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token or tok.unk_token
            model.config.pad_token_id = tok.pad_token_id
        return tok, model

    def _encode(self, tok: Any, texts: Sequence[str]) -> Any:
        return tok(list(texts), truncation=True, max_length=self.max_length, padding=True, return_tensors="pt")

    def fit(self, texts: Sequence[str], labels: Sequence[str], *, rng: np.random.Generator) -> HFEncoderClassifier:
        torch, transformers = _imports()
        texts, labels = list(texts), [str(x) for x in labels]
        if len(texts) != len(labels) or not texts:
            raise DataError(f"fit needs equally many texts and labels (got {len(texts)} and {len(labels)})")
        self.classes = sorted(set(labels))
        index = {c: i for i, c in enumerate(self.classes)}
        y_all = torch.tensor([index[c] for c in labels], dtype=torch.long)
        device = self._device(torch)
        seed = spawn_seed(rng)
        with torch.random.fork_rng(devices=[torch.cuda.current_device()] if device.startswith("cuda") else []):
            torch.manual_seed(seed % 2**63)
            tok, model = self._load(transformers, len(self.classes))
            model.to(device)
            model.train()
            n = len(texts)
            steps_per_epoch = (n + self.batch_size - 1) // self.batch_size
            total = int(self.max_steps) if self.max_steps else max(1, round(self.epochs * steps_per_epoch))
            no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")
            groups = [
                {"params": [p for nm, p in model.named_parameters() if not any(k in nm for k in no_decay)],
                 "weight_decay": self.weight_decay},
                {"params": [p for nm, p in model.named_parameters() if any(k in nm for k in no_decay)],
                 "weight_decay": 0.0},
            ]
            opt = torch.optim.AdamW(groups, lr=self.lr)
            warm = int(self.warmup_fraction * total)
            sched = torch.optim.lr_scheduler.LambdaLR(
                opt, lambda s: (s + 1) / max(1, warm) if s < warm else max(0.0, (total - s) / max(1, total - warm))
            )
            gen = torch.Generator().manual_seed(seed % 2**63)
            order: list[int] = []
            window: list[float] = []
            self.history = []
            for step in range(total):
                if len(order) < self.batch_size:
                    order.extend(torch.randperm(n, generator=gen).tolist())
                idx, order = order[: self.batch_size], order[self.batch_size:]
                batch = self._encode(tok, [texts[i] for i in idx]).to(device)
                out = model(**batch, labels=y_all[idx].to(device))
                out.loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                window.append(float(out.loss.detach().cpu()))
                if len(window) >= self.log_every or step == total - 1:
                    self.history.append(float(np.mean(window)))
                    window = []
        model.eval()
        self._tok, self._model, self._dev = tok, model, device
        return self

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        torch, _ = _imports()
        if self._model is None:
            raise BackendError("predict before fit")
        out = []
        with torch.no_grad():
            for s in range(0, len(texts), self.eval_batch_size):
                batch = self._encode(self._tok, list(texts[s:s + self.eval_batch_size])).to(self._dev)
                out.append(torch.softmax(self._model(**batch).logits.float(), -1).cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, len(self.classes)), dtype=np.float32)

    def predict(self, texts: Sequence[str]) -> list[str]:
        p = self.predict_proba(texts)
        return [self.classes[int(i)] for i in p.argmax(1)] if len(p) else []


__all__ = ["HFEncoderClassifier"]
