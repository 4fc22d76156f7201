"""Learning from the released votes (issue 38): the private signal moves the generator, not only the population.

After each iteration's DP vote release, the candidates the private data preferred teach the generator that writes
the next iteration — POPri's idea (arXiv 2504.16438): preference pairs ranked by the noisy score, DPO on LoRA
adapters with the original model as the reference. Everything the trainers see is built from the keeper's released
values and from text the generators wrote (public by provenance), so learning is post-processing: the ledger and the
guarantee do not change.

Modules:

* :mod:`.options` — ``evolution.learn`` / ``evolution.final`` as pydantic models (not yet in config.py);
* :mod:`.pairs` — :class:`ReleasedVotes` (a histogram only the keeper's kept release can make) and the pair
  builders (:func:`preference_pairs` for Aug-PE/SecPE, :func:`wasp_pairs` for WASP's Top-Q histograms), the guard
  check of their texts;
* :mod:`.encode` — pairs as token ids, conditioned as the generator's RANDOM_API is (lm control codes; HF prompts);
* :mod:`.dpo` — the DPO loss (Rafailov et al. 2023 Eq 7) and one round on LoRA adapters (native torch);
* :mod:`.trl_backend` — the same round through trl's DPOTrainer (HF models; several GPUs under accelerate);
* :mod:`.adapter` — checkpoint / restore of the adapter (NumPy + JSON);
* :mod:`.ngram` — the n-gram analogue: Kneser-Ney counts re-estimated with the voted texts;
* :mod:`.rerank` — ``kind: rerank``: a preference model fitted to the pairs keeps the best of k samples (any
  generator, its weights untouched);
* :mod:`.step` — the learners the engine and WASP call after each release; :mod:`.factory` picks one per
  generator;
* :mod:`.devices`, :mod:`.launch`, :mod:`.worker`, :mod:`.vllm` — a round on K GPUs through accelerate, and the
  vLLM learner (docs/learn.md).

torch, peft and trl are imported lazily (the ``learn`` extra); :mod:`.pairs`, :mod:`.options` and :mod:`.ngram` need
none of them.
"""

from .options import DPOOptions, FinalOptions, LearnOptions, NgramLearnOptions, PairOptions
from .pairs import PreferencePair, ReleasedVotes, check_pair_texts, pair_records, preference_pairs, wasp_pairs

__all__ = ["DPOOptions", "FinalOptions", "LearnOptions", "NgramLearnOptions", "PairOptions", "PreferencePair",
           "ReleasedVotes", "check_pair_texts", "pair_records", "preference_pairs", "wasp_pairs"]
