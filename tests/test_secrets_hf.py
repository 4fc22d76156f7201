"""The ``hf`` detector with a tiny randomly initialised BERT and a tokenizer trained here (no downloads).

The classifier head is set by hand (zero weights, a bias) so the labels are known: this checks loading, the
label → type mapping, offsets, windowing of long texts and the SecretMatrix, not accuracy. In the default suite
(a detector that cut long texts short would move secrets into the public split); the conversion of pipeline output
to mentions is also tested in test_secrets_mapping.py.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
torch = pytest.importorskip("torch")

from privtext.errors import ConfigError  # noqa: E402
from privtext.secrets import build_detector  # noqa: E402

LABELS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-EMAIL", 4: "I-EMAIL"}


def _sentences() -> list[str]:
    names = ["alice", "bob", "carol", "dave", "erin", "frank"]
    verbs = ["met", "called", "emailed", "visited", "thanked"]
    places = ["the cafe", "the office", "the park", "home"]
    return [f"{a} {v} {b} at {p} ." for a in names for v in verbs for b in names for p in places if a != b][:400]


def _save_tiny_model(path, *, bias: list[float], max_len: int = 64) -> str:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForTokenClassification, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    tok.train_from_iterator(_sentences(), trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        model_max_length=max_len,
    )
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128, num_labels=len(LABELS), id2label=LABELS,
        label2id={v: k for k, v in LABELS.items()},
    )
    model = BertForTokenClassification(cfg)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor(bias))
    fast.save_pretrained(path)
    model.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def every_token_a_person(tmp_path_factory) -> str:
    # bias favours B-PER: each word becomes its own PERSON entity (B- starts a new entity)
    return _save_tiny_model(tmp_path_factory.mktemp("tiny_per"), bias=[0.0, 8.0, 0.0, 0.0, 0.0], max_len=16)


@pytest.fixture(scope="module")
def nothing(tmp_path_factory) -> str:
    return _save_tiny_model(tmp_path_factory.mktemp("tiny_o"), bias=[8.0, 0.0, 0.0, 0.0, 0.0])


def test_loads_and_maps_spans_to_the_matrix(every_token_a_person: str) -> None:
    det = build_detector({"name": "hf", "model": every_token_a_person, "local_files_only": True})
    assert det.name == "hf"
    assert det.model_labels == ("EMAIL", "PER") and det.types == ("EMAIL", "PERSON")
    texts = ["alice met Bob", "", "  carol  "]
    m = det.detect(texts)
    assert m.n_records == 3
    assert [texts[0][s.start:s.end] for s in m.spans[0]] == ["alice", "met", "Bob"]
    assert {s.type for s in m.spans[0]} == {"PERSON"}
    assert m.spans[1] == () and not m.private_mask()[1]
    assert [texts[2][s.start:s.end] for s in m.spans[2]] == ["carol"]  # offsets exclude the padding spaces
    assert set(m.secrets) == {"alice", "met", "bob", "carol"}  # canonical: case-folded
    assert m.holders(m.index("alice")).tolist() == [0]


def test_long_texts_are_processed_whole(every_token_a_person: str) -> None:
    det = build_detector({"name": "hf", "model": every_token_a_person, "local_files_only": True})
    words = [f"w{k}" for k in range(60)]  # unknown words: every one still gets a B-PER label
    text = " ".join(words)
    m = det.detect([text])
    found = sorted({text[s.start:s.end] for s in m.spans[0]}, key=lambda w: int(w[1:]))
    assert found == words  # 60 words > model_max_length=16: windows with overlap cover the whole text


def test_threshold_entities_and_label_map(every_token_a_person: str, nothing: str) -> None:
    base = {"name": "hf", "model": every_token_a_person, "local_files_only": True}
    assert not build_detector({**base, "score_threshold": 1.0}).detect(["alice met bob"]).private_mask().any()
    m = build_detector({**base, "label_map": {"PER": "CUSTOMER"}}).detect(["alice"])
    assert m.types == ("CUSTOMER",)
    assert build_detector({**base, "entities": ["EMAIL"]}).detect(["alice"]).n_secrets == 0
    with pytest.raises(ConfigError, match="PASSPORT"):
        build_detector({**base, "entities": ["PASSPORT"]})
    with pytest.raises(ConfigError, match="aggregation"):
        build_detector({**base, "aggregation": "none"})
    m0 = build_detector({"name": "hf", "model": nothing, "local_files_only": True}).detect(["alice met bob"])
    assert m0.shape == (1, 0) and not m0.private_mask().any()
