"""Faithfulness and robustness of a metric on rigged pools, worked out by hand."""

import pytest

from forgetbench.metrics.meta import (
    faithfulness,
    knows_direction,
    knows_threshold,
    quantisation_robustness,
    reads_forgotten,
    relearning_robustness,
    robustness,
)


def test_perfectly_separated_pools_give_1_in_the_declared_direction_and_0_against_it():
    positive, negative = [0.9, 0.8, 0.7], [0.1, 0.2]
    assert faithfulness(positive, negative, "higher") == 1.0
    # A "lower" metric reading these numbers ranks every positive model as knowing less.
    assert faithfulness(positive, negative, "lower") == 0.0


def test_identical_pools_give_one_half():
    assert faithfulness([0.5, 0.5], [0.5, 0.5], "higher") == 0.5
    # Pairs (0.1,0.1) tie 1/2, (0.1,0.9) 0, (0.9,0.1) 1, (0.9,0.9) 1/2: 2 of 4.
    assert faithfulness([0.1, 0.9], [0.1, 0.9], "higher") == 0.5


def test_ties_count_one_half():
    # 0.3 against (0.3, 0.5, 0.9): 1/2 + 0 + 0; 0.7 against them: 1 + 1 + 0. 2.5 of 6 pairs.
    assert faithfulness([0.3, 0.7], [0.3, 0.5, 0.9], "higher") == pytest.approx(2.5 / 6)
    # Read as "lower": 0.3 gives 1/2 + 1 + 1, 0.7 gives 0 + 0 + 1: 3.5 of 6, the complement.
    assert faithfulness([0.3, 0.7], [0.3, 0.5, 0.9], "lower") == pytest.approx(3.5 / 6)


def test_an_empty_pool_is_refused_by_its_name():
    with pytest.raises(ValueError, match="positive is empty"):
        faithfulness([], [0.1], "higher")
    with pytest.raises(ValueError, match="negative has non-finite"):
        faithfulness([0.2], [float("nan")], "higher")


@pytest.mark.parametrize(
    ("key", "form", "direction"),
    [
        ("forget/probability", "tofu_code", "higher"),
        ("forget/rougeL", "tofu_code", "higher"),
        # mean(min(R, 1/R)) is 1 for a model indifferent between true and false answers.
        ("forget/truth_ratio", "tofu_code", "lower"),
        ("forget/truth_ratio", "paper", "lower"),
        ("forget/truth_ratio", "prob_mean", "higher"),
        ("exact_memorisation", "tofu_code", "higher"),
        ("extraction_strength", "tofu_code", "higher"),
        ("mia/min_k_plus_plus", "tofu_code", "higher"),
        ("formats/cloze/forget", "tofu_code", "higher"),
        ("lume/regurgitation/Task1/forget", "tofu_code", "higher"),
        ("lume/mia/zlib", "tofu_code", "higher"),
        ("lume/mia_score", "tofu_code", "lower"),
        # Off the forget set, or relative to a retain model, or mixing sides: not judged.
        ("formats/cloze/retain", "tofu_code", None),
        ("lume/knowledge/Task2/retain", "tofu_code", None),
        ("retain/rougeL", "tofu_code", None),
        ("forget_quality", "tofu_code", None),
        ("privleak", "tofu_code", None),
        ("model_utility", "tofu_code", None),
        ("lume/final", "tofu_code", None),
        ("forget/questions", "tofu_code", None),
        # How many items an MIA scored: a count, the same for every model.
        ("mia/members", "tofu_code", None),
        ("lume/mia/nonmembers", "tofu_code", None),
        ("mia/loss/tpr@1%fpr", "tofu_code", "higher"),
    ],
)
def test_each_metric_has_a_declared_direction(key, form, direction):
    assert knows_direction(key, truth_ratio_form=form) == direction


def test_relearning_robustness_is_the_retain_models_move_over_the_unlearned_ones():
    # Unlearned 0.2 -> 0.8 (moves 0.6), retain 0.1 -> 0.4 (moves 0.3): R = 0.3 / 0.6.
    assert relearning_robustness((0.2, 0.8), (0.1, 0.4), "higher") == pytest.approx(0.5)
    # An unlearned model that relearns no faster than a retain model: capped at 1.
    assert relearning_robustness((0.2, 0.3), (0.1, 0.4), "higher") == 1.0
    # Not moving at all: nothing hidden came back.
    assert relearning_robustness((0.2, 0.2), (0.1, 0.4), "higher") == 1.0
    # A "lower" metric moves down as knowledge returns: 0.9 -> 0.3 is 0.6, 0.8 -> 0.5 is 0.3.
    assert relearning_robustness((0.9, 0.3), (0.8, 0.5), "lower") == pytest.approx(0.5)
    # Moving away from "knows" (0.5 -> 0.4) while the retain model learns: 0.3 / -0.1 < 0,
    # clipped to 0 as the paper's min(., 1) over a ratio in [0, 1].
    assert relearning_robustness((0.5, 0.4), (0.1, 0.4), "higher") == 0.0
    # Both moving away: 0.1 / 0.2 in "knows" units (-0.1 / -0.2).
    assert relearning_robustness((0.5, 0.3), (0.4, 0.3), "higher") == pytest.approx(0.5)


def test_quantisation_robustness_is_the_share_of_the_attacked_value_already_shown():
    assert quantisation_robustness(0.2, 0.8, "higher") == pytest.approx(0.25)
    assert quantisation_robustness(0.8, 0.4, "higher") == 1.0  # quantising lost knowledge
    assert quantisation_robustness(0.8, 0.4, "lower") == pytest.approx(0.5)
    # ROUGE-L 0 before, 0.4 after: the metric showed none of what came back.
    assert quantisation_robustness(0.0, 0.4, "higher") == 0.0
    # Nothing shown after quantising (higher) / everything shown before (lower): 1.
    assert quantisation_robustness(0.3, 0.0, "higher") == 1.0
    assert quantisation_robustness(0.0, 0.0, "higher") == 1.0
    assert quantisation_robustness(0.0, 0.2, "lower") == 1.0
    with pytest.raises(ValueError, match="non-negative"):
        quantisation_robustness(-0.1, 0.4, "higher")


def test_knows_threshold_is_the_accuracy_best_midpoint_between_the_pools():
    # Positive 0.9, 0.8, 0.3; negative 0.1, 0.2, 0.5. Cuts: 0.15 (4 right), 0.25 (5), 0.4 (4),
    # 0.65 (5), 0.85 (4): 0.25 and 0.65 tie, the lower one wins.
    positive, negative = [0.9, 0.8, 0.3], [0.1, 0.2, 0.5]
    assert knows_threshold(positive, negative, "higher") == pytest.approx(0.25)
    assert reads_forgotten(0.2, 0.25, "higher") and not reads_forgotten(0.3, 0.25, "higher")
    # A "lower" metric: the same pools negated. Cuts in -value space: -0.65 (5 right) first.
    threshold = knows_threshold([0.1, 0.2, 0.5], [0.9, 0.8, 0.3], "lower")
    assert threshold == pytest.approx(0.65)
    assert reads_forgotten(0.7, threshold, "lower") and not reads_forgotten(0.6, threshold, "lower")
    with pytest.raises(ValueError, match="two distinct"):
        knows_threshold([0.5], [0.5], "higher")


def test_robustness_is_the_harmonic_mean_of_both_attacks():
    # 2 * 0.5 * 0.25 / 0.75 = 1/3.
    assert robustness(0.5, 0.25) == pytest.approx(1 / 3)
    assert robustness(1.0, 1.0) == 1.0
    assert robustness(0.0, 1.0) == 0.0
