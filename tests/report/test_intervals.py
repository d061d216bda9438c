"""Mean and bootstrap interval over seeds on known samples, and the seeded leaderboard."""

from __future__ import annotations

import math

import numpy as np
import pytest

from forgetbench.intervals import RESAMPLES, bootstrap_interval, log10_quality
from forgetbench.report.tables import board_cell
from forgetbench.rows import leaderboard, seed_means, seed_summary


def test_a_constant_sample_has_a_point_interval():
    found = bootstrap_interval([0.7, 0.7, 0.7])
    assert (found.mean, found.low, found.high, found.n) == (0.7, 0.7, 0.7, 3)
    assert bootstrap_interval([2.0]).as_dict() == {"mean": 2.0, "low": 2.0, "high": 2.0, "n": 1}


def test_two_values_give_the_percentiles_of_binomial_resample_means():
    # Resampling [0, 1] twice gives means 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4, so the
    # 2.5th percentile of 10,000 resample means is 0 and the 97.5th is 1: the whole range.
    found = bootstrap_interval([0.0, 1.0])
    assert (found.mean, found.low, found.high) == (0.5, 0.0, 1.0)


def test_the_interval_is_numpys_percentile_bootstrap_with_seed_zero():
    sample = [0.1, 0.4, 0.35, 0.8, 0.2]
    # The same computation written out: 10,000 resamples drawn by default_rng(0), their means,
    # the 2.5th and 97.5th percentiles.
    rng = np.random.default_rng(0)
    means = np.array(sample)[rng.integers(0, 5, size=(RESAMPLES, 5))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    found = bootstrap_interval(sample)
    assert found.mean == pytest.approx(0.37)  # 1.85 / 5
    assert (found.low, found.high) == (pytest.approx(low), pytest.approx(high))
    # The interval of a mean lies within the sample's range and around its mean.
    assert 0.1 <= found.low < 0.37 < found.high <= 0.8
    assert bootstrap_interval(sample) == found  # seeded: the same interval every time


def test_a_narrower_level_gives_a_narrower_interval_and_bad_samples_fail():
    sample = [1.0, 2.0, 4.0, 8.0]
    wide, narrow = bootstrap_interval(sample), bootstrap_interval(sample, level=0.5)
    assert wide.low < narrow.low < narrow.high < wide.high
    with pytest.raises(ValueError, match="at least one"):
        bootstrap_interval([])
    with pytest.raises(ValueError, match="finite"):
        bootstrap_interval([1.0, math.nan])


def test_forget_quality_goes_to_log10_and_zero_stays_finite():
    assert log10_quality(1e-3) == pytest.approx(-3.0)
    assert log10_quality(0.0) == pytest.approx(math.log10(5e-324))
    assert log10_quality(None) is None


def _rows() -> list[dict]:
    # Finetuned utility 0.5: the bar is 0.45. Method m, seeds 0 and 1, steps 1 and 2.
    rows = [{"split": "f", "method": "finetuned", "step": 0, "model_utility": 0.5}]
    for seed, (q1, u1, q2, u2) in enumerate([(1e-4, 0.50, 1e-1, 0.40), (1e-2, 0.48, 1e-1, 0.46)]):
        rows.append({"split": "f", "method": "m", "seed": seed, "step": 1, "forget_quality": q1,
                     "model_utility": u1})  # fmt: skip
        rows.append({"split": "f", "method": "m", "seed": seed, "step": 2, "forget_quality": q2,
                     "model_utility": u2})  # fmt: skip
    return rows


def test_seed_means_average_log10_quality_and_utility_per_step():
    means = seed_means(_rows())
    assert [(r["method"], r["step"]) for r in means] == [("finetuned", 0), ("m", 1), ("m", 2)]
    # Step 1: log10 quality mean (-4 + -2) / 2 = -3 -> 1e-3; utility (0.50 + 0.48) / 2 = 0.49.
    assert means[1]["forget_quality"] == pytest.approx(1e-3)
    assert means[1]["model_utility"] == pytest.approx(0.49)
    assert "seed" not in means[1]
    # Step 2: utility (0.40 + 0.46) / 2 = 0.43, under the 0.45 bar although seed 1 alone passes.
    assert means[2]["model_utility"] == pytest.approx(0.43)


def test_the_seeded_leaderboard_picks_the_step_on_the_mean_trajectory():
    (entry,) = leaderboard(_rows())
    # Step 2 has the better quality but its mean utility 0.43 < 0.45: step 1 wins.
    assert (entry["step"], entry["matched"], entry["seeds"]) == (1, True, 2)
    assert entry["forget_quality"] == pytest.approx(1e-3)
    # Two seeds at log10 -4 and -2: the percentile interval is the whole range (see above).
    fq = entry["intervals"]["forget_quality"]
    assert (fq["mean"], fq["low"], fq["high"]) == (pytest.approx(-3), -4, -2)
    assert board_cell(entry, "forget_quality") == "0.0010 [0.0001, 0.0100]"
    assert board_cell(entry, "model_utility") == "0.4900 [0.4800, 0.5000]"
    (summary,) = seed_summary(_rows(), [entry])
    assert summary["seeds"] == [0, 1]
    assert summary["scores"]["log10_forget_quality"]["mean"] == pytest.approx(-3)
    assert summary["scores"]["model_utility"]["n"] == 2


def test_rows_without_seeds_keep_the_plain_leaderboard():
    rows = [{k: v for k, v in r.items() if k != "seed"} for r in _rows() if r.get("seed", 0) == 0]
    (entry,) = leaderboard(rows)
    assert "intervals" not in entry and "seeds" not in entry
    assert board_cell(entry, "forget_quality") == "0.0001"
