"""Corpora: loading, writing, splitting."""

from .corpus import Corpus
from .io import FORMATS, infer_format, load_corpus, write_corpus
from .labels import LabelInfo, LabelSpace
from .split import sample, split_corpus, train_test_split

__all__ = ["FORMATS", "Corpus", "LabelInfo", "LabelSpace", "infer_format", "load_corpus", "sample", "split_corpus",
           "train_test_split", "write_corpus"]
