"""What the t-based decisions assume, checked on the record: skewed differences and
collapsed trials.

The paired t interval behind the fixed-seed decisions assumes seed differences that
are roughly symmetric and close to normal. With a few seeds no check can confirm that,
but two ways it fails are visible and said in the comparison's note:

* **Skewed differences** (rare large wins, as when one seed of one group collapses):
  a comparison's differences are flagged when the magnitude of their sample skewness
  g1 = m3 / m2^(3/2) (`scipy.stats.skew`'s default, biased moments) exceeds the
  `1 - SKEW_FALSE_FLAG` quantile of |g1| over n independent normal values at the same
  n, simulated (`SKEW_SIMULATIONS` samples from generator seed `SKEW_SEED`). So under
  normal differences a comparison is flagged with probability `SKEW_FALSE_FLAG` (1%;
  the simulated quantile moves it by about ±0.1 point); tests hold the rate to that and
  show that centred exponential differences are flagged far more often. Below
  `SKEW_MIN_N` pairs nothing is flagged (see there): skewness is a weak check on a
  handful of seeds, which is why the exact sign-flip p is shown too.
* **Collapsed trials**: a classifier whose test predictions are all one class (a
  random-init run that never left the majority class). `collapsed_class` reads it from
  the per-class test metrics a trial logs (`test_recall_class<c>`,
  `test_precision_class<c>`, `sweeper.trainers.metrics`): one class recalled fully,
  every other not at all, and that class's precision equal to the test accuracy
  (every example predicted as it). Per-class values are logged at every evaluation
  but not at the best checkpoint (`record_names`), so this is the trial's last
  evaluation; a trial that logged no per-class metrics is never flagged.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence

from sweeper.record_names import METRIC_TEST_ACC

SKEW_FALSE_FLAG = 0.01
"""Share of comparisons with normal seed differences flagged as skewed."""
SKEW_MIN_N = 6
"""Fewest differences the skewness check looks at: below, |g1| is capped near the
normal quantile ((n - 2) / sqrt(n - 1): 0.71 at 3, 1.5 at 5) and a tie of lattice
values reaches the cap (differences 24.5, 24, 24.5 give -0.71), so the flag would
name ties, not skew; the exact sign-flip p beside the decision is what says how far
a handful of pairs carries."""
SKEW_SIMULATIONS = 20_000
SKEW_SIMULATED_MAX_N = 200
"""Up to this many differences the threshold is simulated; beyond, g1's normal limit."""
SKEW_SEED = 0
_CHUNK = 2_000
_PER_CLASS = re.compile(r"^test_(recall|precision)_class(\d+)$")


def sample_skewness(values: Sequence[float]) -> float | None:
    """g1 = m3 / m2^(3/2) with biased central moments; None for fewer than 3 values or
    no spread."""
    n = len(values)
    if n < 3:
        return None
    mean = math.fsum(values) / n
    m2 = math.fsum((v - mean) ** 2 for v in values) / n
    if m2 == 0.0:
        return None
    m3 = math.fsum((v - mean) ** 3 for v in values) / n
    return m3 / m2**1.5


@functools.lru_cache(maxsize=256)
def skew_threshold(n: int) -> float:
    """The `1 - SKEW_FALSE_FLAG` quantile of |g1| over n standard normal values
    (simulated, seeded; n >= 3). Past `SKEW_SIMULATED_MAX_N` values, D'Agostino's
    (1970) normalizing transform of g1 (what `scipy.stats.skewtest` uses) inverted at
    that quantile, instead of drawing 20,000 samples of thousands of seeds."""
    import numpy as np

    if n > SKEW_SIMULATED_MAX_N:
        from scipy.special import ndtri

        z = float(ndtri(1.0 - SKEW_FALSE_FLAG / 2))
        beta2 = 3.0 * (n * n + 27 * n - 70) * (n + 1) * (n + 3)
        beta2 /= (n - 2.0) * (n + 5) * (n + 7) * (n + 9)
        w2 = -1.0 + math.sqrt(2.0 * (beta2 - 1.0))
        delta, alpha = 1.0 / math.sqrt(0.5 * math.log(w2)), math.sqrt(2.0 / (w2 - 1.0))
        y = alpha * math.sinh(z / delta)
        return y * math.sqrt(6.0 * (n - 2) / ((n + 1) * (n + 3)))

    rng = np.random.default_rng(SKEW_SEED)
    found = []
    for start in range(0, SKEW_SIMULATIONS, _CHUNK):
        x = rng.standard_normal((min(_CHUNK, SKEW_SIMULATIONS - start), n))
        centred = x - x.mean(axis=1, keepdims=True)
        m2 = np.mean(centred**2, axis=1)
        found.append(np.abs(np.mean(centred**3, axis=1) / m2**1.5))
    return float(np.quantile(np.concatenate(found), 1.0 - SKEW_FALSE_FLAG))


def skewed(differences: Sequence[float]) -> float | None:
    """The differences' skewness g1 when it is beyond what normal differences give
    (see module docstring), else None (also below `SKEW_MIN_N` differences)."""
    if len(differences) < SKEW_MIN_N:
        return None
    g1 = sample_skewness(differences)
    if g1 is None or abs(g1) <= skew_threshold(len(differences)):
        return None
    return g1


def collapsed_class(latest: Mapping[str, float]) -> int | None:
    """The class every test prediction was, from a run's latest per-class test metrics
    (see module docstring); None when they show more than one class predicted, or are
    not there."""
    recall: dict[int, float] = {}
    precision: dict[int, float] = {}
    for name, value in latest.items():
        match = _PER_CLASS.match(name)
        if match:
            (recall if match[1] == "recall" else precision)[int(match[2])] = value
    full = [c for c, value in recall.items() if value == 100.0]
    if len(recall) < 2 or len(full) != 1:
        return None
    (c,) = full
    if any(value != 0.0 for other, value in recall.items() if other != c):
        return None
    accuracy = latest.get(METRIC_TEST_ACC)
    if accuracy is None or c not in precision:
        return None
    return c if math.isclose(precision[c], accuracy, rel_tol=1e-9, abs_tol=1e-12) else None
