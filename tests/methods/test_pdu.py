from __future__ import annotations

import pytest
import torch

from forgetbench.errors import ConfigError
from forgetbench.methods import UnlearnInputs
from forgetbench.methods.base import StatefulMethod
from forgetbench.methods.pdu import PDU, dual_update, flattening_loss

T, F = True, False


def _logits():
    # (B, T-1, V) = (2, 2, 3); sample 1's second position is padding.
    #   sample 0: [3, 0, 0] -> max 3, mean 1, gap 2 -> 4;   [1, 1, 1] -> gap 0 -> 0;  mean 2
    #   sample 1: [0, 3, 3] -> max 3, mean 2, gap 1 -> 1;                              mean 1
    #   flattening loss: samples mean(2, 1) = 1.5; tokens (4 + 0 + 1) / 3 = 5/3
    logits = torch.tensor(
        [[[3.0, 0.0, 0.0], [1.0, 1.0, 1.0]], [[0.0, 3.0, 3.0], [8.0, 0.0, 0.0]]],
        requires_grad=True,
    )
    return logits, torch.tensor([[T, T], [T, F]])


def _inputs(retain):
    logits, mask = _logits()
    return UnlearnInputs(
        forget_logits=logits,
        forget_mask=mask,
        forget_logps=torch.tensor([[-1.0, -1.0], [-2.0, 0.0]]),
        retain_logps=retain[0],
        retain_mask=retain[1],
    )


def test_flattening_loss_by_hand():
    logits, mask = _logits()
    assert flattening_loss(logits, mask, reduction="samples").item() == pytest.approx(1.5)
    assert flattening_loss(logits, mask).item() == pytest.approx(5 / 3)
    flattening_loss(logits, mask, reduction="samples").backward()
    # d/dz = 2 * gap * (onehot(argmax) - 1/V), / 2 tokens / 2 samples for sample 0's first row:
    # 2 * 2 * [2/3, -1/3, -1/3] / 4 = [2/3, -1/3, -1/3]: the top logit down, the rest up
    assert logits.grad[0, 0].tolist() == pytest.approx([2 / 3, -1 / 3, -1 / 3])
    assert logits.grad[0, 1].abs().sum() == 0  # already flat
    assert logits.grad[1, 1].abs().sum() == 0  # padding


def test_lagrangian_by_hand(retain):
    # samples: 1 * 1.5 + lambda (100) * (retain NLL 1.15 - eps 0.3) = 1.5 + 85 = 86.5
    loss, parts = PDU(loss_reduction="samples").loss(_inputs(retain))
    assert loss.item() == pytest.approx(86.5)
    assert parts["flattening"] == pytest.approx(1.5) and parts["retain_nll"] == pytest.approx(1.15)
    assert parts["forget_nll"] == pytest.approx(1.5)
    # tokens: 5/3 + 85 (the retain answers have equal lengths); forget NLL (1 + 1 + 2) / 3
    loss, parts = PDU().loss(_inputs(retain))
    assert loss.item() == pytest.approx(5 / 3 + 85)
    assert parts["forget_nll"] == pytest.approx(4 / 3)
    # the same loss at another dual value: 5/3 + 2 * 0.85
    loss, _, observed = PDU().stateful_loss(_inputs(retain), {"dual": 2.0})
    assert loss.item() == pytest.approx(5 / 3 + 1.7)
    assert observed["retain_nll"].item() == pytest.approx(1.15)


def test_dual_ascent_by_hand():
    # lambda + eta (L_R - eps), projected on lambda >= 0
    assert dual_update(100.0, 1.15, step_size=5.0, eps=0.3) == pytest.approx(104.25)
    assert dual_update(100.0, 0.1, step_size=5.0, eps=0.3) == pytest.approx(99.0)
    assert dual_update(0.5, 0.1, step_size=5.0, eps=0.3) == 0.0


def test_state_holds_through_the_warm_up_then_follows_the_constraint():
    method = PDU(retain_weight=10.0, dual_step_size=2.0, retain_eps=0.5, dual_warmup_epochs=2)
    assert isinstance(method, StatefulMethod)
    state = method.initial_state()
    assert state == {"dual": 10.0}
    for epoch in (0, 1):
        assert method.next_state(state, {"retain_nll": 3.0}, epoch=epoch) == state
    # epoch 2: violated by 2.5 -> 10 + 2 * 2.5 = 15; then satisfied with slack 0.25 -> 14.5
    state = method.next_state(state, {"retain_nll": 3.0}, epoch=2)
    assert state == {"dual": pytest.approx(15.0)}
    assert method.next_state(state, {"retain_nll": 0.25}, epoch=3) == {"dual": pytest.approx(14.5)}


def test_validation():
    with pytest.raises(ConfigError, match="pdu.retain_eps must be a finite number, got inf"):
        PDU(retain_eps=float("inf"))
    with pytest.raises(ConfigError, match="pdu.dual_step_size must be >= 0, got -1"):
        PDU(dual_step_size=-1)
    with pytest.raises(ConfigError, match="pdu.dual_warmup_epochs must be an integer >= 0"):
        PDU(dual_warmup_epochs=1.5)
    with pytest.raises(ConfigError, match="pdu.retain_weight must be >= 0, got -3"):
        PDU(retain_weight=-3)
