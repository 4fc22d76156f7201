"""Deep CORAL (Sun & Saenko 2016) for DP-KPS's domain adaptation, and the no-LLM ablation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privtext.embed.hashing import HashingEmbedder
from privtext.errors import ConfigError, DataError
from privtext.evaluate.coral import (
    CoralClassifier,
    CoralOptions,
    coral_downstream,
    coral_loss,
    covariance,
    covariance_distance,
    keyphrase_ablation,
)


def test_coral_loss_known_values(any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    a = rng.normal(size=(50, 4))
    b = rng.normal(size=(70, 4)) * np.array([1.0, 2.0, 1.0, 0.5])
    assert np.allclose(covariance(a), np.cov(a, rowvar=False))
    expected = ((np.cov(a, rowvar=False) - np.cov(b, rowvar=False)) ** 2).sum() / (4 * 16)
    assert covariance_distance(a, b) == pytest.approx(expected)
    assert float(coral_loss(torch.from_numpy(a), torch.from_numpy(b))) == pytest.approx(expected)
    assert covariance_distance(a, a + 3.0) == pytest.approx(0.0, abs=1e-12)  # a mean shift is invisible to CORAL
    with pytest.raises(DataError, match="2 rows"):
        covariance(a[:1])


def _toy(rng: np.random.Generator, n: int, d: int = 16) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 2, size=n)
    x = rng.normal(size=(n, d))
    x[:, 0] += np.where(y == 1, 1.5, -1.5)
    return x, y


def test_coral_aligns_covariances_without_hurting_the_source(any_seed: int) -> None:
    """Target = the source distribution under a linear map (some directions stretched 3×, a shear): with
    λ = 1 the covariance distance of the adapted layer falls by far, and accuracy on held-out *source* data
    stays within 5 points of training without CORAL."""
    rng = np.random.default_rng(any_seed)
    xs, ys = _toy(rng, 600)
    xs_test, ys_test = _toy(rng, 2000)
    xt_raw, _ = _toy(rng, 600)
    a = np.eye(16)
    a[1:6, 1:6] *= 3.0
    a[0, 1] = 1.0
    xt = xt_raw @ a + 0.5
    res = {}
    for lam in (0.0, 1.0):
        clf = CoralClassifier(CoralOptions(coral_weight=lam, epochs=25)).fit(
            xs, ys, x_target=xt, rng=np.random.default_rng(any_seed))
        dist = covariance_distance(clf.activations(xs), clf.activations(xt))
        acc = float(np.mean(np.array(clf.predict(xs_test)) == ys_test.astype(str)))
        res[lam] = (dist, acc)
        assert len(clf.history) == 25 and clf.history[-1]["ce"] < clf.history[0]["ce"]
    assert res[1.0][0] < 0.1 * res[0.0][0]
    assert res[1.0][1] > res[0.0][1] - 0.05
    assert res[0.0][1] > 0.85  # the task is learnable (Bayes accuracy ≈ 0.93)


def test_randomness_is_explicit() -> None:
    rng = np.random.default_rng(0)
    x, y = _toy(rng, 200)
    state = torch.random.get_rng_state()
    threads = torch.get_num_threads()
    p1 = CoralClassifier(CoralOptions(epochs=3)).fit(x, y, x_target=x[::-1], rng=np.random.default_rng(5)).predict(x)
    p2 = CoralClassifier(CoralOptions(epochs=3)).fit(x, y, x_target=x[::-1], rng=np.random.default_rng(5)).predict(x)
    assert p1 == p2
    assert torch.equal(torch.random.get_rng_state(), state)  # torch's global generator untouched
    assert torch.get_num_threads() == threads


def test_options_and_inputs_are_validated() -> None:
    with pytest.raises(ConfigError, match="coral_layer"):
        CoralOptions(coral_layer="fc7")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="batch_size"):
        CoralOptions(batch_size=1)
    with pytest.raises(ConfigError, match="coral_weight"):
        CoralOptions(coral_weight=-1.0)
    x = np.ones((4, 3))
    with pytest.raises(DataError, match="x_target"):
        CoralClassifier().fit(x, ["a", "b", "a", "b"], rng=np.random.default_rng(0))
    with pytest.raises(DataError, match="3 labels for 4"):
        CoralClassifier(CoralOptions(coral_weight=0.0)).fit(x, ["a", "b", "a"], rng=np.random.default_rng(0))


TOPICS = {
    "food": "pizza pasta burger sushi noodles curry salad dessert bread cheese".split(),
    "hair": "haircut salon stylist nails manicure color shampoo massage spa facial".split(),
}
GENERIC = "great nice place staff friendly time really good service visit".split()


def _texts(rng: np.random.Generator, n: int, topic: str, *, n_topic: int, n_generic: int) -> list[str]:
    return [" ".join([*rng.choice(TOPICS[topic], n_topic), *rng.choice(GENERIC, n_generic)]) for _ in range(n)]


def test_downstream_and_no_llm_ablation_learn_the_classes(any_seed: int) -> None:
    """Sequences of topic terms (the ablation's training data) → test reviews with the same topics and generic
    filler: accuracy far above chance, with the test reviews as texts or as term sequences."""
    rng = np.random.default_rng(any_seed)
    seqs = [list(rng.choice(TOPICS[t], 4, replace=False)) for t in ("food", "hair") for _ in range(40)]
    labels = ["food"] * 40 + ["hair"] * 40
    test = _texts(rng, 50, "food", n_topic=2, n_generic=8) + _texts(rng, 50, "hair", n_topic=2, n_generic=8)
    test_y = ["food"] * 50 + ["hair"] * 50
    emb = HashingEmbedder(dim=128)
    opts = CoralOptions(coral_weight=0.0, epochs=30)
    vocab = {w for ws in TOPICS.values() for w in ws}
    as_text = keyphrase_ablation(seqs, labels, test, test_y, embedder=emb, rng=rng, options=opts)
    as_seq = keyphrase_ablation(seqs, labels, test, test_y, embedder=emb, rng=rng, options=opts,
                                test_terms=lambda t: [w for w in t.split() if w in vocab])
    assert as_seq.accuracy > 0.9 and as_text.accuracy > 0.75
    assert as_seq.n_train == 80 and as_seq.n_test == 100 and as_seq.n_target == 0
    adapted = coral_downstream([" ".join(s) for s in seqs], labels, test, test_y, embedder=emb, rng=rng,
                               target_texts=_texts(rng, 60, "food", n_topic=2, n_generic=8)
                               + _texts(rng, 60, "hair", n_topic=2, n_generic=8),
                               options=CoralOptions(coral_weight=1.0, epochs=30))
    assert adapted.n_target == 120 and adapted.accuracy > 0.75
    assert 0 <= adapted.balanced_accuracy <= 1
