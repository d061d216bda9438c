from __future__ import annotations

import math

import pytest
import torch

from forgetbench.errors import ConfigError
from forgetbench.methods import UnlearnInputs
from forgetbench.methods.undial import UNDIAL, undial_loss, undial_targets

LN4 = math.log(4.0)
T, F = True, False


def _case():
    # Two samples, two positions each, V = 3; position 1 of sample 0 and of sample 1 are masked
    # out (their logits are arbitrary and must not count).
    #   sample 0, pos 0: ref z = [0, 0, 0], target 0, beta = ln 4 -> adjusted [-ln 4, 0, 0]
    #       q = [1/4, 1, 1] / 2.25 = [1/9, 4/9, 4/9];  current z = [ln 2, 0, 0] -> p = [1/2, 1/4, 1/4]
    #       CE = -(1/9 ln 1/2 + 8/9 ln 1/4) = (1/9 + 16/9) ln 2 = 17/9 ln 2 = 1.309278
    #   sample 1, pos 0: ref [0, 0, 0], target 1 -> q = [4/9, 1/9, 4/9]; current uniform
    #       CE = ln 3 = 1.098612
    #   loss = mean(1.309278, 1.098612) = 1.203945
    logits = torch.tensor(
        [[[math.log(2.0), 0.0, 0.0], [5.0, -5.0, 1.0]], [[0.0, 0.0, 0.0], [9.0, 0.0, 0.0]]],
        requires_grad=True,
    )
    ref = torch.tensor([[[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]])
    targets = torch.tensor([[0, 2], [1, 0]])
    mask = torch.tensor([[T, F], [T, F]])
    return logits, ref, targets, mask


def test_adjusted_targets_by_hand():
    q = undial_targets(torch.zeros(1, 1, 3), torch.tensor([[0]]), beta=LN4)
    assert q[0, 0].tolist() == pytest.approx([1 / 9, 4 / 9, 4 / 9])


def test_loss_by_hand():
    logits, ref, targets, mask = _case()
    loss = undial_loss(logits, ref, targets, mask, beta=LN4)
    assert loss.item() == pytest.approx((17 / 9 * math.log(2) + math.log(3)) / 2)
    assert loss.item() == pytest.approx(1.2039451481962256)


def test_gradient_pushes_the_forgotten_token_down_and_ignores_masked_positions():
    logits, ref, targets, mask = _case()
    undial_loss(logits, ref, targets, mask, beta=LN4).backward()
    # d/dz = (p - q) / B at counted positions: sample 0: [1/2 - 1/9, 1/4 - 4/9, 1/4 - 4/9] / 2
    assert logits.grad[0, 0].tolist() == pytest.approx([7 / 36, -7 / 72, -7 / 72])
    assert logits.grad[1, 0].tolist() == pytest.approx([(1 / 3 - 4 / 9) / 2, 1 / 9, -1 / 18])
    assert logits.grad[1, 0, 1] > 0  # sample 1's target token 1 is pushed down
    assert logits.grad[:, 1].abs().sum() == 0


def test_at_the_start_the_target_token_is_pushed_down_by_beta():
    # Student == teacher: the gradient on z_y is p_y - q_y > 0 for any beta > 0, and grows with it
    z = torch.tensor([[[2.0, 0.5, -1.0]]])
    grads = []
    for beta in (1.0, 10.0):
        logits = z.clone().requires_grad_(True)
        undial_loss(logits, z, torch.tensor([[0]]), torch.tensor([[True]]), beta=beta).backward()
        grads.append(logits.grad[0, 0, 0].item())
    assert 0 < grads[0] < grads[1]


def test_method_reads_the_engine_fields(forget, retain):
    logits, ref, targets, mask = _case()
    inputs = UnlearnInputs(
        forget_logits=logits,
        ref_forget_logits=ref,
        forget_targets=targets,
        forget_mask=mask,
        forget_logps=torch.tensor([[-1.0, 0.0], [-0.5, 0.0]]),
        retain_logps=retain[0],
        retain_mask=retain[1],
    )
    loss, parts = UNDIAL(beta=LN4).loss(inputs)
    assert loss.item() == pytest.approx(1.2039451481962256)
    assert parts["forget_nll"] == pytest.approx(0.75)
    assert "retain_nll" not in parts  # the paper's default: no retain term
    loss, parts = UNDIAL(beta=LN4, retain_weight=2.0).loss(inputs)
    assert loss.item() == pytest.approx(1.2039451481962256 + 2 * 1.15)


def test_validation():
    with pytest.raises(ConfigError, match="undial.beta must be > 0, got 0"):
        UNDIAL(beta=0)
    with pytest.raises(ConfigError, match="undial.retain_weight must be >= 0, got -1"):
        UNDIAL(retain_weight=-1)
