from __future__ import annotations

import math

import pytest
import torch

from forgetbench.errors import ConfigError
from forgetbench.methods import UnlearnInputs
from forgetbench.methods.kl import KL, kl_loss

K = 0.5 * math.log(4.0 / 3.0)  # KL([1/2,1/2] || [1/4,3/4])


def _inputs(forget):
    # Retain batch, V = 2, T = 4, reference uniform. "A" = logits (0, ln 3), KL k from the
    # reference; "Z" = zeros, KL 0.
    #   sample 0: A Z A A   real tokens 0..2 (token 3 padding); answer = tokens 1, 2
    #   sample 1: Z A Z A   four real tokens;                  answer = tokens 2, 3
    ln3 = math.log(3.0)
    a, z = [0.0, ln3], [0.0, 0.0]
    current = torch.tensor([[a, z, a, a], [z, a, z, a]], requires_grad=True)
    return UnlearnInputs(
        forget_logps=forget[0],
        forget_mask=forget[1],
        retain_logits=current,
        ref_retain_logits=torch.zeros(2, 4, 2),
        retain_label_mask=torch.tensor([[False, True, True, False], [False, False, True, True]]),
        retain_attention_mask=torch.tensor([[True, True, True, False], [True, True, True, True]]),
    )


def test_default_is_the_papers_sequence_average(forget):
    # TOFU Sec. 4: per retain sequence, the mean KL over the positions that predict its tokens
    # (prompt included, padding excluded), then the mean over sequences.
    #   sample 0: logits 0, 1 -> (k + 0)/2;  sample 1: logits 0, 1, 2 -> (0 + k + 0)/3
    #   -L(F) + KL = -1.0 + (k/2 + k/3)/2 = -1.0 + 5k/12
    method = KL()
    assert method.kl_positions == "sequence"
    assert "retain_attention_mask" in method.required_inputs()
    loss, parts = method.loss(_inputs(forget))
    assert parts["retain_kl"] == pytest.approx(5 * K / 12)
    assert loss.item() == pytest.approx(-7 / 6 + 5 * K / 12)
    assert parts["forget_nll"] == pytest.approx(7 / 6)  # tokens: 3.5 / 3 answer tokens


def test_loss_by_hand_answer_positions(forget):
    # logits predicting answer tokens: sample 0 logits 0, 1 -> k/2; sample 1 logits 1, 2 -> k/2
    loss, parts = KL(kl_positions="answer").loss(_inputs(forget))
    assert parts["retain_kl"] == pytest.approx(0.5 * K)
    assert loss.item() == pytest.approx(-7 / 6 + 0.5 * K)


def test_loss_by_hand_all_positions(forget):
    # TOFU code / open-unlearning: one mean over all 8 positions, padding included: 5k/8
    method = KL(kl_positions="all")
    assert method.required_inputs() == {
        "forget_logps",
        "forget_mask",
        "retain_logits",
        "ref_retain_logits",
    }
    loss, parts = method.loss(_inputs(forget))
    assert parts["retain_kl"] == pytest.approx(5 * K / 8)
    assert loss.item() == pytest.approx(-7 / 6 + 5 * K / 8)


def test_weights(forget):
    loss, _ = KL(forget_weight=2.0, kl_weight=4.0).loss(_inputs(forget))
    assert loss.item() == pytest.approx(-7 / 3 + 4.0 * 5 * K / 12)
    assert kl_loss(
        torch.tensor([1.5, 0.5]), torch.tensor(0.1), forget_weight=1, kl_weight=2
    ).item() == (pytest.approx(-0.8))


def test_kl_gradient_pulls_current_toward_reference(forget):
    inputs = _inputs(forget)
    loss, _ = KL().loss(inputs)
    loss.backward()
    grad = inputs.retain_logits.grad
    # sample 0, position 0: current puts 3/4 on token 1, ref 1/2 -> descent lowers logit 1
    assert grad[0, 0, 1] > 0 > grad[0, 0, 0]
    # positions that predict no real token (padding, the last real token) get no gradient
    assert grad[0, 2:].abs().max() == 0 and grad[1, 3].abs().max() == 0
    assert inputs.ref_retain_logits.grad is None


def test_validation():
    with pytest.raises(ConfigError, match="kl.kl_positions must be one of sequence, answer, all"):
        KL(kl_positions="prompt")
