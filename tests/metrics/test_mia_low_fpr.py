"""TPR at a low FPR, and the shadow-model attacks (LiRA, RMIA), on hand-made and rigged scores."""

import numpy as np
import pytest

from forgetbench.metrics import METRICS, mia_roc, mia_shadow
from forgetbench.train.mini import shadow_memberships


def test_tpr_at_fpr_interpolates_a_tied_segment_by_hand():
    # 4 members, 150 non-members: one at 0.75, one tied with a member at 0.65, 148 at 0.
    # ROC points by threshold: start (0, 0); 0.9 -> (0, .25); 0.8 -> (0, .5); 0.75 -> (1/150, .5);
    # 0.7 -> (1/150, .75); 0.65 (one member and one non-member) -> (2/150, 1); 0 -> (1, 1).
    # At FPR 0.01 = 1.5/150 the curve is on the diagonal segment (1/150, .75)-(2/150, 1):
    # .75 + .25 * (0.01 - 1/150) / (1/150) = .75 + .25 * 0.5 = 0.875.
    members = [0.9, 0.8, 0.7, 0.65]
    nonmembers = [0.75, 0.65] + [0.0] * 148
    assert mia_roc.tpr_at_fpr(members, nonmembers, 0.01) == pytest.approx(0.875)
    # At exactly 1/150 the curve runs vertically from .5 to .75: the top of the run counts.
    assert mia_roc.tpr_at_fpr(members, nonmembers, 1 / 150) == pytest.approx(0.75)
    # 0.1% needs 1000 non-members; 150 cannot show any FPR below 1/150.
    assert mia_roc.tpr_at_fpr(members, nonmembers, 0.001) is None
    summary = mia_roc.attack_summary("mia/x", members, nonmembers)
    assert summary["mia/x/tpr@1%fpr"] == pytest.approx(0.875)
    assert summary["mia/x/tpr@0.1%fpr"] is None
    # AUC by hand: each member beats 148 zeros; 0.9, 0.8 beat both others; 0.7 beats 0.65;
    # 0.65 ties 0.65 (a half). (150 + 150 + 149 + 148.5) / (4 * 150) = 597.5 / 600.
    assert summary["mia/x"] == pytest.approx(597.5 / 600)


def test_resolvable_needs_one_over_fpr_nonmembers():
    assert mia_roc.min_nonmembers(0.01) == 100
    assert mia_roc.min_nonmembers(0.001) == 1000
    # Members all above every non-member: TPR 1 at any FPR, once there are enough non-members.
    assert mia_roc.tpr_at_fpr([2.0, 3.0], [0.0] * 99, 0.01) is None
    assert mia_roc.tpr_at_fpr([2.0, 3.0], [0.0] * 100, 0.01) == 1.0
    # Members all below: no member is flagged before 100 % FPR.
    assert mia_roc.tpr_at_fpr([-1.0, -2.0], list(np.linspace(0, 1, 100)), 0.01) == 0.0
    with pytest.raises(ValueError, match="fpr"):
        mia_roc.min_nonmembers(0.0)
    with pytest.raises(ValueError, match="empty"):
        mia_roc.tpr_at_fpr([], [0.0] * 100, 0.01)


def test_new_attack_keys_are_declared_metrics():
    for name in ("tpr@1%fpr", "tpr@0.1%fpr", "reference", "lira", "rmia"):
        assert METRICS[f"mia/{name}"].direction == "closer_to_retain"


