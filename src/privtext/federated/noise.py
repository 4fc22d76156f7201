"""Local noise, quantisation, and the in-process reference sum (WASP §4.7 Eq 9, Alg 2).

**Distributed Gaussian noise.** Each of L parties computes its local histogram h_l ∈ R^d (a callable given to
it; WASP's Top-Q nearest/furthest votes, Aug-PE's nearest-neighbour votes) and adds its own noise
n_l ~ N(0, τ² I_d) from its own CSPRNG (:func:`privtext.rng.noise_rng`: ChaCha20 keyed by OS entropy). The
server learns only the sum (Eq 9)

    H = Σ_l (h_l + n_l) = Σ_l h_l + N,   N = Σ_l n_l ~ N(0, (Σ_l τ²) I_d),

because a sum of independent Gaussians is Gaussian with the variances added (the characteristic functions
multiply: Π_l exp(−τ²‖t‖²/2) = exp(−Lτ²‖t‖²/2)). With τ = σ/√L the sum carries exactly N(0, σ² I_d): H is the
**central Gaussian mechanism** Σ_l h_l + N(0, σ² I) applied to the union of the parties' records, and a
record-level neighbouring pair (one record added or removed at one party) moves Σ_l h_l by at most the
record-level sensitivity Δ in L2 — so the release is ``GaussianDpEvent(σ/Δ)``, the same event as one data
holder with all the records (WASP §4.7: σ_party = 4√(2 ln(1.25/δ))√(T−1)/(ε√L) is exactly σ/√L with Δ = 4).
This needs the server (and any coalition that does not include the party) to see no n_l alone; secure
aggregation provides that.

**Drop-outs.** If only S ≤ L parties' vectors enter the sum, N ~ N(0, S·τ² I): with τ = σ/√L the noise std is
σ√(S/L) < σ — the recorded event would under-state the privacy loss. SecAgg+ (Bell et al. 2020; Flower's
``SecAggPlusWorkflow``) completes a round only when every party keeps ≥ t live neighbours (t =
``reconstruction_threshold``, a party counting as its own neighbour), so a completed round has S ≥ t
survivors; with fewer the server cannot unmask and the round fails (privtext raises
:class:`privtext.errors.AggregationError`; nothing is released). privtext therefore has each party add

    τ = σ / √t    (t = ``min_survivors``, default L: no drop-out tolerated, no extra noise),

so every completed round carries N(0, S·σ²/t · I) with S ≥ t, i.e. noise std σ√(S/t) ≥ σ. More noise than σ
is post-processing of the σ-mechanism (add an independent N(0, (S/t − 1)σ² I)), so ``GaussianDpEvent(σ/Δ)``
stays a valid — conservative — account whatever the number of survivors. The price of tolerating L − t drop-
outs is a noise std up to √(L/t) times σ when nobody drops.

**Collusion.** SecAgg+ as used (Flower's ``SecAggPlusWorkflow``, semi-honest) hides each party's vector from an
*honest-but-curious* server: one that follows the protocol and sees only the sum. A server that colludes with c
parties also knows their shares n_l and can subtract them: what is left of the noise is the honest survivors',
variance (|S| − c)·τ² ≥ (t − c)·τ². With τ = σ/√t that is σ√((t − c)/t) < σ: for z = 2.162, T = 4, δ = 1e-5
(ε = 4 against the server alone), 1 colluder among 3 parties gives ε ≈ 5.06 and 9 among 10 ε ≈ 16.1
(:func:`privtext.federated.threat.collusion_epsilon`). ``collusion: c`` (0 ≤ c < t) has every party add

    τ = σ / √(t − c),

so the honest survivors' noise has variance ≥ (t − c)·σ²/(t − c) = σ² against any coalition of ≤ c parties
(records of the colluding parties are known to the coalition anyway; the guarantee is for the others). Against
the server alone the sum then carries σ√(t/(t − c)) ≥ σ: more noise, post-processing of the σ-mechanism. A
*malicious* server (one that deviates from the protocol) is not covered by this analysis.

**Quantisation** (SecAgg+ sums integers modulo M). Public parameters: the bound B on each coordinate of a
local histogram (each party clips h_l to [−B, B] *before* the noise; coordinate-wise clipping is 1-Lipschitz,
so it never raises the L2 sensitivity), τ, L, d and a failure probability β (default 1e-12):

* clip range c = the smallest power of two ≥ B + k·τ, with k = Φ⁻¹(1 − β/(2dL)): by the union bound over the
  d·L noisy coordinates, P[some |n_l,j| > kτ] ≤ 2dL·Φ(−k) = β, so with probability ≥ 1 − β nothing is
  clipped after the noise (account β on top of δ; it is reported as ``clip_probability``);
* quantisation range Q = the largest power of two with L·Q < M (M = 2³², Flower's modulus; SecAgg+ adds the L
  integers q_l ∈ [0, Q] and their weight factors Q, so L·Q < M means no wrap-around) and Q ≤ 2³⁰ (Flower casts
  to int32);
* grid step s = 2c/Q (a power of two). Each party rounds its noisy vector to the nearest grid point:
  x̂_l = s·round(x_l/s), |x̂_l − x_l| ≤ s/2 per coordinate. Because c, Q and s are powers of two,
  (x̂_l + c)·Q/(2c) is an exact integer in float64, so Flower's stochastic rounding does nothing and
  Flower's de-quantisation is exact; the server's aggregate is **exactly** Σ_l x̂_l and

      |aggregate_j − Σ_l x_l,j| ≤ S·s/2 = S·c/Q   for every coordinate j (no clipping, prob ≥ 1 − β).

  (Privacy note: the rounding is applied by each party to its own noisy vector; the accounting above is that
  of the continuous Gaussian sum, exactly as for float64 rounding elsewhere in privtext — the discrete
  deviation is at most S·s/2 ≈ 10⁻⁶·c per coordinate. A formal discrete analysis, e.g. the distributed
  discrete Gaussian of Kairouz, Liu & Steinke 2021, is not implemented.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, DataError, PrivacyError
from ..privacy.noise import add_gaussian
from ..rng import noise_rng

#: Flower's SecAgg+ modulus (``modulus_range`` must be a power of two below 2**32 + 1)
MODULUS = 2**32
#: Flower's quantiser casts to int32
MAX_QUANTIZATION_RANGE = 2**30

LocalFn = Callable[[object], np.ndarray]


@dataclass(frozen=True)
class QuantisationPlan:
    """Public parameters of one aggregation (see the module docstring for the derivation)."""

    n_parties: int
    min_survivors: int
    dim: int
    sigma: float          # noise std of the sum (with t = min_survivors survivors)
    party_std: float      # τ = σ/√t
    value_bound: float    # B: each local histogram is clipped to [−B, B] before noise
    clip_range: float     # c
    quantization_range: int  # Q
    modulus: int          # M
    clip_probability: float  # β' = 2dL·Φ(−k) actually achieved by c (≤ the requested β)
    collusion: int = 0    # c: each party adds σ/√(t − c), so c colluding parties' shares can be removed

    @property
    def step(self) -> float:
        """Grid step s = 2c/Q."""
        return 2.0 * self.clip_range / self.quantization_range

    def max_error(self, survivors: int | None = None) -> float:
        """Per-coordinate bound |aggregate − Σ x_l| ≤ S·s/2 (S survivors; L when None)."""
        return (self.n_parties if survivors is None else survivors) * self.step / 2.0


def _pos_int(name: str, v: object) -> int:
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
        raise ConfigError(f"{name} must be an integer ≥ 1, got {v!r}")
    return int(v)


def plan_quantisation(
    *, n_parties: int, dim: int, sigma: float, value_bound: float, min_survivors: int | None = None,
    beta: float = 1e-12, modulus: int = MODULUS, collusion: int = 0,
) -> QuantisationPlan:
    """The clip range, quantisation range and grid of one aggregation (module docstring); each party's noise std
    is τ = σ/√(t − c) with c = ``collusion`` (module docstring, "Collusion")."""
    from scipy.special import ndtr, ndtri

    L = _pos_int("n_parties", n_parties)
    d = _pos_int("dim", dim)
    t = L if min_survivors is None else _pos_int("min_survivors", min_survivors)
    if t > L:
        raise ConfigError(f"min_survivors={t} exceeds the number of parties {L}")
    if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
        raise PrivacyError(f"sigma must be a finite number > 0, got {sigma!r}")
    if not (isinstance(value_bound, (int, float)) and math.isfinite(value_bound) and value_bound > 0):
        raise ConfigError(f"value_bound must be a finite number > 0, got {value_bound!r}")
    if not (0 < beta < 1):
        raise ConfigError(f"beta (the clipping failure probability) must be in (0, 1), got {beta!r}")
    if not (isinstance(modulus, int) and modulus >= 4 and modulus & (modulus - 1) == 0 and modulus <= MODULUS):
        raise ConfigError(f"modulus must be a power of two ≤ 2**32, got {modulus!r}")
    if isinstance(collusion, bool) or not isinstance(collusion, (int, np.integer)) or not 0 <= collusion < t:
        raise ConfigError(f"collusion must be an integer in [0, min_survivors={t}) (each party adds σ/√(t − c)), "
                          f"got {collusion!r}")
    tau = float(sigma) / math.sqrt(t - int(collusion))
    k = float(-ndtri(beta / (2.0 * d * L)))
    c = 2.0 ** math.ceil(math.log2(float(value_bound) + k * tau))
    q = 1
    while L * (2 * q) < modulus and 2 * q <= MAX_QUANTIZATION_RANGE:
        q *= 2
    if L * q >= modulus or q < 2:
        raise ConfigError(f"{L} parties do not fit the SecAgg+ modulus {modulus} (need L·Q < M with Q ≥ 2)")
    achieved = float(min(1.0, 2.0 * d * L * ndtr(-(c - float(value_bound)) / tau)))
    return QuantisationPlan(L, t, d, float(sigma), tau, float(value_bound), c, q, int(modulus), achieved,
                            int(collusion))


def local_histogram(party_data: object, local_fn: LocalFn, plan: QuantisationPlan) -> np.ndarray:
    """h_l = clip(local_fn(data), −B, B) as float64 of length d (checked; clipping keeps the sensitivity)."""
    h = np.asarray(local_fn(party_data), dtype=np.float64)
    if h.ndim != 1 or h.shape[0] != plan.dim:
        raise DataError(f"the local histogram has shape {h.shape}, expected ({plan.dim},)")
    if not np.all(np.isfinite(h)):
        raise DataError("the local histogram has non-finite values")
    return np.clip(h, -plan.value_bound, plan.value_bound)


def local_noisy_vector(h: np.ndarray, plan: QuantisationPlan, rng: np.random.Generator) -> np.ndarray:
    """x_l = h_l + N(0, τ² I) — one party's noisy contribution (unquantised)."""
    return add_gaussian(h, plan.party_std, rng)


