"""Pure tensor terms shared by finetuning and every method. No model in here: tests feed logits."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from forgetbench.records import IGNORE_INDEX


def answer_token_logprobs(logits: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """log p of each label token given its prefix.

    logits: (B, T, V) next-token logits; labels: (B, T) with IGNORE_INDEX outside the answer.
    Returns (logps, mask), both (B, T-1): logps is 0 where mask is 0. Logits are upcast to fp32
    before the softmax so bf16 models do not lose the small probabilities the metrics need.

    The softmax runs over the last, contiguous dimension. `cross_entropy` over the transposed
    (B, V, T-1) view takes another CPU kernel that rounds worse in float32 (on a 32k vocabulary a
    mean answer NLL 5e-6 off float64 instead of 8e-7, single tokens 1.3e-5 instead of 4.5e-6) and
    is twice as slow forward and backward; HF's `outputs.loss` also reduces over the last dimension.
    """
    shifted_logits = logits[:, :-1, :].float()
    targets = labels[:, 1:]
    mask = targets != IGNORE_INDEX
    safe_targets = targets.masked_fill(~mask, 0)
    logps = F.log_softmax(shifted_logits, dim=-1).gather(-1, safe_targets.unsqueeze(-1))
    return logps.squeeze(-1) * mask, mask


def require(condition: Tensor, message: str) -> None:
    """Raise ValueError(`message`) unless the one-element bool tensor `condition` holds. The
    device checks it (`torch._assert_async`): a GPU training step never waits for the answer,
    and a failure ends the run at the step's read (a device-side assertion, where CUDA keeps no
    message); the CPU checks at once."""
    try:
        torch._assert_async(condition, message)
    except RuntimeError as exc:
        raise ValueError(message) from exc


def per_sample_nll(logits: Tensor, labels: Tensor) -> Tensor:
    """(B, T, V), (B, T) -> (B,): mean NLL over each sample's answer tokens (TOFU's finetuning
    loss before the batch mean). A sample with no answer token is an error upstream."""
    logps, mask = answer_token_logprobs(logits, labels)
    counts = mask.sum(dim=1)
    require(
        (counts > 0).all(), "a sample has no answer tokens; the prompt filled the whole max_length"
    )
    return -logps.sum(dim=1) / counts


# --- Terms over per-token log-probs -------------------------------------------------------------
# The engine runs `answer_token_logprobs` once per batch; every method then works on the (B, T-1)
# log-probs and their mask, so the same numbers feed NLL, NPO, DPO and SimNPO alike.


def _check_pair(logps: Tensor, mask: Tensor, what: str) -> None:
    if logps.shape != mask.shape or logps.dim() != 2:
        raise ValueError(
            f"{what}: log-probs and mask must both be (B, T-1), got "
            f"{tuple(logps.shape)} and {tuple(mask.shape)}"
        )


def answer_lengths(mask: Tensor) -> Tensor:
    """(B, T-1) bool -> (B,) float: |y|, the number of answer tokens of each sample."""
    counts = mask.sum(dim=1)
    require(
        (counts > 0).all(), "a sample has no answer tokens; the prompt filled the whole max_length"
    )
    return counts.to(torch.float32)


def sequence_logprob(logps: Tensor, mask: Tensor) -> Tensor:
    """(B, T-1), (B, T-1) -> (B,): log pi(y|x) = sum of the answer tokens' log-probs.

    The *summed* form is what NPO (Zhang et al. 2024, eq. 3) and DPO (Rafailov et al. 2023, eq. 7)
    put inside their sigmoids; `get_batch_loss` in the TOFU code sums the same way.
    """
    _check_pair(logps, mask, "sequence_logprob")
    answer_lengths(mask)  # same no-answer check as every other term
    return (logps.float() * mask).sum(dim=1)


def mean_nll(logps: Tensor, mask: Tensor) -> Tensor:
    """(B, T-1), (B, T-1) -> (B,): L, the mean answer-token NLL of each sample.

    Equals `per_sample_nll(logits, labels)` when `logps, mask = answer_token_logprobs(...)`.
    """
    return -sequence_logprob(logps, mask) / answer_lengths(mask)


# How a token-averaged term (an NLL, a weighted NLL, a per-position cross entropy) averages over a
# batch whose answers have different lengths (`unlearn.loss_reduction`, docs/methods.md):
# "tokens": one mean over every counted token of the batch, so a long answer weighs more — HF's
#   `outputs.loss`, which TOFU's and open-unlearning's trainers use (forgetbench's default);
# "samples": each sample's mean over its own tokens, then the mean over samples — the papers'
#   E_x[(1/|y|) sum_t ...]. The two agree when every answer of the batch has the same length.
LOSS_REDUCTIONS = ("tokens", "samples")


def token_mean(values: Tensor, mask: Tensor, reduction: str) -> Tensor:
    """(B, T-1), (B, T-1) -> scalar: `values` averaged over the masked tokens by `reduction`
    ("tokens": pooled over the batch; "samples": `answer_mean`). A sample with no counted token
    adds nothing to either (CE-U's skipped first token can empty a short answer)."""
    if reduction == "samples":
        return answer_mean(values, mask)
    if reduction != "tokens":
        raise ValueError(f"loss reduction must be 'tokens' or 'samples', got {reduction!r}")
    _check_pair(values, mask, "token_mean")
    mask = mask.bool()
    count = mask.sum()
    require(count > 0, "token_mean: no sample of the batch has a token left to average")
    return (values.float() * mask).sum() / count


def batch_nll(logps: Tensor, mask: Tensor, reduction: str) -> Tensor:
    """(B, T-1), (B, T-1) -> scalar: the batch's answer-token NLL under `reduction` ("samples" is
    `mean_nll(...).mean()`; "tokens" equals HF's `outputs.loss` on the same labels)."""
    if reduction == "samples":
        return mean_nll(logps, mask).mean()
    _check_pair(logps, mask, "batch_nll")
    answer_lengths(mask)  # same no-answer check as the per-sample form
    return -token_mean(logps, mask, reduction)


def answer_mean(values: Tensor, mask: Tensor) -> Tensor:
    """(B, T-1), (B, T-1) -> scalar: each sample's mean of `values` over its masked tokens, then
    the mean over the samples that have any (a sample whose tokens are all masked out, e.g. by
    CE-U's skipped first token, drops out rather than dividing by zero)."""
    _check_pair(values, mask, "answer_mean")
    mask = mask.bool()
    counts = mask.sum(dim=1)
    present = counts > 0
    require(present.any(), "answer_mean: no sample of the batch has a token left to average")
    per_sample = (values * mask).sum(dim=1)[present] / counts[present].to(values.dtype)
    return per_sample.mean()


def soft_cross_entropy(logits: Tensor, target_probs: Tensor) -> Tensor:
    """(B, T-1, V), (B, T-1, V) -> (B, T-1): -sum_v q_v log softmax(logits)_v at each position,
    the cross entropy of the model's next-token distribution against a soft target q."""
    return -(target_probs * F.log_softmax(logits.float(), dim=-1)).sum(dim=-1)


def next_token_kl(
    logits: Tensor,
    ref_logits: Tensor,
    label_mask: Tensor | None = None,
    *,
    positions: str = "sequence",
    attention_mask: Tensor | None = None,
) -> Tensor:
    """KL(ref || current) between next-token distributions -> scalar.

    logits, ref_logits: (B, T, V) of the current and the frozen reference model on the same
    retain batch. Which logit positions count (`positions`):

    - "sequence": every position that predicts a real token of its sequence, prompt and answer
      alike (logit t predicts token t+1; `attention_mask` (B, T) marks the real tokens, padding is
      excluded), averaged per sample, then over the batch. This is the TOFU paper's Sec. 4
      equation, (1/|S_R|) sum_s (1/|s|) sum_{i=2..|s|} KL(M_ref(s_<i) || M(s_<i)).
    - "answer": only positions that predict an answer token (`label_mask` (B, T), True where
      labels != IGNORE_INDEX), averaged per sample, then over the batch — the same average over
      the tokens the finetuning loss trained.
    - "all": every one of the B*T positions of the padded batch, padding and each sequence's last
      position included, averaged — what the TOFU code (`dataloader.py`, loss "KL") and
      open-unlearning's `compute_kl_divergence` compute (`kl_div(..., reduction="batchmean")` on
      logits flattened to (B*T, V)). Its value depends on how much padding the batch has.
    """
    if logits.shape != ref_logits.shape or logits.dim() != 3:
        raise ValueError(
            f"next_token_kl: logits and ref_logits must both be (B, T, V), got "
            f"{tuple(logits.shape)} and {tuple(ref_logits.shape)}"
        )
    log_p = F.log_softmax(logits.float(), dim=-1)
    log_q = F.log_softmax(ref_logits.float(), dim=-1)
    # sum_v q (log q - log p): `kl_div(input=log p, target=log q)` is KL(q || p), q = reference.
    per_position = F.kl_div(log_p, log_q, reduction="none", log_target=True).sum(dim=-1)  # (B, T)
    if positions == "all":
        return per_position.mean()
    if positions == "sequence":
        mask, name = attention_mask, "attention_mask"
    elif positions == "answer":
        mask, name = label_mask, "label_mask"
    else:
        raise ValueError(
            f"next_token_kl: positions must be 'sequence', 'answer' or 'all', got {positions!r}"
        )
    if mask is None or mask.shape != logits.shape[:2]:
        got = None if mask is None else tuple(mask.shape)
        raise ValueError(
            f"next_token_kl: positions={positions!r} needs {name} of shape (B, T) = "
            f"{tuple(logits.shape[:2])}, got {got}"
        )
    mask = mask.bool()
    # (B, T-1): logit t counts if it predicts a real token t+1 ("sequence": t must be real too,
    # which right or left padding both need) or answer label t+1 ("answer").
    counted = mask[:, :-1] & mask[:, 1:] if positions == "sequence" else mask[:, 1:]
    per_token = per_position[:, :-1] * counted
    return (per_token.sum(dim=1) / answer_lengths(counted)).mean()


def global_grad_norm(grads: Sequence[Tensor]) -> Tensor:  # per-parameter tensors -> scalar
    """Joint L2 norm over all parameters: sqrt(sum_i ||g_i||^2), in float32 or wider."""
    if not grads:
        raise ValueError("global_grad_norm: no gradients given")
    squares = [g.detach().double().pow(2).sum() for g in grads]
    return torch.stack(squares).sum().sqrt()
