"""Deep CORAL domain adaptation for downstream classifiers, and DP-KPS's no-LLM ablation.

DP-KPS (dpkps.txt App B.1.2) trains the client's classifier on the synthetic (source) corpus with Deep CORAL
(Sun & Saenko, ECCV 2016 workshops) against the client's own *unlabelled* (target) records, because the
generator's texts need not look like the client's. Here the classifier is a small fully connected network on
sentence embeddings (the paper: "a 3-layer fully connected neural network" over the embedding model), trained on
CPU with torch.

Loss (Sun & Saenko 2016, Eq 1–3)
--------------------------------
For a batch of source activations D_S (n_S × k) and target activations D_T (n_T × k) of one layer,

    C = (DᵀD − (1ᵀD)ᵀ(1ᵀD)/n)/(n − 1)          (the unbiased covariance),
    ℓ_CORAL = ‖C_S − C_T‖²_F/(4k²),
    ℓ = ℓ_CE(source) + λ·ℓ_CORAL.

Deep CORAL applies it to the last layer (fc8, the class scores): ``coral_layer="logits"`` (default);
``"hidden"`` uses the last hidden layer instead. Target records need no labels; they must be kept apart from the
test records the accuracy is measured on (the paper holds out a separate D_B).

No-LLM ablation (App B.2.2)
---------------------------
:func:`keyphrase_ablation` trains on the keyphrase sequences themselves (each joined into one string and
embedded) and tests on real records turned into sequences of the same vocabulary's terms (the paper's protocol,
``test_as="sequences"``) or on the raw test texts (``test_as="texts"``).

Randomness: the initial weights and the batch order come from a seed drawn from the caller's ``rng``, inside
``torch.random.fork_rng``: torch's global generator is left as it was.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from ..backends.hardware import torch_threads
from ..errors import ConfigError, DataError
from ..rng import spawn_seed


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch comes with sentence-transformers, a core dependency
        from ..embed.base import CoreDependencyMissing

        raise CoreDependencyMissing("torch", "Deep CORAL domain adaptation") from None
    return torch


def covariance(x: np.ndarray) -> np.ndarray:
    """The unbiased covariance of the rows of x (k × k)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or len(x) < 2:
        raise DataError(f"covariance needs at least 2 rows of a 2-d array, got shape {x.shape}")
    c = x - x.mean(axis=0, keepdims=True)
    return c.T @ c / (len(x) - 1)


def covariance_distance(source: np.ndarray, target: np.ndarray) -> float:
    """‖C_S − C_T‖²_F/(4k²): the CORAL loss between two sets of activations (numpy, for diagnostics)."""
    cs, ct = covariance(source), covariance(target)
    if cs.shape != ct.shape:
        raise DataError(f"source has {cs.shape[0]} features, target {ct.shape[0]}")
    k = cs.shape[0]
    return float(((cs - ct) ** 2).sum() / (4.0 * k * k))


def coral_loss(source: Any, target: Any) -> Any:
    """The CORAL loss of two torch activation batches (differentiable; same value as :func:`covariance_distance`)."""
    torch = _torch()
    k = source.shape[1]

    def cov(d: Any) -> Any:
        n = d.shape[0]
        s = d.sum(dim=0, keepdim=True)
        return (d.T @ d - s.T @ s / n) / (n - 1)

    diff = cov(source) - cov(target)
    return (diff * diff).sum() / (4.0 * k * k) if k else torch.zeros(())


CoralLayer = Literal["logits", "hidden"]