def quantise(x: np.ndarray, plan: QuantisationPlan) -> np.ndarray:
    """x̂ = s·round(clip(x, −c, c)/s): on the SecAgg+ grid, exactly representable (module docstring)."""
    s = plan.step
    return np.clip(np.rint(np.clip(x, -plan.clip_range, plan.clip_range) / s) * s, -plan.clip_range, plan.clip_range)


def party_rng(index: int, *, seed: int | None, key: str, reproducible: bool) -> np.random.Generator:
    """The party's own privacy randomness: a fresh ChaCha20 CSPRNG (``reproducible=True``: seeded, NOT private —
    tests compare the secure sum with this module's reference sum)."""
    return noise_rng(seed, "federated", key, int(index), reproducible=reproducible)


def _party_data(p: object) -> object:
    """A :class:`~privtext.federated.parties.Party`'s records, or ``p`` itself (any other object is the data)."""
    from .parties import Party

    return p.data if isinstance(p, Party) else p


def plain_sum(
    parties: Sequence[object],
    local_fn: LocalFn,
    plan: QuantisationPlan,
    *,
    seed: int | None = None,
    key: str = "sum",
    reproducible: bool = False,
    quantised: bool = False,
    survivors: Sequence[int] | None = None,
) -> np.ndarray:
    """In-process reference: Σ_l x_l (or Σ_l x̂_l with ``quantised``) over ``survivors`` (all by default), each
    party drawing from :func:`party_rng` as the secure path does. For tests and single-machine runs; here one
    process holds every party's data, so it is NOT a secure aggregation."""
    idx = range(len(parties)) if survivors is None else survivors
    total = np.zeros(plan.dim)
    for k in idx:
        p = parties[k]
        data = _party_data(p)
        x = local_noisy_vector(local_histogram(data, local_fn, plan), plan,
                               party_rng(k, seed=seed, key=key, reproducible=reproducible))
        total += quantise(x, plan) if quantised else x
    return total