def _rigged(n: int, shadows: int, *, gap: float, seed: int):
    """Candidates whose difficulty varies a lot (base log-likelihood N(-2, 0.5)), shadows that
    add `gap` to what they trained on, plus small noise; returns (base, shadow scores, masks)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(-2.0, 0.5, size=n)
    masks = np.array(shadow_memberships(n, shadows, seed=seed, split="forget10"))
    scores = base + gap * masks + rng.normal(0, 0.05, size=masks.shape)
    return rng, base, scores, masks


@pytest.mark.parametrize("attack", ["lira", "rmia"])
def test_shadow_attacks_find_separated_members(attack):
    # 300 members then 300 non-members; the target trained on the members (gap 0.5 on them).
    rng, base, scores, masks = _rigged(600, 4, gap=0.5, seed=1)
    member = np.arange(600) < 300
    target = base + 0.5 * member + rng.normal(0, 0.05, size=600)
    if attack == "lira":
        s = mia_shadow.lira_score(target, scores, masks)
    else:
        s = mia_shadow.rmia_score(target, scores)
    out = mia_roc.attack_summary("a", s[member], s[~member])
    assert out["a/tpr@1%fpr"] > 0.95
    assert out["a"] > 0.99
    # The LOSS score alone drowns in the spread of difficulty (0.5 vs sd 0.5): far from it.
    loss = mia_roc.attack_summary("a", target[member], target[~member])
    assert loss["a/tpr@1%fpr"] < 0.5


@pytest.mark.parametrize("attack", ["lira", "rmia"])
def test_shadow_attacks_are_at_chance_when_membership_is_shuffled(attack):
    # The target trained on a random half that has nothing to do with the labels we score.
    rng, base, scores, masks = _rigged(4000, 4, gap=0.5, seed=2)
    trained = rng.permutation(4000) < 2000
    target = base + 0.5 * trained + rng.normal(0, 0.05, size=4000)
    member = np.arange(4000) < 2000
    if attack == "lira":
        s = mia_shadow.lira_score(target, scores, masks)
    else:
        s = mia_shadow.rmia_score(target, scores)
    out = mia_roc.attack_summary("a", s[member], s[~member])
    # 2000 non-members: 1 % FPR = 20 false positives; chance TPR 0.01, binomial sd ~0.003.
    assert out["a/tpr@1%fpr"] == pytest.approx(0.01, abs=0.01)
    assert out["a"] == pytest.approx(0.5, abs=0.04)


def test_lira_by_hand_on_two_candidates():
    # 2 shadows; candidate 0 IN shadow 0 (score 0) OUT shadow 1 (-1); candidate 1 the reverse
    # (IN shadow 1: 0, OUT shadow 0: -2). mu_in = (0, 0), mu_out = (-1, -2); every IN and OUT
    # score equals its mean, so both pooled sigmas hit the 1e-3 floor... use min_std=1 to keep
    # numbers readable: score = -(s - mu_in)^2 / 2 + (s - mu_out)^2 / 2.
    scores = np.array([[0.0, -2.0], [-1.0, 0.0]])
    masks = np.array([[True, False], [False, True]])
    s = mia_shadow.lira_score([0.0, -1.0], scores, masks, min_std=1.0)
    # candidate 0: s = 0 -> -0 + 1/2 = 0.5; candidate 1: s = -1 -> -1/2 + 1/2 = 0.
    assert s == pytest.approx([0.5, 0.0])
    with pytest.raises(ValueError, match="at least one shadow"):
        mia_shadow.lira_score([0.0, -1.0], scores, np.array([[True, True], [True, False]]))


def test_rmia_by_hand_on_three_candidates():
    # 2 shadows with equal scores on each candidate -> mean_i Pr(x|theta_i) = exp(shadow score):
    # log ratio = target - shadow = (1, 0, -1). gamma = 1: x beats z when its log ratio is >=.
    # candidate 0 beats both others (1.0), candidate 1 beats candidate 2 (0.5), candidate 2 none.
    shadows = np.array([[-1.0, -1.0, -1.0], [-1.0, -1.0, -1.0]])
    s = mia_shadow.rmia_score([0.0, -1.0, -2.0], shadows)
    assert s == pytest.approx([1.0, 0.5, 0.0])
    # gamma = e^1.5: only a log-ratio lead of 1.5 counts: candidate 0 over candidate 2 only.
    assert mia_shadow.rmia_score([0.0, -1.0, -2.0], shadows, gamma=np.exp(1.5)) == pytest.approx(
        [0.5, 0.0, 0.0]
    )
