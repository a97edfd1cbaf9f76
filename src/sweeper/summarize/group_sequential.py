"""Group-sequential boundaries: decisions at the looks of a plan fixed in advance.

`sweeper run --until-decided` records its plan (seeds at the first look, seeds per look,
`--max-seeds`) on the sweep's parent run before the first look, and a resume must keep
it. The looks are therefore planned, and a group-sequential design spends the error
rate over exactly those looks instead of over every look that could ever happen (which
is what the anytime-valid rule in `sweeper.summarize.sequential` pays for):

* **Alpha spending** (Lan and DeMets 1983) with the O'Brien-Fleming-type function:
  by the information fraction t of a look (its seed pairs over the plan's
  `--max-seeds`) at most 2 (2 - 2 Φ(z_{1-alpha/4} / √t)) of the two-sided error is
  spent, alpha / 2 on each side (`obf_spent`). It spends almost nothing at the first
  looks of a few seeds, where a t-test on 2-5 degrees of freedom has little power
  anyway, and keeps the last look's boundary near the fixed-n one, so the design
  loses little power against a fixed-n test at `--max-seeds`. Looks with fewer pairs
  than planned (failed trials) use the information observed; the plan's last look
  spends whatever is left (t = 1).
* **Boundaries** `z_boundaries`: the critical |Z| at each look, so that a standard
  normal statistic observed with these information levels (Cov(Z_j, Z_k) =
  √(I_j / I_k)) crosses a boundary by look k with probability alpha(t_k) exactly. The
  crossing probabilities come from the recursive numerical integration of Armitage,
  McPherson and Rowe (1969) (Jennison and Turnbull 2000, ch. 19) on the score scale,
  Simpson's rule on a grid of `GRID` points; the boundary by Brent's method.
  tests/unit/test_group_sequential.py holds them to rpact's values for standard designs.
* **t at each look.** The spread of the seed differences is estimated, so each look
  uses Student's t with n - 1 degrees of freedom at the nominal level of its z
  boundary, 2 (1 - Φ(c_k)) (Jennison and Turnbull 2000, §3.8). The repeated
  confidence interval mean ± t_{n-1}(1 - p_k / 2) · s / √n holds the true difference at
  every look at once with probability about 1 - alpha; tests/unit/
  test_sequential_null.py measures that by simulation on normal and t(3) differences.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

GRID = 201
"""Points of the integration grid per look (odd: Simpson's rule); at 201 the boundaries
match rpact's to 1e-6 (tests/unit/test_group_sequential.py)."""
MAX_Z = 40.0
"""The largest boundary solved for: a crossing beyond it has probability below 1e-300."""


def obf_spent(fraction: float, alpha: float) -> float:
    """Two-sided error spent by information fraction `fraction` (0 < t <= 1): alpha / 2
    on each side, each by the one-sided function 2 - 2 Φ(z_{1-alpha/4} / √t) (the
    convention of rpact's and gsDesign's symmetric two-sided designs)."""
    from scipy.special import ndtr, ndtri

    if fraction >= 1.0:
        return alpha
    return float(2.0 * (2.0 - 2.0 * ndtr(ndtri(1.0 - alpha / 4.0) / math.sqrt(fraction))))


@functools.lru_cache(maxsize=1024)
def z_boundaries(information: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """Two-sided boundaries c_1..c_K for looks at the given increasing information
    levels, the last being the plan's maximum (fraction 1)."""
    from scipy.special import ndtri

    total = information[-1]
    first = obf_spent(information[0] / total, alpha)
    bounds = [min(float(ndtri(1.0 - first / 2.0)), MAX_Z)]  # inf where nothing is spent
    spent = first
    # The density of the score S_1 = Z_1 √I_1 where it has not crossed; carried look to look.
    grid, weights = _grid(bounds[0] * math.sqrt(information[0]))
    density = np.exp(-(grid**2) / (2 * information[0])) / math.sqrt(2 * math.pi * information[0])
    for previous, level in itertools.pairwise(information):
        sd, mass = math.sqrt(level - previous), density * weights
        target = obf_spent(level / total, alpha) - spent
        crossing = functools.partial(_crossing, grid=grid, mass=mass, level=level, sd=sd)
        c = _solve(crossing, target)
        bounds.append(c)
        spent += crossing(c)
        new_grid, weights = _grid(c * math.sqrt(level))
        kernel = np.exp(-((new_grid[:, None] - grid[None, :]) ** 2) / (2 * sd * sd))
        density, grid = kernel @ mass / (sd * math.sqrt(2 * math.pi)), new_grid
    return tuple(bounds)


def _crossing(c: float, grid: np.ndarray, mass: np.ndarray, level: float, sd: float) -> float:
    """P(not crossed before, |S| >= c √level now): the score moves from each grid
    point by a normal step of standard deviation `sd`."""
    from scipy.special import ndtr

    edge = c * math.sqrt(level)
    return float(np.sum(mass * (ndtr((-edge - grid) / sd) + ndtr((grid - edge) / sd))))


def _grid(edge: float) -> tuple[np.ndarray, np.ndarray]:
    """Simpson's points and weights over (-edge, edge)."""
    points = np.linspace(-edge, edge, GRID)
    step = points[1] - points[0]
    weights = np.ones(GRID)
    weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
    return points, weights * step / 3.0


def _solve(crossing: Callable[[float], float], target: float) -> float:
    """The boundary c at which `crossing(c)` (falling in c) equals `target`; at most
    `MAX_Z` (a look that may spend nothing decides nothing). Brent's method."""
    from scipy.optimize import brentq

    if target <= 0.0 or crossing(MAX_Z) >= target:
        return MAX_Z
    return float(brentq(lambda c: crossing(c) - target, 0.0, MAX_Z, xtol=1e-10))


def nominal_levels(pairs: Sequence[int], planned: int, alpha: float) -> tuple[float, ...]:
    """Two-sided nominal level of each look with `pairs` seed pairs (increasing), for a
    plan of `planned` pairs at most: 2 (1 - Φ(c_k)). The plan's last look (pairs >=
    planned) spends what is left."""
    from scipy.special import ndtr

    information = [min(float(n), float(planned)) for n in pairs]
    if information[-1] < planned:  # the boundary at look k needs only looks 1..k
        information = [*information, float(planned)]
        bounds = z_boundaries(tuple(information), alpha)[:-1]
    else:
        bounds = z_boundaries(tuple(information), alpha)
    return tuple(float(2.0 * ndtr(-c)) for c in bounds)


def t_radius(n: int, level: float) -> float:
    """The |t| on n differences at two-sided nominal `level`; inf when it cannot be met."""
    from scipy.special import stdtrit

    if n < 2 or level <= 0.0:
        return math.inf
    return float(stdtrit(n - 1, 1.0 - level / 2.0))
