import zlib

import numpy as np
import pytest

from forgetbench.metrics import METRICS, mia, mia_roc

# One 3-token item used throughout: log-probs -0.1, -2.0, -0.5 (sum -2.6).
LOGPS = [np.array([-0.1, -2.0, -0.5])]


def test_loss_score_is_mean_token_logprob():
    # -2.6 / 3 = -0.8666...
    assert mia.loss_score(LOGPS)[0] == pytest.approx(-2.6 / 3)
    # a lower-loss item scores higher: higher = member
    scores = mia.loss_score([np.array([-0.1, -0.1]), np.array([-3.0, -1.0])])
    assert scores.tolist() == pytest.approx([-0.1, -2.0])


def test_zlib_score_divides_mean_logprob_by_compressed_bytes():
    # zlib.compress(b"abc") is 11 bytes: 2 header + 5 deflate + 4 Adler-32 checksum.
    assert len(zlib.compress(b"abc")) == 11
    assert mia.zlib_score(LOGPS, ["abc"])[0] == pytest.approx((-2.6 / 3) / 11)
    # same loss, more complex (longer compressed) text -> closer to 0 -> more member-like
    simple, complex_ = mia.zlib_score(LOGPS * 2, ["aaaaaaaaaaaa", "q7#Lm2@xZ9!w"])
    assert complex_ > simple


def test_min_k_score_by_hand():
    # k = 0.4: int(0.4 * 3) = 1 token, the lowest: -2.0
    assert mia.min_k_score(LOGPS)[0] == pytest.approx(-2.0)
    # k = 0.7: int(2.1) = 2 tokens: mean(-2.0, -0.5) = -1.25
    assert mia.min_k_score(LOGPS, k=0.7)[0] == pytest.approx(-1.25)
    # k = 1: every token, the LOSS score
    assert mia.min_k_score(LOGPS, k=1.0)[0] == pytest.approx(-2.6 / 3)
    # k * n < 1 still scores one token rather than the mean of nothing
    assert mia.min_k_score([np.array([-0.3, -0.9])], k=0.1)[0] == pytest.approx(-0.9)


def test_min_k_plus_plus_score_by_hand():
    mu = [np.array([-0.5, -1.0, -1.5])]
    sigma = [np.array([0.5, 2.0, 1.0])]
    # z = (-0.1 + 0.5) / 0.5 = 0.8; (-2.0 + 1.0) / 2.0 = -0.5; (-0.5 + 1.5) / 1.0 = 1.0
    # k = 0.4 -> 1 token: -0.5; k = 0.7 -> 2 tokens: mean(-0.5, 0.8) = 0.15
    assert mia.min_k_plus_plus_score(LOGPS, mu, sigma)[0] == pytest.approx(-0.5)
    assert mia.min_k_plus_plus_score(LOGPS, mu, sigma, k=0.7)[0] == pytest.approx(0.15)


def test_min_k_plus_plus_floors_a_vanishing_std():
    # sigma 0 -> raised to min_std = 1e-3: (-0.1 - (-0.2)) / 1e-3 = 100
    score = mia.min_k_plus_plus_score([np.array([-0.1])], [np.array([-0.2])], [np.array([0.0])])
    assert score[0] == pytest.approx(100.0)


def test_reference_score_by_hand():
    # target mean -2.6/3 = -0.8667; reference mean (-0.2 - 1.0 - 0.3) / 3 = -0.5 -> -0.3667
    # the reference may tokenise differently: only the means are compared
    ref = [np.array([-0.2, -1.0, -0.3])]
    assert mia.reference_score(LOGPS, ref)[0] == pytest.approx(-2.6 / 3 + 0.5)
    assert mia.reference_score(LOGPS, [np.array([-1.0, -0.0])])[0] == pytest.approx(-2.6 / 3 + 0.5)


def test_attack_auc_is_one_on_separable_scores_and_zero_reversed():
    members, nonmembers = np.array([0.9, 0.8, 0.7]), np.array([0.1, 0.2])
    assert mia_roc.attack_auc(members, nonmembers) == 1.0
    assert mia_roc.attack_auc(nonmembers, members) == 0.0


def test_attack_auc_by_hand_with_a_tie():
    # pairs (member, nonmember): (3,1) win, (3,2) win, (2,1) win, (2,2) tie -> (3 + 0.5) / 4
    assert mia_roc.attack_auc(np.array([3.0, 2.0]), np.array([1.0, 2.0])) == pytest.approx(0.875)


def test_attack_auc_is_chance_on_one_distribution():
    rng = np.random.default_rng(0)
    members = mia.loss_score(list(rng.normal(-1.0, 0.5, size=(2000, 8))))
    nonmembers = mia.loss_score(list(rng.normal(-1.0, 0.5, size=(2000, 8))))
    assert mia_roc.attack_auc(members, nonmembers) == pytest.approx(0.5, abs=0.05)


def test_privleak_by_hand():
    # ((1 - 0.8) - (1 - 0.5)) / (1 - 0.5) * 100 = (0.2 - 0.5) / 0.5 * 100 = -60
    assert mia_roc.privleak(0.8, 0.5) == pytest.approx(-60.0)
    # as leaky as the retain model -> 0; less familiar than holdout -> positive
    assert mia_roc.privleak(0.6, 0.6) == pytest.approx(0.0)
    assert mia_roc.privleak(0.3, 0.5) == pytest.approx(40.0)


def test_privleak_rejects_a_perfect_retain_auc_and_out_of_range_values():
    with pytest.raises(ValueError, match="retain_auc == 1"):
        mia_roc.privleak(0.7, 1.0)
    with pytest.raises(ValueError, match="auc must be in"):
        mia_roc.privleak(1.2, 0.5)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: mia.loss_score([np.array([])]), r"token_logps\[0\] must be a non-empty"),
        (lambda: mia.loss_score([np.array([-1.0, np.nan])]), "non-finite"),
        (lambda: mia.loss_score([]), "token_logps is empty"),
        (lambda: mia.zlib_score(LOGPS, ["a", "b"]), "2 texts for 1"),
        (lambda: mia.min_k_score(LOGPS, k=0.0), "k must be in"),
        (lambda: mia.min_k_score(LOGPS, k=1.5), "got 1.5"),
        (
            lambda: mia.min_k_plus_plus_score(LOGPS, [np.array([0.0])], [np.array([1.0])]),
            "aligned per token",
        ),
        (
            lambda: mia.min_k_plus_plus_score(LOGPS, LOGPS, [np.array([1.0, -1.0, 1.0])]),
            "negative",
        ),
        (lambda: mia.reference_score(LOGPS, LOGPS * 2), "1 target items for 2"),
        (lambda: mia_roc.attack_auc(np.array([]), np.array([0.1])), "member_scores is empty"),
    ],
)
def test_invalid_inputs_raise_naming_the_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_every_attack_has_a_registered_metric():
    assert set(mia.ATTACKS) == {"loss", "zlib", "min_k", "min_k_plus_plus"}
    for name in mia.ATTACKS:
        assert METRICS[f"mia/{name}"].direction == "closer_to_retain"
    assert METRICS["privleak"].direction == "closer_to_retain"
