"""WGA: weighted gradient ascent, each answer token weighted by its own (detached) probability.

Wang, Zhou, Zhou, Shin, Han and Weinberger 2025, "Rethinking LLM Unlearning Objectives: A Gradient
Perspective and Go Beyond" (ICLR), the WGA objective: gradient ascent whose per-token
term log p(y_t | x, y_<t) is weighted by w_t = p(y_t | x, y_<t)^beta, held constant (no gradient
through the weight):

    L_WGA = E_F[ (1/|y|) sum_t w_t log p(y_t | x, y_<t) ],   w_t = sg(p_t)^beta
    minimise  w_f * L_WGA + w_r * L(R)

Minimising L_WGA lowers log p_t at rate w_t: a token the model still predicts confidently gets
the full gradient-ascent push, a token already forgotten (p_t -> 0) almost none. That is why WGA
does not run away the way plain gradient ascent does (whose NLL, unbounded, keeps growing).
beta = 0 is grad_ascent (all weights 1).

Averaging (`loss_reduction`): "tokens" (default) takes one mean over every answer token of the
batch, as open-unlearning's `compute_wga_loss` (a sample's weight grows with its length);
"samples" averages per sample over its answer tokens, then over the batch, as the paper's
E_F[(1/|y|) sum_t]. The two agree when all answers have the same length. The retain NLL follows
the same reduction.
Defaults: beta = 1 and forget and retain weights 1 with a retain NLL term, as the paper's TOFU runs
and open-unlearning's `WGA.yaml` (beta 1, gamma 1, alpha 1, retain NLL).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from torch import Tensor

from forgetbench.methods._terms import batch_nll, token_mean
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


def wga_loss(
    logps: Tensor, mask: Tensor, *, beta: float, reduction: str = "tokens"
) -> Tensor:  # (B, T-1) x2 -> scalar
    """sg(p_t)^beta log p_t averaged over the answer tokens by `reduction`.

    d loss / d log p_t = p_t^beta / N >= 0 (N: the batch's answer tokens; B |y| with "samples"):
    a descent step lowers every answer token's log-prob, the likely ones most.
    """
    weights = logps.detach().exp().pow(beta)
    return token_mean(weights * logps, mask, reduction)


@METHODS.register("wga")
@dataclass(frozen=True)
class WGA:
    name: ClassVar[str] = "wga"
    needs: ClassVar[frozenset[str]] = frozenset(
        {"forget_logps", "forget_mask", "retain_logps", "retain_mask"}
    )

    beta: float = 1.0  # the weight's exponent (the paper's alpha); paper and open-unlearning: 1
    forget_weight: float = 1.0  # open-unlearning's gamma
    retain_weight: float = 1.0  # retain NLL (open-unlearning's alpha); 0 = no retain term
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # see _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_reduction(self.name, self.loss_reduction)
        check_nonnegative(self.name, "beta", self.beta)
        check_positive(self.name, "forget_weight", self.forget_weight)
        check_nonnegative(self.name, "retain_weight", self.retain_weight)

    def required_inputs(self) -> frozenset[str]:
        if self.retain_weight == 0:
            return frozenset({"forget_logps", "forget_mask"})
        return self.needs

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        require_inputs(self.name, inputs, self.required_inputs())
        reduction = self.loss_reduction
        forget_term = wga_loss(
            inputs.forget_logps, inputs.forget_mask, beta=self.beta, reduction=reduction
        )
        parts = {
            "wga": forget_term.detach(),
            "forget_nll": batch_nll(inputs.forget_logps, inputs.forget_mask, reduction).detach(),
        }
        total = self.forget_weight * forget_term
        return plus_retain_nll(
            total, parts, inputs, weight=self.retain_weight, reduction=reduction
        ), parts
