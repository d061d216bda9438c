"""Mean and 95% confidence interval of a score over seeds: a percentile bootstrap. Pure functions
over lists of numbers, seeded, so the same sample gives the same interval on every machine.

The bootstrap: `RESAMPLES` (10,000) resamples of the n values with replacement, drawn by numpy's
`default_rng(SEED)`; each resample's mean; the interval is the 2.5th and 97.5th percentiles of
those means (numpy's default linear interpolation). With n seeds there are at most C(2n-1, n)
distinct resample means (10 for 3 seeds), so with few seeds the interval is coarse and narrower
than a t-interval would be: it says how much the mean moved over the seeds that were run, not a
population claim. Forget quality is a p-value spanning many orders of magnitude, so it is summarised
on the log10 scale (the mean of log10 values, the geometric mean's exponent)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
SEED = 0
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n}


def bootstrap_interval(
    values: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL
) -> Interval:
    """The sample mean and the percentile-bootstrap interval of the mean at `level`."""
    sample = np.asarray(list(values), dtype=float)
    if sample.size == 0:
        raise ValueError("a confidence interval needs at least one value")
    if not np.all(np.isfinite(sample)):
        raise ValueError("a confidence interval needs finite values")
    if np.all(sample == sample[0]):
        # Exactly the value: a summed mean of equal floats can be off in the last bit.
        point = float(sample[0])
        return Interval(point, point, point, int(sample.size))
    mean = float(sample.mean())
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, sample.size, size=(resamples, sample.size))
    means = sample[picks].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(mean, float(low), float(high), int(sample.size))


def log10_quality(value: float | None) -> float | None:
    """Forget quality on the scale its interval is computed on; a p-value of 0 (which float
    underflow can give) is kept finite at the smallest positive double."""
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return math.log10(max(value, 5e-324))
