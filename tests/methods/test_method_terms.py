"""The shared terms in methods/_terms.py that every loss is built from."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from forgetbench.methods._terms import (
    answer_lengths,
    answer_token_logprobs,
    mean_nll,
    next_token_kl,
    per_sample_nll,
    sequence_logprob,
)
from forgetbench.records import IGNORE_INDEX


def test_sequence_logprob_and_mean_nll_by_hand(forget):
    logps, mask = forget
    # sums: -1 + -2 = -3 and -0.5; lengths 2 and 1; NLL 1.5 and 0.5
    assert sequence_logprob(logps, mask).tolist() == [-3.0, -0.5]
    assert answer_lengths(mask).tolist() == [2.0, 1.0]
    assert mean_nll(logps, mask).tolist() == [1.5, 0.5]


def test_mean_nll_ignores_values_under_the_mask():
    # A stray value at a masked position must not leak into the sum.
    logps = torch.tensor([[-1.0, -7.0]])
    mask = torch.tensor([[True, False]])
    assert mean_nll(logps, mask).tolist() == [1.0]


def test_mean_nll_matches_per_sample_nll_from_logits():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7)
    labels = torch.tensor(
        [[IGNORE_INDEX, IGNORE_INDEX, 3, 1, 4], [IGNORE_INDEX, 2, 6, 0, IGNORE_INDEX]]
    )
    logps, mask = answer_token_logprobs(logits, labels)
    torch.testing.assert_close(mean_nll(logps, mask), per_sample_nll(logits, labels))


def test_no_answer_tokens_is_an_error():
    with pytest.raises(ValueError, match="no answer tokens"):
        mean_nll(torch.zeros(1, 3), torch.zeros(1, 3, dtype=torch.bool))


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match=r"\(B, T-1\)"):
        sequence_logprob(torch.zeros(2, 3), torch.ones(2, 4, dtype=torch.bool))


def _kl_batch():
    # V = 2, T = 3. Reference logits are 0 everywhere: ref = [1/2, 1/2] at every position.
    # Current model differs at three places, each with probabilities [1/4, 3/4] or [3/4, 1/4]:
    #   KL([1/2,1/2] || [1/4,3/4]) = 1/2 ln(2) + 1/2 ln(2/3) = 1/2 ln(4/3)  =: k
    # sample 0 differs at positions 0 and 2; sample 1 at position 1.
    ln3 = math.log(3.0)
    current = torch.tensor(
        [
            [[0.0, ln3], [0.0, 0.0], [0.0, ln3]],
            [[0.0, 0.0], [ln3, 0.0], [0.0, 0.0]],
        ],
        requires_grad=True,
    )
    ref = torch.zeros(2, 3, 2)
    # labels: sample 0 answers at label positions 1, 2 (predicted by logits 0, 1);
    #         sample 1 answers at label position 2 (predicted by logit 1).
    label_mask = torch.tensor([[False, True, True], [False, False, True]])
    return current, ref, label_mask


K = 0.5 * math.log(4.0 / 3.0)


def test_next_token_kl_answer_positions_by_hand():
    current, ref, label_mask = _kl_batch()
    # sample 0: logits 0 and 1 -> KL k and 0 -> mean k/2; sample 1: logit 1 -> KL k -> mean k
    # batch mean: (k/2 + k)/2 = 3k/4 = 0.375 ln(4/3) = 0.10788
    value = next_token_kl(current, ref, label_mask, positions="answer")
    assert value.item() == pytest.approx(0.75 * K)
    assert value.item() == pytest.approx(0.10788077716941782)


def test_next_token_kl_all_positions_matches_open_unlearning_batchmean():
    current, ref, label_mask = _kl_batch()
    # all 6 positions: k at three of them -> 3k/6 = k/2 = 0.25 ln(4/3)
    value = next_token_kl(current, ref, label_mask, positions="all")
    assert value.item() == pytest.approx(0.5 * K)
    # open-unlearning / TOFU: kl_div(log_softmax(cur).view(-1,V), log_softmax(ref).view(-1,V),
    # reduction="batchmean", log_target=True)
    flat = F.kl_div(
        F.log_softmax(current, -1).view(-1, 2),
        F.log_softmax(ref, -1).view(-1, 2),
        reduction="batchmean",
        log_target=True,
    )
    assert value.item() == pytest.approx(flat.item())


def test_next_token_kl_direction_is_reference_first():
    # KL(ref || cur) with ref = [1/2, 1/2], cur = [1/4, 3/4] is 1/2 ln(4/3) = 0.1438;
    # the reverse KL(cur || ref) = 1/4 ln(1/2) + 3/4 ln(3/2) = 0.1308 would be a different number.
    current = torch.tensor([[[0.0, math.log(3.0)], [0.0, 0.0]]])
    ref = torch.zeros(1, 2, 2)
    value = next_token_kl(current, ref, torch.tensor([[False, True]]), positions="answer")
    assert value.item() == pytest.approx(K)
    assert value.item() != pytest.approx(0.25 * math.log(0.5) + 0.75 * math.log(1.5))


def test_next_token_kl_is_zero_with_zero_gradient_at_the_reference():
    torch.manual_seed(1)
    ref = torch.randn(2, 4, 5)
    label_mask = torch.tensor([[False, True, True, True], [False, False, True, False]])
    attention = torch.tensor([[True, True, True, True], [True, True, True, False]])
    for positions in ("sequence", "answer", "all"):
        current = ref.clone().requires_grad_(True)
        value = next_token_kl(
            current, ref, label_mask, positions=positions, attention_mask=attention
        )
        value.backward()
        assert value.item() == pytest.approx(0.0, abs=1e-7)
        assert current.grad.abs().max().item() < 1e-7


def _padded_kl_batch():
    # V = 2, T = 4, reference uniform everywhere. "A" = logits (0, ln 3): KL k from the reference;
    # "Z" = zeros: KL 0.
    #   sample 0: A Z A A   real tokens 0..2, token 3 is padding
    #   sample 1: Z A Z A   four real tokens
    ln3 = math.log(3.0)
    a, z = [0.0, ln3], [0.0, 0.0]
    current = torch.tensor([[a, z, a, a], [z, a, z, a]], requires_grad=True)
    attention = torch.tensor([[True, True, True, False], [True, True, True, True]])
    return current, torch.zeros(2, 4, 2), attention


def test_next_token_kl_sequence_positions_by_hand():
    # TOFU paper's equation: logit t counts if it predicts a real token t+1.
    #   sample 0: logits 0, 1 (logit 2 predicts padding, logit 3 is padding) -> (k + 0)/2 = k/2
    #   sample 1: logits 0, 1, 2 (logit 3 predicts past the end)             -> (0 + k + 0)/3
    #   batch mean: (k/2 + k/3)/2 = 5k/12
    current, ref, attention = _padded_kl_batch()
    value = next_token_kl(current, ref, positions="sequence", attention_mask=attention)
    assert value.item() == pytest.approx(5 * K / 12)
    # the TOFU / open-unlearning code instead averages all 8 positions, padding included:
    # k at 5 of them -> 5k/8
    assert next_token_kl(current, ref, positions="all").item() == pytest.approx(5 * K / 8)
    value.backward()
    # padding and each sequence's last position get no gradient; counted positions do
    assert current.grad[0, 2:].abs().max() == 0 and current.grad[1, 3].abs().max() == 0
    assert current.grad[0, 0].abs().max() > 0 and current.grad[1, 1].abs().max() > 0


def test_next_token_kl_rejects_unknown_positions_and_missing_masks():
    current, ref, label_mask = _kl_batch()
    with pytest.raises(ValueError, match="'sequence', 'answer' or 'all'"):
        next_token_kl(current, ref, label_mask, positions="prompt")
    with pytest.raises(ValueError, match="positions='sequence' needs attention_mask"):
        next_token_kl(current, ref, label_mask)
    with pytest.raises(ValueError, match="positions='answer' needs label_mask"):
        next_token_kl(current, ref, positions="answer")
