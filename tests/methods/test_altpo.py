from __future__ import annotations

import math

import pytest

from forgetbench.errors import ConfigError
from forgetbench.methods import UnlearnInputs
from forgetbench.methods.altpo import AltPO


def _inputs(forget, ref_forget, alternate, ref_alternate, retain=None):
    return UnlearnInputs(
        forget_logps=forget[0],
        forget_mask=forget[1],
        ref_forget_logps=ref_forget,
        alternate_logps=alternate[0],
        alternate_mask=alternate[1],
        ref_alternate_logps=ref_alternate,
        retain_logps=None if retain is None else retain[0],
        retain_mask=None if retain is None else retain[1],
    )


# The `idk` fixture's texts stand in for the alternate answers.
#   alternate (chosen) log-ratio: (-3) - (-4) = 1,    (-3) - (-1) = -2
#   forget (rejected) log-ratio:  (-3) - (-2) = -1,   (-0.5) - (-0.5) = 0
#   margins: 1 - (-1) = 2,  -2 - 0 = -2
#   beta 0.1: -(2/0.1) * mean(logsigmoid(0.2), logsigmoid(-0.2))
#           = -20 * (-0.598139 - 0.798139) / 2 = 13.962777
ALTPO_TERM = 13.962777387631835


def test_loss_by_hand(forget, ref_forget, idk, ref_idk, retain):
    loss, parts = AltPO().loss(_inputs(forget, ref_forget, idk, ref_idk, retain))
    assert parts["altpo"] == pytest.approx(ALTPO_TERM)
    # tokens: (2 + 1 + 3) / 3 alternate answer tokens (samples: mean of 1.5 and 3.0 = 2.25)
    assert parts["alternate_nll"] == pytest.approx(2.0)
    assert loss.item() == pytest.approx(ALTPO_TERM + 1.15)


def test_gradient_raises_the_alternate_and_lowers_the_true_answer(forget, ref_forget, idk, ref_idk):
    loss, _ = AltPO(retain_weight=0.0).loss(_inputs(forget, ref_forget, idk, ref_idk))
    loss.backward()
    # d/d(chosen sum) = -(2/beta) * beta * sigmoid(-beta * margin) / B = -sigmoid(-0.1 m)
    sig = [1 / (1 + math.exp(0.2)), 1 / (1 + math.exp(-0.2))]
    alternate = idk[0].grad
    assert alternate[0, :2].tolist() == pytest.approx([-sig[0], -sig[0]])
    assert alternate[1, 0].item() == pytest.approx(-sig[1]) and alternate[1, 1] == 0
    assert forget[0].grad[0, :2].tolist() == pytest.approx([sig[0], sig[0]])
    assert (forget[0].grad[forget[1]] > 0).all()


def test_retain_weight_zero_needs_no_retain_batch():
    assert not AltPO(retain_weight=0.0).required_inputs() & {"retain_logps", "retain_mask"}


def test_validation():
    with pytest.raises(ConfigError, match="altpo.beta must be > 0, got 0"):
        AltPO(beta=0)
    with pytest.raises(ConfigError, match="altpo.retain_weight must be >= 0, got -1"):
        AltPO(retain_weight=-1)
