"""Downstream accuracy: train on one corpus, test on another, per label column."""

from __future__ import annotations

import numpy as np
import pytest

from privtext.data import Corpus, load_corpus, sample
from privtext.errors import DataError, UnknownNameError
from privtext.evaluate.downstream import CLASSIFIERS, downstream_accuracy, make_classifier

from .conftest import shared_file

TOPICS = {
    "food": ["pizza", "pasta", "waiter", "dessert", "menu", "chef", "sauce", "dinner"],
    "hotel": ["room", "bed", "lobby", "suite", "pool", "towels", "checkin", "breakfast"],
    "shop": ["store", "price", "cashier", "shelf", "bargain", "aisle", "receipt", "mall"],
}
MOODS = {"good": ["great", "lovely", "excellent", "friendly"], "bad": ["awful", "rude", "dirty", "terrible"]}


def toy(n: int, rng: np.random.Generator, name: str = "toy") -> Corpus:
    texts, cat, mood = [], [], []
    for _ in range(n):
        c = str(rng.choice(list(TOPICS)))
        m = str(rng.choice(list(MOODS)))
        words = [*rng.choice(TOPICS[c], size=5), *rng.choice(MOODS[m], size=2)]
        rng.shuffle(words)
        texts.append(" ".join(words))
        cat.append(c)
        mood.append(m)
    return Corpus.from_texts(texts, {"category": cat, "mood": mood}, name=name)


def test_tfidf_learns_separable_labels(rng: np.random.Generator) -> None:
    train, test = toy(90, rng), toy(60, rng)
    res = downstream_accuracy(train, test, rng=rng)
    assert set(res) == {"category", "mood"}
    for r in res.values():
        assert r.accuracy >= 0.95 and r.n_train == 90 and r.n_test == 60 and not r.degenerate
        assert r.classifier == "tfidf-logreg"


def test_shuffled_training_labels_score_near_chance(rng: np.random.Generator) -> None:
    train, test = toy(120, rng), toy(300, rng)
    perm = rng.permutation(len(train))
    shuffled = Corpus.from_texts(train.texts, {c: [v[i] for i in perm] for c, v in train.labels.items()})
    r = downstream_accuracy(shuffled, test, rng=rng, label_columns=["category"])["category"]
    # chance is 1/3; with 300 test texts the std of an accuracy near 1/3 is ~0.03
    assert r.accuracy < 0.5


def test_embedding_classifier_with_the_hashing_embedder(rng: np.random.Generator) -> None:
    train, test = toy(90, rng), toy(60, rng)
    res = downstream_accuracy(train, test, rng=rng, classifier="embedding-logreg", embedder="hashing")
    assert res["category"].accuracy >= 0.9 and res["category"].classifier == "embedding-logreg"


def test_unseen_test_labels_count_as_misses(rng: np.random.Generator) -> None:
    train = toy(60, rng)
    test = toy(40, rng)
    renamed = Corpus.from_texts(test.texts, {"category": ["unseen"] * 20 + list(test.labels["category"][20:])})
    r = downstream_accuracy(train.select_labels(["category"]), renamed, rng=rng)["category"]
    assert r.unseen_test_fraction == 0.5
    assert r.accuracy <= 0.5


def test_single_class_training_set_gives_a_constant_predictor(rng: np.random.Generator) -> None:
    train = Corpus.from_texts(["a b", "c d", "e f"], {"y": ["x", "x", "x"]})
    test = Corpus.from_texts(["a", "b", "c", "d"], {"y": ["x", "x", "z", "z"]})
    r = downstream_accuracy(train, test, rng=rng)["y"]
    assert r.degenerate and r.accuracy == 0.5 and r.majority_accuracy == 0.5


def test_errors_name_the_problem(rng: np.random.Generator) -> None:
    train = toy(10, rng)
    with pytest.raises(DataError, match="no label column 'nope'"):
        downstream_accuracy(train, train, rng=rng, label_columns=["nope"])
    unlabelled = Corpus.from_texts(["a", "b"])
    with pytest.raises(DataError, match="no label column to evaluate"):
        downstream_accuracy(unlabelled, unlabelled, rng=rng)
    with pytest.raises(UnknownNameError, match="tfidf-logreg"):
        make_classifier("svm-of-dreams")
    with pytest.raises(DataError, match="C must be positive"):
        make_classifier("tfidf-logreg", C=0)
    assert {"tfidf-logreg", "embedding-logreg", "hf-finetune"} <= set(CLASSIFIERS.names())


