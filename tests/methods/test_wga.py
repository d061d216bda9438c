from __future__ import annotations

import math

import pytest
import torch

from forgetbench.errors import ConfigError
from forgetbench.methods import UnlearnInputs
from forgetbench.methods.grad_ascent import GradAscent
from forgetbench.methods.wga import WGA, wga_loss


def _inputs(forget, retain=None):
    return UnlearnInputs(
        forget_logps=forget[0],
        forget_mask=forget[1],
        retain_logps=None if retain is None else retain[0],
        retain_mask=None if retain is None else retain[1],
    )


def test_loss_by_hand(forget, retain):
    # beta = 1, weights p = e^logp (detached):
    #   sample 0: (e^-1 * -1 + e^-2 * -2) / 2 = (-0.367879 - 0.270671) / 2 = -0.319275
    #   sample 1:  e^-0.5 * -0.5                                         = -0.303265
    #   WGA term (samples): mean = -0.311270; + retain NLL 1.15 (weight 1)
    loss, parts = WGA(loss_reduction="samples").loss(_inputs(forget, retain))
    assert parts["wga"] == pytest.approx(-0.3112701668393253)
    assert parts["forget_nll"] == pytest.approx(1.0)
    assert parts["retain_nll"] == pytest.approx(1.15)
    assert loss.item() == pytest.approx(-0.3112701668393253 + 1.15)
    # tokens: (-0.367879 - 0.270671 - 0.303265) / 3 answer tokens = -0.313938
    loss, parts = WGA().loss(_inputs(forget, retain))
    assert parts["wga"] == pytest.approx(-0.3139385, rel=1e-6)
    assert parts["forget_nll"] == pytest.approx(3.5 / 3)
    assert loss.item() == pytest.approx(-0.3139385 + 1.15, rel=1e-6)


def test_beta_sharpens_the_weights_and_zero_is_grad_ascent(forget):
    # beta = 2: (e^-2 * -1 + e^-4 * -2)/2 = -0.085983;  e^-1 * -0.5 = -0.183940;  mean -0.134962
    assert wga_loss(*forget, beta=2.0, reduction="samples").item() == pytest.approx(
        -0.13496150054638084
    )
    # beta = 0: every weight 1, so the term is -L(F), grad_ascent's loss, in either reduction
    ga, _ = GradAscent().loss(_inputs(forget))
    assert wga_loss(*forget, beta=0.0).item() == pytest.approx(ga.item())
    assert ga.item() == pytest.approx(-3.5 / 3)
    ga, _ = GradAscent(loss_reduction="samples").loss(_inputs(forget))
    assert wga_loss(*forget, beta=0.0, reduction="samples").item() == pytest.approx(ga.item())


def test_gradient_lowers_every_answer_token_most_where_still_likely(forget):
    logps, mask = forget
    wga_loss(logps, mask, beta=1.0, reduction="samples").backward()
    # d/dlogp_t = p_t / (B |y|): e^-1/4, e^-2/4, e^-0.5/2; 0 on masked positions
    expected = [[math.exp(-1) / 4, math.exp(-2) / 4, 0.0], [math.exp(-0.5) / 2, 0.0, 0.0]]
    assert logps.grad.tolist() == [pytest.approx(row) for row in expected]
    assert (logps.grad[mask] > 0).all()


def test_the_weight_is_not_differentiated():
    # With the weight detached the gradient is p^beta/(B|y|); differentiating through p^beta too
    # would give (1 + beta) p^beta/(B|y|) per token: here 2 * e^-1 instead of e^-1.
    logps = torch.tensor([[-1.0]], requires_grad=True)
    wga_loss(logps, torch.tensor([[True]]), beta=1.0).backward()
    assert logps.grad.item() == pytest.approx(math.exp(-1))


def test_retain_weight_zero_needs_no_retain_batch(forget):
    method = WGA(retain_weight=0.0)
    assert method.required_inputs() == {"forget_logps", "forget_mask"}
    loss, parts = method.loss(_inputs(forget))
    assert "retain_nll" not in parts and loss.item() == pytest.approx(-0.3139385, rel=1e-6)


def test_validation():
    with pytest.raises(ConfigError, match="wga.beta must be >= 0, got -1"):
        WGA(beta=-1)
    with pytest.raises(ConfigError, match="wga.forget_weight must be > 0, got 0"):
        WGA(forget_weight=0)
    with pytest.raises(ConfigError, match="wga.retain_weight must be >= 0, got -0.5"):
        WGA(retain_weight=-0.5)
