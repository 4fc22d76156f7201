"""SecAgg+ round time and quantisation error of privtext.federated.secure_sum.

    PYTHONPATH=src python benchmarks/federated.py [--repeats 3]

Each configuration runs one full SecAgg+ round (Flower 1.41 workflow + secaggplus_mod, every party a spawned
process on 127.0.0.1); the time is the round itself (after the parties connected), the median of the repeats.
The quantisation error is max_j |aggregate_j − Σ_l x_l,j| against the in-process reference with the same
(seeded) noise, next to its bound S·s/2.
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import numpy as np

from privtext.federated import plain_sum
from privtext.federated.secagg import secure_sum


def bincount(data: np.ndarray, dim: int) -> np.ndarray:
    return np.bincount(np.asarray(data), minlength=dim).astype(float)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"{'L':>3} {'dim':>7} {'round s':>8} {'total s':>8} {'max |err|':>11} {'bound S·s/2':>12}")
    for L in (3, 5):
        for dim in (1_000, 10_000):
            parties = [np.random.default_rng(k).integers(0, dim, 100) for k in range(L)]
            fn = partial(bincount, dim=dim)
            rounds, totals, err, bound = [], [], 0.0, 0.0
            for rep in range(args.repeats):
                t0 = time.perf_counter()
                r = secure_sum(parties, fn, dim=dim, sigma=4.0, value_bound=100.0, seed=rep, reproducible=True)
                totals.append(time.perf_counter() - t0)
                rounds.append(r.seconds)
                ref = plain_sum(parties, fn, r.plan, seed=rep, reproducible=True)
                err = max(err, float(np.abs(r.values - ref).max()))
                bound = r.max_error
            print(f"{L:>3} {dim:>7} {statistics.median(rounds):>8.3f} {statistics.median(totals):>8.2f} "
                  f"{err:>11.3e} {bound:>12.3e}")


if __name__ == "__main__":
    main()
