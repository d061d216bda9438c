from __future__ import annotations

import math

import pytest
import torch

from forgetbench.errors import ConfigError
from forgetbench.methods import UnlearnInputs
from forgetbench.methods.dpo import DPO, dpo_loss


def _inputs(forget, ref_forget, idk, ref_idk, retain=None):
    return UnlearnInputs(
        forget_logps=forget[0],
        forget_mask=forget[1],
        ref_forget_logps=ref_forget,
        refusal_logps=idk[0],
        refusal_mask=idk[1],
        ref_refusal_logps=ref_idk,
        retain_logps=None if retain is None else retain[0],
        retain_mask=None if retain is None else retain[1],
    )


# Summed log-probs (conftest):
#   chosen (refusal):   pi -3, -3     ref -4, -1    -> log-ratio  1, -2
#   rejected (answer):  pi -3, -0.5   ref -2, -0.5  -> log-ratio -1,  0
#   margin = chosen ratio - rejected ratio = 2, -2
# beta = 0.1: loss = -mean(log sigmoid(0.2), log sigmoid(-0.2))
#                  = mean(softplus(-0.2), softplus(0.2)) = (0.598139 + 0.798139)/2 = 0.698139
PAPER = 0.6981388693815918


def test_loss_by_hand_paper_scale(forget, ref_forget, idk, ref_idk):
    loss, parts = DPO().loss(_inputs(forget, ref_forget, idk, ref_idk))
    assert loss.item() == pytest.approx(PAPER)
    assert parts["dpo"] == pytest.approx(PAPER)
    assert "retain_nll" not in parts


def test_open_unlearning_scale_is_two_over_beta(forget, ref_forget, idk, ref_idk):
    # 2/beta = 20 -> 13.962777
    loss, _ = DPO(scale="open_unlearning").loss(_inputs(forget, ref_forget, idk, ref_idk))
    assert loss.item() == pytest.approx(20 * PAPER)


def test_optional_retain_term(forget, ref_forget, idk, ref_idk, retain):
    # + 0.5 * L(R) = 0.5 * 1.15
    method = DPO(retain_weight=0.5)
    assert {"retain_logps", "retain_mask"} <= method.required_inputs()
    loss, parts = method.loss(_inputs(forget, ref_forget, idk, ref_idk, retain))
    assert loss.item() == pytest.approx(PAPER + 0.575)
    assert parts["retain_nll"] == pytest.approx(1.15)


def test_pure_function_and_gradient_direction():
    chosen = torch.tensor([-3.0, -3.0], requires_grad=True)
    rejected = torch.tensor([-3.0, -0.5], requires_grad=True)
    loss = dpo_loss(
        chosen, torch.tensor([-4.0, -1.0]), rejected, torch.tensor([-2.0, -0.5]), beta=0.1
    )
    assert loss.item() == pytest.approx(PAPER)
    loss.backward()
    # d/d rejected_b = beta * sigmoid(-beta m_b) / B > 0 (descent lowers the true answer);
    # d/d chosen_b = -that (descent raises the refusal).
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    expected = [0.1 * sig(-0.2) / 2, 0.1 * sig(0.2) / 2]
    assert rejected.grad.tolist() == pytest.approx(expected)
    assert chosen.grad.tolist() == pytest.approx([-e for e in expected])


def test_reference_gets_no_gradient(forget, ref_forget, idk, ref_idk):
    ref = ref_forget.clone().requires_grad_(True)
    loss, _ = DPO().loss(_inputs(forget, ref, idk, ref_idk))
    loss.backward()
    assert ref.grad is None


def test_validation():
    with pytest.raises(ConfigError, match="dpo.beta must be > 0, got 0"):
        DPO(beta=0)
    with pytest.raises(ConfigError, match="dpo.scale must be one of paper, open_unlearning"):
        DPO(scale="2/beta")
