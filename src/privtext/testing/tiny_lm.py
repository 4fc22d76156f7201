"""A tiny randomly initialised GPT-2 with a tokenizer trained on the spot: a real Hugging Face model folder for
testing the ``transformers`` backend without downloading weights.

    path = make_tiny_gpt2(tmp_path / "tiny", chat_template=SIMPLE_CHAT_TEMPLATE)
    cfg = {"backend": "transformers", "model": str(path), "max_new_tokens": 8}
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

SIMPLE_CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def default_sentences() -> list[str]:
    subjects = ["the food", "our waiter", "the room", "this study", "the coffee", "the staff", "the results",
                "the pizza", "the method", "the hotel"]
    verbs = ["was", "seemed", "looked", "felt", "is"]
    adjs = ["great", "slow", "friendly", "clean", "significant", "cold", "fresh", "expensive", "clear", "noisy"]
    tails = ["today", "again", "as usual", "for us", "in the end"]
    out = [f"{s} {v} {a} {t} ." for s, v, a, t in itertools.product(subjects, verbs, adjs, tails)]
    return out[::3]


def make_tiny_gpt2(path: str | Path, *, sentences: Sequence[str] | None = None, chat_template: str | None = None,
                   n_layer: int = 2, n_embd: int = 32, n_head: int = 2, seed: int = 0) -> Path:
    """Train a word-level tokenizer on ``sentences``, initialise a small GPT-2 and save both to ``path``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    sents = list(sentences) if sentences is not None else default_sentences()
    tk = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.decoder = decoders.WordPiece()  # joins word-level tokens with spaces
    specials = ["<pad>", "<unk>", "<eos>", "<|system|>", "<|user|>", "<|assistant|>"]
    tk.train_from_iterator(sents, trainers.WordLevelTrainer(special_tokens=specials))
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>",
                                  bos_token="<eos>")
    if chat_template is not None:
        tok.chat_template = chat_template
    tok.save_pretrained(path)
    cfg = GPT2Config(vocab_size=len(tok), n_positions=1024, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
                     bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
                     pad_token_id=tok.pad_token_id)
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        model = GPT2LMHeadModel(cfg)
    model.save_pretrained(path)
    return path
