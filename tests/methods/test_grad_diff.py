from __future__ import annotations

import pytest
import torch

from forgetbench.errors import ConfigError
from forgetbench.methods import UnlearnInputs
from forgetbench.methods.grad_diff import GradDiff, grad_diff_loss


def _inputs(forget, retain):
    return UnlearnInputs(
        forget_logps=forget[0], forget_mask=forget[1], retain_logps=retain[0], retain_mask=retain[1]
    )


def test_loss_by_hand(forget, retain):
    # samples: -1 * L(F) + 1 * L(R) = -1.0 + 1.15 = 0.15
    loss, parts = GradDiff(loss_reduction="samples").loss(_inputs(forget, retain))
    assert loss.item() == pytest.approx(0.15)
    assert parts == {"forget_nll": pytest.approx(1.0), "retain_nll": pytest.approx(1.15)}
    # tokens: L(F) = 3.5/3 tokens; the retain answers have 2 tokens each, so L(R) = 4.6/4 = 1.15
    loss, parts = GradDiff().loss(_inputs(forget, retain))
    assert loss.item() == pytest.approx(-3.5 / 3 + 1.15)
    assert parts == {"forget_nll": pytest.approx(3.5 / 3), "retain_nll": pytest.approx(1.15)}


def test_weights_by_hand(forget, retain):
    # -2 * 1.0 + 0.5 * 1.15 = -1.425
    method = GradDiff(forget_weight=2.0, retain_weight=0.5, loss_reduction="samples")
    loss, _ = method.loss(_inputs(forget, retain))
    assert loss.item() == pytest.approx(-1.425)
    value = grad_diff_loss(
        torch.tensor([1.5, 0.5]), torch.tensor([0.3, 2.0]), forget_weight=2.0, retain_weight=0.5
    )
    assert value.item() == pytest.approx(-1.425)


def test_gradient_signs(forget, retain):
    loss, _ = GradDiff().loss(_inputs(forget, retain))
    loss.backward()
    # forget: +1/(B|y|) (descent lowers forget log p); retain: -1/(B|y|) = -0.25 (descent raises it)
    assert (forget[0].grad[forget[1]] > 0).all()
    torch.testing.assert_close(retain[0].grad, torch.full((2, 2), -0.25))


def test_zero_retain_weight_needs_no_retain_data(forget):
    method = GradDiff(retain_weight=0.0)
    assert method.required_inputs() == {"forget_logps", "forget_mask"}
    loss, parts = method.loss(UnlearnInputs(forget_logps=forget[0], forget_mask=forget[1]))
    assert loss.item() == pytest.approx(-3.5 / 3)
    assert "retain_nll" not in parts


def test_validation():
    with pytest.raises(ConfigError, match="grad_diff.retain_weight must be >= 0, got -1"):
        GradDiff(retain_weight=-1)
