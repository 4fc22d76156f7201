"""Evaluation of synthetic text: distribution distances, downstream utility, audits of a run.

Metrics are plain functions of (synthetic, real, options); :func:`evaluate_run` applies them all to a run
directory and writes ``evaluation.json``; :func:`compare_runs` / :func:`compare_configs` tabulate several runs;
``privtext evaluate | compare | report`` are the command-line faces (:mod:`privtext.cli.evaluate`).

Heavy dependencies (torch, transformers, mauve) are imported only by the functions that need them.
"""

from .compare import ComparisonTable, compare_configs, compare_runs
from .downstream import CLASSIFIERS, DownstreamResult, downstream_accuracy, make_classifier
from .embedding import resolve_embedder
from .fid import FIDResult, MauveResult, PrecisionRecall, fid, frechet_distance, mauve_score, precision_recall
from .lengths import LengthComparison, length_distribution, text_lengths
from .nextword import NextWordResult, next_word_accuracy
from .runinfo import RunView
from .runstats import SecretExposure, load_secrets, runtime_split, secret_exposure, vote_distribution
from .suite import evaluate_run, guarantee_text

__all__ = [
    "CLASSIFIERS", "ComparisonTable", "DownstreamResult", "FIDResult", "LengthComparison", "MauveResult",
    "NextWordResult", "PrecisionRecall", "RunView", "SecretExposure", "compare_configs", "compare_runs",
    "downstream_accuracy", "evaluate_run", "fid", "frechet_distance", "guarantee_text", "length_distribution",
    "load_secrets", "make_classifier", "mauve_score", "next_word_accuracy", "precision_recall", "resolve_embedder",
    "runtime_split", "secret_exposure", "text_lengths", "vote_distribution",
]
