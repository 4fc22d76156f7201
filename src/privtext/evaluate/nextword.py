"""Next-word prediction accuracy for unlabelled corpora (SecPE's PubMed protocol, CPU-sized).

SecPE fine-tunes BERT on synthetic PubMed abstracts and reports next-word prediction accuracy on real abstracts.
Here a small language model is trained from scratch on the synthetic text for a bounded number of steps and
scored on real text:

* text is lower-cased and split into words (``\\w+``); the vocabulary is the ``vocab_size`` most frequent words of
  the *training* (synthetic) text plus ``<unk>`` and ``<eos>`` (the document separator);
* the model is ``"lstm"`` (embedding → 1-layer LSTM → tied-size softmax, pure torch) or ``"gpt2"`` (a 2-layer
  GPT-2 built from ``transformers.GPT2Config``, randomly initialised; needs ``privtext[eval]``);
* it trains on random windows of ``seq_len + 1`` words from the concatenated training stream;
* evaluation cuts each real document (prefixed by ``<eos>``) into windows of the same length and predicts every
  word from the words before it in its window. The prediction is the arg-max over known words (never ``<unk>``),
  so a real word outside the synthetic vocabulary always counts as a miss.

Reported: ``accuracy`` (all real words), ``accuracy_in_vocab`` (words the vocabulary knows), ``oov_rate`` and the
accuracy of always predicting the most frequent training word (``unigram_accuracy``) for scale.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DataError, optional_import
from ..rng import spawn_seed
from .results import AsDict

_WORD = re.compile(r"\w+", re.UNICODE)
UNK, EOS = 0, 1


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class NextWordResult(AsDict):
    accuracy: float
    accuracy_in_vocab: float
    oov_rate: float
    unigram_accuracy: float
    n_predictions: int
    vocab_size: int
    train_tokens: int
    steps: int
    model: str
    loss_first: float
    loss_last: float
    losses: list[float] = field(default_factory=list)


def _torch() -> Any:
    return optional_import("torch", "eval", "next-word prediction")


def _build_model(kind: str, vocab: int, *, seq_len: int, emb_dim: int, hidden: int, layers: int, heads: int) -> Any:
    torch = _torch()
    nn = torch.nn
    if kind == "lstm":

        class WordLSTM(nn.Module):  # type: ignore[misc,name-defined]
            def __init__(self) -> None:
                super().__init__()
                self.emb = nn.Embedding(vocab, emb_dim)
                self.rnn = nn.LSTM(emb_dim, hidden, num_layers=layers, batch_first=True)
                self.drop = nn.Dropout(0.1)
                self.out = nn.Linear(hidden, vocab)

            def forward(self, x: Any) -> Any:
                h, _ = self.rnn(self.drop(self.emb(x)))
                return self.out(self.drop(h))

        return WordLSTM()
    if kind == "gpt2":
        transformers = optional_import("transformers", "eval", "the GPT-2 next-word model")
        GPT2Config, GPT2LMHeadModel = transformers.GPT2Config, transformers.GPT2LMHeadModel
        cfg = GPT2Config(vocab_size=vocab, n_positions=seq_len + 1, n_embd=emb_dim, n_layer=layers, n_head=heads,
                         bos_token_id=EOS, eos_token_id=EOS)
        inner = GPT2LMHeadModel(cfg)

        class GPT2Wrap(nn.Module):  # type: ignore[misc,name-defined]
            def __init__(self) -> None:
                super().__init__()
                self.m = inner

            def forward(self, x: Any) -> Any:
                return self.m(input_ids=x).logits

        return GPT2Wrap()
    raise DataError(f"unknown next-word model {kind!r}; valid names: gpt2, lstm")


def next_word_accuracy(
    train_texts: Sequence[str],
    test_texts: Sequence[str],
    *,
    rng: np.random.Generator,
    model: str = "lstm",
    vocab_size: int = 5000,
    seq_len: int = 32,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 3e-3,
    emb_dim: int = 64,
    hidden: int = 128,
    layers: int = 1,
    heads: int = 4,
    max_test_words: int = 50_000,
    device: str | None = None,
) -> NextWordResult:
    """Train a small LM on ``train_texts`` (synthetic), return next-word accuracy on ``test_texts`` (real)."""
    torch = _torch()
    if steps < 1 or seq_len < 2 or batch_size < 1 or vocab_size < 2:
        raise DataError(
            f"next-word options out of range: steps={steps}, seq_len={seq_len}, batch_size={batch_size}, "
            f"vocab_size={vocab_size}"
        )
    counts, stoi, stream = _training_stream(train_texts, vocab_size)
    V = len(stoi)
    data = torch.tensor(stream, dtype=torch.long)
    windows, masks = _test_windows(test_texts, stoi, seq_len, max_test_words)
    W = torch.tensor(windows, dtype=torch.long)
    M = torch.tensor(masks, dtype=torch.bool)
    targets = W[:, 1:][M]
    n_pred = int(targets.numel())
    oov = float((targets == UNK).float().mean())
    top = stoi[counts.most_common(1)[0][0]]
    unigram = float((targets == top).float().mean())

    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    seed = spawn_seed(rng)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed % 2**63)
        net = _build_model(model, V, seq_len=seq_len, emb_dim=emb_dim, hidden=hidden, layers=layers, heads=heads)
        net.to(dev)
        losses = _fit(net, data, V, seed=seed, steps=steps, batch_size=batch_size, lr=lr, seq_len=seq_len, dev=dev)
        correct = _correct_predictions(net, W, M, dev)
    in_vocab = n_pred - int((targets == UNK).sum())
    return NextWordResult(
        accuracy=correct / n_pred, accuracy_in_vocab=correct / in_vocab if in_vocab else 0.0, oov_rate=oov,
        unigram_accuracy=unigram, n_predictions=n_pred, vocab_size=V, train_tokens=len(stream), steps=steps,
        model=model, loss_first=losses[0], loss_last=losses[-1], losses=losses,
    )


def _training_stream(train_texts: Sequence[str], vocab_size: int) -> tuple[Counter[str], dict[str, int], list[int]]:
    """The training words' counts, the vocabulary (``<unk>``, ``<eos>``, then the ``vocab_size`` most frequent
    words) and the training text as one stream of ids, documents separated by ``<eos>``."""
    train_docs = [words(t) for t in train_texts]
    counts = Counter(w for d in train_docs for w in d)
    if not counts:
        raise DataError("next-word prediction needs training text with at least one word")
    itos = ["<unk>", "<eos>", *[w for w, _ in counts.most_common(vocab_size)]]
    stoi = {w: i for i, w in enumerate(itos)}
    stream: list[int] = []
    for d in train_docs:
        stream.append(EOS)
        stream.extend(stoi.get(w, UNK) for w in d)
    stream.append(EOS)
    return counts, stoi, stream


def _test_windows(test_texts: Sequence[str], stoi: dict[str, int], seq_len: int,
                  max_test_words: int) -> tuple[list[list[int]], list[list[int]]]:
    """Windows of the real text (each document prefixed by ``<eos>``), padded on the right, and the masks of the
    targets that count: at most ``max_test_words`` predictions."""
    windows, masks, left = [], [], max_test_words
    for t in test_texts:
        ids = [EOS, *(stoi.get(w, UNK) for w in words(t))]
        for s in range(0, len(ids) - 1, seq_len):
            if left <= 0:
                break
            chunk = ids[s:s + seq_len + 1][: left + 1]
            m = [1] * (len(chunk) - 1)
            left -= len(m)
            pad = seq_len + 1 - len(chunk)
            windows.append(chunk + [EOS] * pad)
            masks.append(m + [0] * pad)
        if left <= 0:
            break
    if not windows:
        raise DataError("next-word prediction needs test text with at least one word")
    return windows, masks


def _fit(net: Any, data: Any, V: int, *, seed: int, steps: int, batch_size: int, lr: float, seq_len: int,
         dev: str) -> list[float]:
    """Train ``net`` on random windows of ``data`` (Adam, one-cycle LR, clipped gradients); the mean loss over
    each twentieth of the steps."""
    torch = _torch()
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(seed % 2**63)
    span = max(1, data.numel() - seq_len - 1)
    lossf = torch.nn.CrossEntropyLoss()
    net.train()
    losses: list[float] = []
    window: list[float] = []
    for step in range(steps):
        starts = torch.randint(0, span, (batch_size,), generator=gen)
        idx = starts[:, None] + torch.arange(seq_len + 1)[None, :]
        idx = idx.clamp(max=data.numel() - 1)
        batch = data[idx].to(dev)
        logits = net(batch[:, :-1])
        loss = lossf(logits.reshape(-1, V), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        sched.step()
        window.append(float(loss.detach()))
        if len(window) == max(1, steps // 20) or step == steps - 1:
            losses.append(float(np.mean(window)))
            window = []
    return losses


def _correct_predictions(net: Any, W: Any, M: Any, dev: str) -> int:
    """How many masked targets of the windows ``W`` the trained ``net`` predicts (arg-max over known words)."""
    torch = _torch()
    net.eval()
    correct = 0
    with torch.no_grad():
        for s in range(0, W.shape[0], 256):
            wb, mb = W[s:s + 256].to(dev), M[s:s + 256].to(dev)
            logits = net(wb[:, :-1])
            logits[..., UNK] = -torch.inf
            pred = logits.argmax(-1)
            tgt = wb[:, 1:]
            correct += int(((pred == tgt) & mb & (tgt != UNK)).sum())
    return correct


__all__ = ["NextWordResult", "next_word_accuracy", "words"]
