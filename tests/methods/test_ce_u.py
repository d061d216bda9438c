from __future__ import annotations

import math

import pytest
import torch

from forgetbench.errors import ConfigError
from forgetbench.methods import UnlearnInputs
from forgetbench.methods.ce_u import CEU, ce_u_loss, skip_first_tokens

T, F = True, False
LN2 = math.log(2.0)


def _case():
    # One sample, answer tokens at positions 0 and 1 (position 2 is padding), V = 3.
    #   pos 0: z = [0, 0, 0], true token 2 -> q = softmax([0, 0, -inf]) = [1/2, 1/2, 0]
    #          p = 1/3 each: CE = -(1/2 ln 1/3 + 1/2 ln 1/3) = ln 3 = 1.098612
    #   pos 1: z = [ln 2, 0, 0], true token 0 -> q = [0, 1/2, 1/2]; p = [1/2, 1/4, 1/4]
    #          CE = -(1/2 ln 1/4 + 1/2 ln 1/4) = ln 4 = 1.386294
    #          (= H(q) - ln(1 - p_y) = ln 2 + ln 2)
    logits = torch.tensor([[[0.0, 0.0, 0.0], [LN2, 0.0, 0.0], [7.0, 1.0, 0.0]]], requires_grad=True)
    targets = torch.tensor([[2, 0, 0]])
    mask = torch.tensor([[T, T, F]])
    return logits, targets, mask


def test_skip_first_tokens():
    mask = torch.tensor([[F, T, T, T, F], [T, F, F, F, F]])
    assert skip_first_tokens(mask, 1).tolist() == [[F, F, T, T, F], [F, F, F, F, F]]
    assert skip_first_tokens(mask, 0).tolist() == mask.tolist()


def test_loss_by_hand():
    logits, targets, mask = _case()
    # every answer token: mean(ln 3, ln 4) = 1.242453
    assert ce_u_loss(logits, targets, mask).item() == pytest.approx(1.2424533248940002)
    # the paper's default skips the first answer token: ln 4 alone
    loss, parts = CEU().loss(
        UnlearnInputs(
            forget_logits=logits,
            forget_targets=targets,
            forget_mask=mask,
            forget_logps=torch.tensor([[-1.0, -2.0, 0.0]]),
        )
    )
    assert loss.item() == pytest.approx(math.log(4))
    assert parts["forget_nll"] == pytest.approx(1.5)


def test_gradient_is_p_minus_q_the_true_token_pushed_down():
    logits, targets, mask = _case()
    ce_u_loss(logits, targets, skip_first_tokens(mask, 1)).backward()
    # pos 1: p - q = [1/2, 1/4 - 1/2, 1/4 - 1/2]; skipped and padding positions get nothing
    assert logits.grad[0, 1].tolist() == pytest.approx([0.5, -0.25, -0.25])
    assert logits.grad[0, 0].abs().sum() == 0 and logits.grad[0, 2].abs().sum() == 0


def test_gradient_equals_that_of_minus_log_one_minus_p():
    z = torch.tensor([[[1.5, -0.3, 0.2, 0.9]]], requires_grad=True)
    ce_u_loss(z, torch.tensor([[0]]), torch.tensor([[True]])).backward()
    w = z.detach().clone().requires_grad_(True)
    (-torch.log1p(-torch.softmax(w, dim=-1)[0, 0, 0])).backward()
    torch.testing.assert_close(z.grad, w.grad)


def test_a_batch_of_one_token_answers_has_nothing_left_to_unlearn():
    logits = torch.zeros(2, 2, 3, requires_grad=True)
    inputs = UnlearnInputs(
        forget_logits=logits,
        forget_targets=torch.zeros(2, 2, dtype=torch.long),
        forget_mask=torch.tensor([[T, F], [T, F]]),
        forget_logps=torch.tensor([[-1.0, 0.0], [-1.0, 0.0]]),
    )
    loss, parts = CEU().loss(inputs)
    assert loss.item() == 0.0 and parts["ce_u"] == 0.0


def test_validation():
    with pytest.raises(ConfigError, match="ce_u.ignore_first_answer_tokens must be an integer"):
        CEU(ignore_first_answer_tokens=-1)
    with pytest.raises(ConfigError, match="ce_u.forget_weight must be > 0, got 0"):
        CEU(forget_weight=0)