# --- sensitivity helpers (WASP App E.4) -------------------------------------------------------------------------

def user_level_sensitivity(sample_sensitivity: float, max_records_per_user: int) -> float:
    """Δ_user = m·Δ_sample (WASP App E.4): adding or removing one user (a data party) adds or removes ≤ m of
    its records, each moving the histogram by ≤ Δ_sample in L2, so by the triangle inequality the sum moves
    by ≤ m·Δ_sample. m = max_l M_l must be PUBLIC — a public cap that every party enforces (e.g. WASP uses
    M_l ≤ 8, Δ_user = 8·4 = 32), not the observed maximum of private sizes."""
    if not (isinstance(sample_sensitivity, (int, float)) and math.isfinite(sample_sensitivity)
            and sample_sensitivity > 0):
        raise PrivacyError(f"sample_sensitivity must be a finite number > 0, got {sample_sensitivity!r}")
    m = _pos_int("max_records_per_user", max_records_per_user)
    return float(sample_sensitivity) * m


def cap_records(n_records: int, cap: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of at most ``cap`` of a party's ``n_records`` records (a uniform subset; all when ≤ cap), so
    that the public cap of :func:`user_level_sensitivity` holds."""
    cap = _pos_int("cap", cap)
    if n_records <= cap:
        return np.arange(n_records)
    return np.sort(rng.choice(n_records, size=cap, replace=False))


def normalise_user_votes(votes: np.ndarray) -> np.ndarray:
    """Each user's vote vector scaled to unit L2 norm (zero vectors stay zero).

    With H = Σ_u v_u/‖v_u‖ (user u's votes summed over its records), adding or removing user u changes H by
    v_u/‖v_u‖, of L2 norm 1 (or 0): the user-level L2 sensitivity is 1 whatever the number of records a user
    holds — no public cap on records per user is needed (unlike :func:`user_level_sensitivity`)."""
    v = np.asarray(votes, dtype=np.float64)
    if v.ndim != 2:
        raise DataError(f"votes must be a users × bins matrix, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise DataError("votes hold non-finite values")
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)


def user_vote_histogram(record_votes: np.ndarray, users: Sequence[object]) -> np.ndarray:
    """Σ_u v_u/‖v_u‖ where v_u sums the rows of ``record_votes`` (records × bins) of user u (sensitivity 1)."""
    rv = np.asarray(record_votes, dtype=np.float64)
    if rv.ndim != 2 or len(users) != rv.shape[0]:
        raise DataError(f"record_votes {rv.shape} and {len(users)} user ids do not match")
    keys = {u: i for i, u in enumerate(dict.fromkeys(users))}
    per_user = np.zeros((len(keys), rv.shape[1]))
    np.add.at(per_user, [keys[u] for u in users], rv)
    return normalise_user_votes(per_user).sum(axis=0)