@dataclass(frozen=True)
class CoralOptions:
    """The classifier and its training. ``coral_weight`` λ = 0 trains without adaptation."""

    hidden: int = 256
    layers: int = 3  # fully connected layers, the last one giving the class scores
    epochs: int = 40
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    coral_weight: float = 1.0
    coral_layer: CoralLayer = "logits"
    threads: int = 1

    def __post_init__(self) -> None:
        for name in ("hidden", "layers", "epochs", "batch_size", "threads"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"coral.{name} must be a positive integer, got {v!r}")
        if self.batch_size < 2:
            raise ConfigError(f"coral.batch_size must be at least 2 (a covariance needs two rows), got {self.batch_size}")
        for name in ("lr", "weight_decay", "coral_weight"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
                raise ConfigError(f"coral.{name} must be a finite number ≥ 0, got {v!r}")
        if self.lr <= 0:
            raise ConfigError(f"coral.lr must be > 0, got {self.lr!r}")
        if self.coral_layer not in ("logits", "hidden"):
            raise ConfigError(f"coral.coral_layer must be 'logits' or 'hidden', got {self.coral_layer!r}")


class CoralClassifier:
    """A fully connected classifier on embeddings, trained with cross-entropy + λ·CORAL (see the module docs)."""

    name = "coral-mlp"

    def __init__(self, options: CoralOptions | None = None):
        self.options = options or CoralOptions()
        self.classes_: list[str] = []
        self.history: list[dict[str, float]] = []
        self._net: Any = None

    def _build(self, dim: int, n_classes: int) -> Any:
        torch = _torch()
        o = self.options
        mods: list[Any] = []
        width = dim
        for _ in range(o.layers - 1):
            mods += [torch.nn.Linear(width, o.hidden), torch.nn.ReLU()]
            width = o.hidden
        mods.append(torch.nn.Linear(width, n_classes))
        return torch.nn.Sequential(*mods).double()

    def _forward(self, x: Any) -> tuple[Any, Any]:
        """(hidden activations before the last layer, logits)."""
        h = x
        for m in list(self._net)[:-1]:
            h = m(h)
        return h, self._net[-1](h)

    def fit(self, x_source: np.ndarray, y_source: Sequence[Any], *, rng: np.random.Generator,
            x_target: np.ndarray | None = None) -> CoralClassifier:
        torch = _torch()
        o = self.options
        xs = np.ascontiguousarray(x_source, dtype=np.float64)
        if xs.ndim != 2 or len(xs) == 0:
            raise DataError(f"x_source must be a non-empty 2-d array, got shape {xs.shape}")
        ys = [str(y) for y in y_source]
        if len(ys) != len(xs):
            raise DataError(f"{len(ys)} labels for {len(xs)} source rows")
        use_coral = o.coral_weight > 0
        xt = None
        if use_coral:
            if x_target is None:
                raise DataError("coral_weight > 0 needs unlabelled target embeddings (x_target)")
            xt = np.ascontiguousarray(x_target, dtype=np.float64)
            if xt.ndim != 2 or xt.shape[1] != xs.shape[1] or len(xt) < 2:
                raise DataError(f"x_target must have at least 2 rows of dimension {xs.shape[1]}, got {xt.shape}")
        self.classes_ = sorted(set(ys))
        index = {c: i for i, c in enumerate(self.classes_)}
        y = np.array([index[v] for v in ys], dtype=np.int64)
        seed = spawn_seed(rng) % 2**63
        self.history = []
        with torch_threads(o.threads), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            gen = torch.Generator().manual_seed(seed)
            self._net = self._build(xs.shape[1], len(self.classes_))
            opt = torch.optim.Adam(self._net.parameters(), lr=o.lr, weight_decay=o.weight_decay)
            tx, ty = torch.from_numpy(xs), torch.from_numpy(y)
            tt = torch.from_numpy(xt) if xt is not None else None
            n = len(xs)
            bs = min(o.batch_size, n) if n >= 2 else 1
            for epoch in range(o.epochs):
                perm = torch.randperm(n, generator=gen)
                ce_sum, co_sum, batches = 0.0, 0.0, 0
                for s in range(0, n, bs):
                    idx = perm[s:s + bs]
                    if len(idx) < 2 and use_coral:
                        continue
                    hid, logits = self._forward(tx[idx])
                    loss = torch.nn.functional.cross_entropy(logits, ty[idx])
                    ce_sum += float(loss.detach())
                    if use_coral and tt is not None:
                        tidx = torch.randint(0, len(tt), (max(len(idx), 2),), generator=gen)
                        thid, tlogits = self._forward(tt[tidx])
                        src, tgt = (logits, tlogits) if o.coral_layer == "logits" else (hid, thid)
                        c = coral_loss(src, tgt)
                        co_sum += float(c.detach())
                        loss = loss + o.coral_weight * c
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    batches += 1
                self.history.append({"epoch": epoch, "ce": ce_sum / max(batches, 1),
                                     "coral": co_sum / max(batches, 1)})
        return self

    def activations(self, x: np.ndarray, *, layer: CoralLayer | None = None) -> np.ndarray:
        """The activations of ``layer`` (default: the adapted one) for rows x."""
        torch = _torch()
        if self._net is None:
            raise DataError("fit the classifier first")
        layer = layer or self.options.coral_layer
        with torch.no_grad(), torch_threads(self.options.threads):
            hid, logits = self._forward(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64)))
        return (logits if layer == "logits" else hid).numpy()

    def predict(self, x: np.ndarray) -> list[str]:
        return [self.classes_[i] for i in self.activations(x, layer="logits").argmax(axis=1)]


