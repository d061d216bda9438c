from __future__ import annotations

import math

import pytest
import torch

from forgetbench.errors import ConfigError
from forgetbench.methods import UnlearnInputs
from forgetbench.methods.satimp import SatImp, satimp_loss, satimp_weights
from forgetbench.methods.wga import wga_loss


def _inputs(forget, retain=None):
    return UnlearnInputs(
        forget_logps=forget[0],
        forget_mask=forget[1],
        retain_logps=None if retain is None else retain[0],
        retain_mask=None if retain is None else retain[1],
    )


def _w(p: float) -> float:
    return p**5 * (1 - p)  # beta1 = 5, beta2 = 1


def test_loss_by_hand(forget, retain):
    # weights p^5 (1 - p):  e^-1 -> 0.00673795 * 0.632121 = 0.00425919
    #                       e^-2 -> 4.53999e-5 * 0.864665 = 3.92557e-5
    #                       e^-0.5 -> 0.0820850 * 0.393469 = 0.0322979
    #   sample 0: (0.00425919 * -1 + 3.92557e-5 * -2) / 2 = -0.00216885
    #   sample 1:  0.0322979 * -0.5                       = -0.0161490
    #   SatImp term (samples): mean = -0.00915891; + 0.1 * retain NLL 1.15 = 0.115
    loss, parts = SatImp(loss_reduction="samples").loss(_inputs(forget, retain))
    assert parts["satimp"] == pytest.approx(-0.00915890912831807)
    assert parts["retain_nll"] == pytest.approx(1.15)
    assert loss.item() == pytest.approx(-0.00915890912831807 + 0.115)
    # tokens: (-0.00425919 - 2 * 3.92557e-5 - 0.5 * 0.0322979) / 3 = -0.00682889
    loss, parts = SatImp().loss(_inputs(forget, retain))
    assert parts["satimp"] == pytest.approx(-0.006828891, rel=1e-6)
    assert loss.item() == pytest.approx(-0.006828891 + 0.115, rel=1e-6)


def test_weights_peak_at_beta1_over_beta1_plus_beta2():
    # d/dp [p^5 (1-p)] = 0 at p = 5/6: the weight there beats its neighbours and both ends
    logps = torch.log(torch.tensor([[0.5, 0.8, 5 / 6, 0.9, 0.999]]))
    w = satimp_weights(logps, beta1=5.0, beta2=1.0)[0]
    assert int(w.argmax()) == 2
    assert w[2].item() == pytest.approx(_w(5 / 6))
    assert w[4].item() == pytest.approx(_w(0.999), rel=1e-4) and w[4].item() < 0.001  # float32


def test_beta2_zero_is_wga(forget):
    # (1 - p)^0 = 1: only the saturation weight p^beta1 is left, WGA's with beta = beta1
    assert satimp_loss(*forget, beta1=2.0, beta2=0.0).item() == pytest.approx(
        wga_loss(*forget, beta=2.0).item()
    )


def test_gradient_lowers_every_answer_token(forget):
    logps, mask = forget
    satimp_loss(logps, mask, beta1=5.0, beta2=1.0, reduction="samples").backward()
    # d/dlogp_t = w_t / (B |y|), the weight held constant
    expected = [[_w(math.exp(-1)) / 4, _w(math.exp(-2)) / 4, 0.0], [_w(math.exp(-0.5)) / 2, 0, 0]]
    assert logps.grad.tolist() == [pytest.approx(row) for row in expected]
    assert (logps.grad[mask] > 0).all()


def test_validation():
    with pytest.raises(ConfigError, match="satimp.beta1 must be >= 0, got -5"):
        SatImp(beta1=-5)
    with pytest.raises(ConfigError, match="satimp.beta2 must be >= 0, got nan"):
        SatImp(beta2=float("nan"))
    with pytest.raises(ConfigError, match="satimp.forget_weight must be > 0, got 0"):
        SatImp(forget_weight=0)
