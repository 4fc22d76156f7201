"""A small generator trained here on the public corpus (``generator: {backend: lm}``), and the pieces DP
fine-tuning reuses.

Modules: :mod:`.tokenizer` (byte-level BPE on the public text), :mod:`.keyphrases` (the public keyphrase
extractor), :mod:`.codes` (control codes: record → tokens, training formats), :mod:`.model` (GPT-2 sized for
the machine), :mod:`.train` (collate, per-sequence loss, one step, the loop), :mod:`.sample` (sampling given
control codes), :mod:`.cache` (the trained-model cache), :mod:`.build` (:func:`build_public_lm`: tokenizer +
model from a public corpus, cached) and :mod:`.backend` (the :class:`LMGenerator`).

Reuse for DP fine-tuning on private records::

    lm = build_public_lm(public_texts, public_labels)             # tokenizer, codes, model (cached)
    seqs = [lm.encoder.record(text, label) for text, label in records]
    batch = collate([seqs[i] for i in idx], pad_id=PAD, device=device)
    train_step(model, batch, optimizer, max_grad_norm=None)      # a DP optimiser clips per sample
    new = lm.sample([lm.encoder.free(lm.encoder.label_ids(label)[0], None)], rng)
"""

from .build import LMSettings, PublicLM, build_public_lm
from .codes import (
           ANSWER,
           BLANK,
           BOS,
           EOS,
           INFILL,
           PAD,
           SEP,
           SPECIALS,
           TEXT,
           CodeBook,
           ControlEncoder,
           FormatMix,
)
from .keyphrases import KeyphraseExtractor
from .model import SIZES, ModelShape, build_model, count_parameters, model_shape
from .sample import SamplingSettings, sample
from .train import TrainResult, batch_loss, collate, evaluate_loss, sequence_losses, train_loop, train_step

__all__ = ["ANSWER", "BLANK", "BOS", "EOS", "INFILL", "PAD", "SEP", "SIZES", "SPECIALS", "TEXT", "CodeBook",
           "ControlEncoder", "FormatMix", "KeyphraseExtractor", "LMSettings", "ModelShape", "PublicLM",
           "SamplingSettings", "TrainResult", "batch_loss", "build_model", "build_public_lm", "collate",
           "count_parameters", "evaluate_loss", "model_shape", "sample", "sequence_losses", "train_loop",
           "train_step"]