@dataclass(frozen=True)
class CoralResult:
    accuracy: float
    balanced_accuracy: float  # mean per-class recall over the test labels
    n_train: int
    n_test: int
    n_target: int
    options: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, float]] = field(default_factory=list)


def _scores(y_true: Sequence[str], y_pred: Sequence[str]) -> tuple[float, float]:
    yt = np.asarray([str(v) for v in y_true])
    yp = np.asarray([str(v) for v in y_pred])
    acc = float((yt == yp).mean()) if len(yt) else math.nan
    recalls = [float((yp[yt == c] == c).mean()) for c in np.unique(yt)]
    return acc, float(np.mean(recalls)) if recalls else math.nan


def coral_downstream(
    train_texts: Sequence[str],
    train_labels: Sequence[Any],
    test_texts: Sequence[str],
    test_labels: Sequence[Any],
    *,
    embedder: Any,
    rng: np.random.Generator,
    target_texts: Sequence[str] | None = None,
    options: CoralOptions | None = None,
) -> CoralResult:
    """Train on (synthetic) ``train_texts`` with CORAL against unlabelled ``target_texts`` (λ = 0: no target
    needed), report accuracy on the labelled ``test_texts``. All texts are embedded with ``embedder``."""
    o = options or CoralOptions()
    if len(train_texts) != len(train_labels) or len(test_texts) != len(test_labels):
        raise DataError("texts and labels differ in length")
    xs = embedder.embed(list(train_texts))
    xt = embedder.embed(list(target_texts)) if (o.coral_weight > 0 and target_texts is not None) else None
    clf = CoralClassifier(o).fit(xs, list(train_labels), x_target=xt, rng=rng)
    pred = clf.predict(embedder.embed(list(test_texts)))
    acc, bal = _scores(list(test_labels), pred)
    return CoralResult(accuracy=acc, balanced_accuracy=bal, n_train=len(train_texts), n_test=len(test_texts),
                       n_target=0 if xt is None else len(xt), options=asdict(o), history=clf.history)


def join_sequence(terms: Sequence[str]) -> str:
    """A keyphrase sequence as one text (what the ablation embeds)."""
    return ", ".join(terms)


def keyphrase_ablation(
    sequences: Sequence[Sequence[str]],
    labels: Sequence[Any],
    test_texts: Sequence[str],
    test_labels: Sequence[Any],
    *,
    embedder: Any,
    rng: np.random.Generator,
    test_terms: Callable[[str], Sequence[str]] | None = None,
    target_texts: Sequence[str] | None = None,
    options: CoralOptions | None = None,
) -> CoralResult:
    """The no-LLM ablation (App B.2.2): train on the joined keyphrase sequences; test on ``test_texts`` turned
    into term sequences by ``test_terms`` (e.g. ``lambda t: first_terms(t, dp_vocabulary, L)``), or on the raw
    texts when ``test_terms`` is None. ``target_texts`` (unlabelled, for CORAL) are converted the same way."""
    if len(sequences) != len(labels):
        raise DataError(f"{len(sequences)} sequences for {len(labels)} labels")

    def as_text(t: str) -> str:
        return join_sequence(test_terms(t)) or "(none)" if test_terms is not None else t

    train = [join_sequence(s) for s in sequences]
    test = [as_text(t) for t in test_texts]
    target = None if target_texts is None else [as_text(t) for t in target_texts]
    return coral_downstream(train, list(labels), test, list(test_labels), embedder=embedder, rng=rng,
                            target_texts=target, options=options)


__all__ = ["CoralClassifier", "CoralOptions", "CoralResult", "coral_downstream", "coral_loss", "covariance",
           "covariance_distance", "join_sequence", "keyphrase_ablation"]
