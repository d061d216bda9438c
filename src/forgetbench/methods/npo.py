"""Negative preference optimisation: DPO with only a rejected answer.

Zhang, Lin, Bai and Mei 2024, "Negative Preference Optimization: From Catastrophic Collapse to
Effective Unlearning" (COLM), eq. 3:

    L_NPO = (2/beta) E_F[ log(1 + (pi(y|x) / ref(y|x))^beta) ]
          = (2/beta) E_F[ softplus(beta * (log pi(y|x) - log ref(y|x))) ]
    minimise  w_f * L_NPO + w_r * retain term

(softplus(z) = log(1 + e^z) = -log sigmoid(-z)). log pi(y|x) is the *summed* answer-token
log-prob, as in the paper and its code (the TOFU-derived `get_batch_loss`); the reference is the
frozen start model, precomputed once. The gradient is grad-ascent's gradient reweighted by
2 * sigmoid(beta * log-ratio) in (0, 2), which fades as the forget answer becomes unlikely: that
is why NPO collapses exponentially slower than grad_ascent. As beta -> 0 the weight tends to 1 and
NPO's gradient tends to grad_ascent's on summed log-probs (paper, Sec. 3).

Retain term (the paper's NPO+RT): `retain_loss="nll"` (default; L(R)) or "kl" (KL to the start
model on retain data, open-unlearning's `retain_loss_type: KL`). `length_normalized=True` divides
both log-probs by |y| before the log-ratio (a variant, not the paper's form).

The NPO term is a mean over samples of a sequence-level quantity in every reduction (the paper and
open-unlearning's `compute_dpo_loss`); `loss_reduction` sets how the retain NLL averages over its
batch ("tokens", default: over every answer token, open-unlearning's `outputs.loss`; "samples":
per sample, then over the batch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch.nn.functional as F
from torch import Tensor

from forgetbench.methods._terms import answer_lengths, batch_nll, sequence_logprob
from forgetbench.methods.base import (
    KL_POSITIONS,
    METHODS,
    RETAIN_LOSSES,
    Parts,
    UnlearnInputs,
    check_choice,
    check_nonnegative,
    check_positive,
    check_reduction,
    require_inputs,
    retain_inputs,
    retain_regulariser,
)


def npo_loss(logp: Tensor, ref_logp: Tensor, *, beta: float) -> Tensor:  # (B,), (B,) -> scalar
    """(2/beta) * mean softplus(beta * (logp - ref_logp)).

    d loss / d logp_b = (2/B) * sigmoid(beta * (logp_b - ref_logp_b)) > 0, so a descent step
    lowers the forget answers' log-likelihood; 1/B at the start, where logp == ref_logp.
    """
    return (2.0 / beta) * F.softplus(beta * (logp - ref_logp)).mean()


@METHODS.register("npo")
@dataclass(frozen=True)
class NPO:
    name: ClassVar[str] = "npo"
    needs: ClassVar[frozenset[str]] = frozenset(
        {"forget_logps", "forget_mask", "ref_forget_logps", "retain_logps", "retain_mask"}
    )

    beta: float = 0.1  # paper, TOFU experiments
    forget_weight: float = 1.0  # open-unlearning's gamma
    retain_weight: float = 1.0  # NPO+RT; 0 = plain NPO (open-unlearning's alpha)
    retain_loss: Literal["nll", "kl"] = "nll"
    kl_positions: Literal["sequence", "answer", "all"] = "sequence"  # retain_loss="kl": kl.py
    length_normalized: bool = False  # variant: log-probs divided by |y|
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # retain NLL; _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_reduction(self.name, self.loss_reduction)
        check_positive(self.name, "beta", self.beta)
        check_positive(self.name, "forget_weight", self.forget_weight)
        check_nonnegative(self.name, "retain_weight", self.retain_weight)
        check_choice(self.name, "retain_loss", self.retain_loss, RETAIN_LOSSES)
        check_choice(self.name, "kl_positions", self.kl_positions, KL_POSITIONS)

    def required_inputs(self) -> frozenset[str]:
        forget = frozenset({"forget_logps", "forget_mask", "ref_forget_logps"})
        if self.retain_weight == 0:
            return forget
        return forget | retain_inputs(self.retain_loss, self.kl_positions)

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        require_inputs(self.name, inputs, self.required_inputs())
        logp = sequence_logprob(inputs.forget_logps, inputs.forget_mask)  # (B,)
        ref_logp = sequence_logprob(inputs.ref_forget_logps.detach(), inputs.forget_mask)
        if self.length_normalized:
            lengths = answer_lengths(inputs.forget_mask)
            logp, ref_logp = logp / lengths, ref_logp / lengths
        forget_term = npo_loss(logp, ref_logp, beta=self.beta)
        parts = {
            "npo": forget_term.detach(),
            "forget_nll": batch_nll(
                inputs.forget_logps, inputs.forget_mask, self.loss_reduction
            ).detach(),
        }
        total = self.forget_weight * forget_term
        if self.retain_weight > 0:
            retain, part = retain_regulariser(
                inputs,
                loss=self.retain_loss,
                kl_positions=self.kl_positions,
                reduction=self.loss_reduction,
            )
            parts[part] = retain.detach()
            total = total + self.retain_weight * retain
        return total, parts
