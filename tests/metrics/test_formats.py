import math

import numpy as np
import pytest

from forgetbench.metrics import METRICS
from forgetbench.metrics.formats import cloze_probability, mc_choice, mc_success


def test_mc_choice_picks_the_highest_offered_letter():
    four = {"A": -2.0, "B": -1.0, "C": -0.1, "D": -3.0}
    # the same model outputs, but the question offers only A and B: C (the model's favourite,
    # -0.1) is not an option, so B (-1.0 > -2.0) is chosen
    two = {letter: four[letter] for letter in "AB"}
    assert mc_choice([four, two]).tolist() == [2, 1]


def test_mc_choice_breaks_ties_towards_the_first_letter_in_any_key_order():
    assert mc_choice([{"B": -0.5, "A": -0.5}, {"C": -0.2, "B": -0.2, "A": -1.0}]).tolist() == [0, 1]


def test_mc_success_by_hand():
    questions = [
        {"A": -2.0, "B": -1.0, "C": -0.1, "D": -3.0},  # chooses C
        {"A": -2.0, "B": -1.0},  # chooses B
        {"A": -0.3, "B": -1.0, "C": -2.0},  # chooses A
    ]
    assert mc_success(questions, [2, 0, 0]).tolist() == [1.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: mc_choice([{"A": -1.0, "C": -2.0}]), "must offer the first 2-4"),
        (lambda: mc_choice([{"a": -1.0, "b": -2.0}]), "got letters"),
        (lambda: mc_choice([{"A": -1.0}]), "first 2-4"),
        (lambda: mc_choice([{"A": -1.0, "B": math.nan}]), "NaN"),
        (lambda: mc_success([{"A": -1.0, "B": -2.0}], [2]), r"labels\[0\] = 2 is not an offered"),
        (lambda: mc_success([{"A": -1.0, "B": -2.0}], [0, 1]), "1 questions for 2 labels"),
    ],
)
def test_mc_rejects_invalid_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_cloze_probability_is_the_length_normalised_probability():
    # 3 tokens each of p = 1/2: sum = 3 ln 0.5 -> (1/8)^(1/3) = 0.5
    # 2 tokens, p = 1/4 overall: (1/4)^(1/2) = 0.5; 1 token with p = 1: 1
    sums = np.array([3 * math.log(0.5), math.log(0.25), 0.0])
    assert cloze_probability(sums, np.array([3, 2, 1])).tolist() == pytest.approx([0.5, 0.5, 1.0])


def test_cloze_probability_rejects_bad_counts():
    with pytest.raises(ValueError, match="positive whole counts"):
        cloze_probability(np.array([-1.0]), np.array([0]))
    with pytest.raises(ValueError, match="shape"):
        cloze_probability(np.array([-1.0, -2.0]), np.array([1]))


def test_format_metrics_are_registered():
    for name in ("format_mc_success", "cloze_probability", "format_rougeL"):
        assert METRICS[name].direction == "closer_to_retain"
