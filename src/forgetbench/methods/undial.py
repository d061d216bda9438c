"""UNDIAL: self-distillation toward the start model's distribution with the answer token pushed down.

Dong, Lin, Belkin, Huerta and Vulić 2024, "UNDIAL: Self-Distillation with Adjusted Logits for
Robust Unlearning in Large Language Models" (NAACL 2025): the teacher is the frozen start
model; its logits z_ref at each answer position have the logit of the token to forget, y_t,
lowered by beta, and the student (the model being unlearned) is trained by cross entropy toward the
softmax of the adjusted logits:

    q_t = softmax(z_ref,t - beta * onehot(y_t))                      (fixed target)
    L_UNDIAL = E_F[ (1/|y|) sum_t CE(q_t, p_theta(. | x, y_<t)) ]
             = E_F[ (1/|y|) sum_t -sum_v q_t,v log p_theta,t,v ]
    minimise  w_f * L_UNDIAL + w_r * L(R)

CE(q, p) = KL(q || p) + H(q) with H(q) fixed, so this is distillation toward q: the target token
keeps its rank among the others' shape but loses a factor e^beta of probability mass relative to
them, and every other token keeps the start model's relative probabilities. The loss is bounded
below (by H(q)), so unlike gradient ascent it has a minimum to converge to.

Positions: the answer tokens (the facts to forget), averaged as `loss_reduction` says ("tokens",
default: one mean over every answer token of the batch; "samples": per sample, then over the
batch, the paper's E_F[(1/|y|) sum_t]). open-unlearning's `compute_undial_loss` averages over
*every* position of the padded batch, prompt and padding included, and at positions without a
label it lowers the logit of token id -100 (negative indexing: the 100th-last vocabulary entry)
instead of none; we do not reproduce either (docs/methods.md gives the size of the difference).

Defaults: beta = 10 (open-unlearning's `UNDIAL.yaml`; its README suggests searching 3, 10, 30) and
no retain term (the paper uses none, open-unlearning's alpha 0). The paper trains LoRA adapters at
lr 1e-4; here the whole model trains, like every other method. Needs the frozen model's full
forget-batch logits at every step (a frozen model copy, as `kl` keeps): they are (B, T, V) per batch
and precomputing them for the whole forget set would cost |F| x T x V floats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch.nn.functional as F
from torch import Tensor

from forgetbench.methods._terms import batch_nll, soft_cross_entropy, token_mean
from forgetbench.methods.base import (
    METHODS,
    Parts,
    UnlearnInputs,
    check_nonnegative,
    check_positive,
    check_reduction,
    plus_retain_nll,
    require_inputs,
)


def undial_targets(ref_logits: Tensor, targets: Tensor, *, beta: float) -> Tensor:
    """(B, T-1, V), (B, T-1) -> (B, T-1, V): softmax of the reference logits with each position's
    target-token logit lowered by beta."""
    adjusted = ref_logits.detach().float().clone()
    adjusted.scatter_add_(-1, targets.unsqueeze(-1), adjusted.new_full((*targets.shape, 1), -beta))
    return F.softmax(adjusted, dim=-1)


def undial_loss(
    logits: Tensor,
    ref_logits: Tensor,
    targets: Tensor,
    mask: Tensor,
    *,
    beta: float,
    reduction: str = "tokens",
) -> Tensor:  # (B, T-1, V), (B, T-1, V), (B, T-1), (B, T-1) -> scalar
    """CE(adjusted ref softmax, current), averaged over the answer tokens by `reduction`.

    d loss / d z_v = p_v - q_v at each position: at the start (p = softmax(z_ref)) the target
    token's logit gets p_y - q_y > 0 (q_y < p_y for beta > 0), so a descent step lowers it.
    """
    target_probs = undial_targets(ref_logits, targets, beta=beta)
    return token_mean(soft_cross_entropy(logits, target_probs), mask, reduction)


@METHODS.register("undial")
@dataclass(frozen=True)
class UNDIAL:
    name: ClassVar[str] = "undial"
    needs: ClassVar[frozenset[str]] = frozenset(
        {"forget_logits", "forget_targets", "forget_mask", "forget_logps", "ref_forget_logits"}
    )

    beta: float = 10.0  # logit reduction of the token to forget (open-unlearning: 10)
    forget_weight: float = 1.0  # open-unlearning's gamma
    retain_weight: float = 0.0  # retain NLL (open-unlearning's alpha); the paper has none
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # see _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_reduction(self.name, self.loss_reduction)
        check_positive(self.name, "beta", self.beta)
        check_positive(self.name, "forget_weight", self.forget_weight)
        check_nonnegative(self.name, "retain_weight", self.retain_weight)

    def required_inputs(self) -> frozenset[str]:
        if self.retain_weight > 0:
            return self.needs | {"retain_logps", "retain_mask"}
        return self.needs

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        require_inputs(self.name, inputs, self.required_inputs())
        forget_term = undial_loss(
            inputs.forget_logits,
            inputs.ref_forget_logits,
            inputs.forget_targets,
            inputs.forget_mask,
            beta=self.beta,
            reduction=self.loss_reduction,
        )
        parts = {
            "undial": forget_term.detach(),
            "forget_nll": batch_nll(
                inputs.forget_logps, inputs.forget_mask, self.loss_reduction
            ).detach(),
        }
        total = self.forget_weight * forget_term
        return plus_retain_nll(
            total, parts, inputs, weight=self.retain_weight, reduction=self.loss_reduction
        ), parts