@pytest.mark.parametrize("seed", [0, 12345])  # ~5 s each on Yelp text; the margins hold for any seed
def test_fast_classifier_on_a_yelp_slice_beats_majority_and_chance(seed: int) -> None:
    cols = ["label1", "label2"]
    dev = load_corpus(shared_file("yelp", "dev.csv"), label_columns=cols)
    test = load_corpus(shared_file("yelp", "test.csv"), label_columns=cols)
    rng = np.random.default_rng(seed)
    res = downstream_accuracy(sample(dev, 600, rng=rng), sample(test, 300, rng=rng), rng=rng)
    # balanced accuracy: chance is 1/10 (category) and 1/5 (stars) whatever the class imbalance; measured
    # 0.26-0.29 and 0.43-0.48 at 800 training reviews; the std at 300 test reviews is ~0.03
    assert res["label1"].balanced_accuracy > 0.1 + 0.08
    assert res["label2"].balanced_accuracy > 0.2 + 0.1
    # plain accuracy beats always answering the majority class of the training data
    assert res["label2"].accuracy > res["label2"].majority_accuracy + 0.04
    assert res["label1"].accuracy > res["label1"].majority_accuracy - 0.02


# ------------------------------------------------------------------------ the papers' fine-tuning protocol


def _tiny_bert(tmp_path, texts: list[str]) -> str:
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]")
    cfg = BertConfig(vocab_size=fast.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, pad_token_id=fast.pad_token_id)
    folder = tmp_path / "tiny-bert"
    BertForSequenceClassification(cfg).save_pretrained(folder)
    fast.save_pretrained(folder)
    return str(folder)


def test_hf_finetune_trains_a_tiny_random_bert(tmp_path) -> None:
    # one seed here (the slowest fast test); seeds 0-11 all reached loss < 0.4 and accuracy >= 0.9 when tuned
    rng = np.random.default_rng(0)
    train, test = toy(96, rng), toy(40, rng)
    path = _tiny_bert(tmp_path, list(train.texts))
    clf = make_classifier("hf-finetune", model=path, epochs=8, batch_size=16, lr=3e-3, max_length=16,
                          log_every=6, warmup_fraction=0.1)
    clf.fit(list(train.texts), list(train.labels["category"]), rng=rng)
    assert clf.history[-1] < 0.5 * clf.history[0], clf.history  # the loss goes down
    pred = clf.predict(list(test.texts))
    assert len(pred) == len(test) and set(pred) <= set(TOPICS)
    proba = clf.predict_proba(list(test.texts[:5]))
    assert proba.shape == (5, 3) and np.allclose(proba.sum(1), 1, atol=1e-5)
    acc = float(np.mean(np.array(pred) == np.array(test.labels["category"])))
    assert acc > 0.6  # chance is 1/3; the toy task is separable by single words


def test_hf_finetune_through_downstream_accuracy(tmp_path) -> None:
    rng = np.random.default_rng(0)
    train, test = toy(48, rng), toy(16, rng)
    path = _tiny_bert(tmp_path, list(train.texts))
    res = downstream_accuracy(train, test, rng=rng, label_columns=["mood"], classifier="hf-finetune",
                              classifier_options={"model": path, "max_steps": 8, "batch_size": 8, "lr": 3e-3,
                                                  "log_every": 4})
    r = res["mood"]
    assert r.classifier == "hf-finetune" and r.n_test == 16
    assert r.extra["loss_last"] < r.extra["loss_first"]


def test_hf_finetune_missing_model_is_a_clear_error(tmp_path) -> None:
    from privtext.errors import BackendError

    pytest.importorskip("transformers")
    clf = make_classifier("hf-finetune", model=str(tmp_path / "no-such-model"))
    with pytest.raises(BackendError, match="cannot load classifier model"):
        clf.fit(["a", "b"], ["x", "y"], rng=np.random.default_rng(0))
