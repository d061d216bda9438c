import pytest

from forgetbench.attacks.recovery import knowledge_recovered, steps_to_reach


def test_knowledge_recovered_is_zero_unchanged_and_one_at_the_finetuned_score():
    assert knowledge_recovered(0.2, 0.2, 0.9) == 0.0
    assert knowledge_recovered(0.9, 0.2, 0.9) == 1.0
    assert knowledge_recovered(0.55, 0.2, 0.9) == pytest.approx(0.5)
    # A metric that falls as knowledge returns (truth ratio on the forget set) reads the same.
    assert knowledge_recovered(0.4, 0.8, 0.0) == pytest.approx(0.5)


def test_nothing_forgotten_means_nothing_to_recover():
    assert knowledge_recovered(0.5, 0.9, 0.9005) is None
    assert knowledge_recovered(None, 0.2, 0.9) is None


def test_steps_to_reach_the_target():
    curve = [(0, 0.2), (5, 0.5), (10, 0.85), (15, 0.95)]
    assert steps_to_reach(curve, 1.0, fraction=0.9) == 15
    assert steps_to_reach(curve, 0.9, fraction=0.9) == 10
    assert steps_to_reach(curve, 0.2, fraction=0.9) == 0
    assert steps_to_reach(curve, 2.0, fraction=0.9) is None
    assert steps_to_reach(curve, None, fraction=0.9) is None
