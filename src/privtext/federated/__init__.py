"""Several data holders (WASP §4.7, Alg 2): parties, distributed Gaussian noise, SecAgg+ secure sums.

``parties`` cuts or loads the parties; ``noise`` holds the per-party noise, the quantisation plan, the
in-process reference sum and the user-level sensitivity helpers; ``secagg`` runs one Flower SecAgg+ round
with each party in its own process (``pip install 'privtext[flower]'``). See docs/federated.md.
"""

from .noise import (
    QuantisationPlan,
    cap_records,
    local_histogram,
    local_noisy_vector,
    normalise_user_votes,
    plain_sum,
    plan_quantisation,
    quantise,
    user_level_sensitivity,
    user_vote_histogram,
)
from .parties import Party, dirichlet_split, parties_from_files, split_parties

__all__ = [
    "Party", "QuantisationPlan", "cap_records", "dirichlet_split", "local_histogram", "local_noisy_vector",
    "normalise_user_votes", "parties_from_files", "plain_sum", "plan_quantisation", "quantise", "secure_sum",
    "split_parties", "user_level_sensitivity", "user_vote_histogram",
]


def secure_sum(*args, **kwargs):  # type: ignore[no-untyped-def]
    """:func:`privtext.federated.secagg.secure_sum` (imported lazily: it needs flwr)."""
    from .secagg import secure_sum as _secure_sum

    return _secure_sum(*args, **kwargs)
