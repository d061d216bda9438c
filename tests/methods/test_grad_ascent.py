from __future__ import annotations

import pytest
import torch

from forgetbench.errors import ConfigError
from forgetbench.methods import UnlearnInputs
from forgetbench.methods.grad_ascent import GradAscent, grad_ascent_loss


def test_loss_by_hand(forget):
    logps, mask = forget
    # tokens (default): (1 + 2 + 0.5) / 3 answer tokens = 7/6 -> loss = -7/6
    loss, parts = GradAscent().loss(UnlearnInputs(forget_logps=logps, forget_mask=mask))
    assert loss.item() == pytest.approx(-7 / 6)
    assert parts == {"forget_nll": pytest.approx(7 / 6)}
    # samples: NLL per sample 1.5 and 0.5 -> L(F) = 1.0 -> loss = -1.0
    method = GradAscent(loss_reduction="samples")
    loss, parts = method.loss(UnlearnInputs(forget_logps=logps, forget_mask=mask))
    assert loss.item() == pytest.approx(-1.0)
    assert parts == {"forget_nll": pytest.approx(1.0)}
    assert grad_ascent_loss(torch.tensor([1.5, 0.5])).item() == pytest.approx(-1.0)


@pytest.mark.parametrize(
    ("reduction", "expected"),
    [
        # tokens: loss = sum logp / 3, so d/dlogp = 1/3 on every answer token.
        ("tokens", [[1 / 3, 1 / 3, 0.0], [1 / 3, 0.0, 0.0]]),
        # samples: loss = mean_b (sum_t logp_bt / |y_b|), so d/dlogp = 1/(B |y_b|).
        ("samples", [[0.25, 0.25, 0.0], [0.5, 0.0, 0.0]]),
    ],
)
def test_gradient_pushes_forget_logprobs_down(forget, reduction, expected):
    logps, mask = forget
    method = GradAscent(loss_reduction=reduction)
    loss, _ = method.loss(UnlearnInputs(forget_logps=logps, forget_mask=mask))
    loss.backward()
    # Positive gradient -> a descent step lowers log p (ascent on the NLL); 0 off the answer.
    torch.testing.assert_close(logps.grad, torch.tensor(expected))


def test_forget_weight_scales(forget):
    logps, mask = forget
    loss, _ = GradAscent(forget_weight=2.0).loss(
        UnlearnInputs(forget_logps=logps, forget_mask=mask)
    )
    assert loss.item() == pytest.approx(-7 / 3)


def test_validation():
    with pytest.raises(ConfigError, match="grad_ascent.forget_weight must be > 0, got 0"):
        GradAscent(forget_weight=0)
    with pytest.raises(ConfigError, match="grad_ascent.loss_reduction must be one of tokens, "):
        GradAscent(loss_reduction="sample")
