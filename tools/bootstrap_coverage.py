"""Coverage of Table 2's 95% intervals of a mean at small n: BCa bootstrap vs Student's t.

`python tools/bootstrap_coverage.py` prints one markdown row per n: how often each
interval, computed exactly as `sweeper summarize` computes it
(`sweeper.summarize.stats.bootstrap_ci` and `describe`), contains the true mean of
normal and of skewed (centred gamma, shape 4) values. `BOOTSTRAP_MIN_N` in
`sweeper.summarize.stats` is the smallest n from which the bootstrap's coverage stays
within 3 points of the nominal 95% on both; docs/architecture.md quotes the table.
"""

from __future__ import annotations

import argparse

import numpy as np

from sweeper.summarize.stats import bootstrap_ci, describe


def coverage(n: int, reps: int, dist: str, seed: int) -> tuple[float, float]:
    """(bootstrap coverage, t coverage) of the mean over `reps` samples of size n."""
    rng = np.random.default_rng(seed)
    hit_boot = hit_t = 0
    for _ in range(reps):
        x = rng.standard_normal(n) if dist == "normal" else rng.gamma(4.0, 1.0, n) - 4.0
        low, high = bootstrap_ci([list(x)])
        hit_boot += low is not None and high is not None and low <= 0.0 <= high
        d = describe(list(x))
        hit_t += d.ci_low is not None and d.ci_high is not None and d.ci_low <= 0.0 <= d.ci_high
    return hit_boot / reps, hit_t / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="samples per n (default 1000)")
    parser.add_argument("--max-n", type=int, default=15)
    args = parser.parse_args()
    print("| n | BCa, normal | t, normal | BCa, skewed | t, skewed |")
    print("|---:|---:|---:|---:|---:|")
    for n in range(3, args.max_n + 1):
        bn, tn = coverage(n, args.reps, "normal", seed=n)
        bs, ts = coverage(n, args.reps, "skewed", seed=1000 + n)
        print(f"| {n} | {bn:.3f} | {tn:.3f} | {bs:.3f} | {ts:.3f} |", flush=True)


if __name__ == "__main__":
    main()
