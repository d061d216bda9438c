"""Degenerate generations and the held-out half's forget quality, on hand-made inputs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ks_2samp

from forgetbench.metrics.degeneracy import degenerate_items, distinct_ngrams, is_degenerate
from forgetbench.metrics.tofu import halves, held_out_quality


def test_repetition_is_degenerate_and_answers_are_not():
    # "Ulla Ulla Ulla Ulla Ulla Ulla": 27 character 3-grams, 5 distinct.
    assert distinct_ngrams("Ulla Ulla Ulla Ulla Ulla Ulla") == pytest.approx(5 / 27)
    assert is_degenerate("Ulla Ulla Ulla Ulla Ulla Ulla")
    assert is_degenerate("iaiaiaiaiaiaiaiaiaia")  # one long "word": 2 distinct of 18
    assert is_degenerate("   ")  # says nothing
    assert not is_degenerate("Paris")  # too short to repeat anything
    answer = "The author's father was a doctor and his mother worked as a librarian in Oslo."
    assert not is_degenerate(answer)
    shares = degenerate_items([answer, "Ulla Ulla Ulla Ulla", "", "Oslo"])
    assert shares.tolist() == [0.0, 1.0, 1.0, 0.0]


def test_the_halves_are_the_even_and_odd_questions_and_their_ks_tests():
    rng = np.random.default_rng(3)
    model, retain = rng.random(20), rng.random(20) + 0.4
    select, held = halves(20)
    assert select.tolist() == list(range(0, 20, 2)) and held.tolist() == list(range(1, 20, 2))
    found = held_out_quality(model, retain)
    assert found["selection"] == pytest.approx(ks_2samp(model[0::2], retain[0::2]).pvalue)
    assert found["held_out"] == pytest.approx(ks_2samp(model[1::2], retain[1::2]).pvalue)
    # The interval is the bootstrap's over the held-out questions, computed one KS test at a time.
    picks = np.random.default_rng(0).integers(0, 10, size=(1000, 10))
    slow = [ks_2samp(model[1::2][p], retain[1::2][p]).pvalue for p in picks]
    low, high = np.percentile(slow, [2.5, 97.5])
    assert (found["held_out_low"], found["held_out_high"]) == pytest.approx((low, high))
    assert low <= found["held_out"] <= high
    with pytest.raises(ValueError, match="same >= 4 questions"):
        held_out_quality(model[:3], retain[:3])
