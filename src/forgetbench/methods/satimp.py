"""SatImp: gradient ascent reweighted token by token by saturation and importance.

Yang, Wang, Huang, Liu, Zhang and Han 2025, "Exploring Criteria of Loss Reweighting to Enhance LLM
Unlearning" (ICML), the SatImp objective: each answer token's log-prob is weighted by the
product of a *saturation* weight p_t^beta1 (tokens the model still predicts well are not yet
unlearned enough: weight them up) and an *importance* weight (1 - p_t)^beta2, both held constant:

    L_SatImp = E_F[ (1/|y|) sum_t sg(p_t^beta1 (1 - p_t)^beta2) log p_t ]
    minimise  w_f * L_SatImp + w_r * L(R)

The weight p^beta1 (1-p)^beta2 peaks at p = beta1 / (beta1 + beta2) (5/6 with the defaults) and
vanishes at both ends: a token the model is certain of (p -> 1) gets little push at first, as does
one already forgotten (p -> 0). With beta2 = 0 it is WGA (wga.py).

Averaging (`loss_reduction`): "tokens" (default) is one mean over every answer token of the batch,
as open-unlearning's `compute_satimp_loss`; "samples" per sample, then over the batch, as the
paper's E_F[(1/|y|) sum_t]; equal for equal-length answers. Defaults beta1 = 5, beta2 = 1 as
the paper and open-unlearning. The loss weights differ between open-unlearning's files: its
`SatImp.yaml` sets forget weight (gamma) 0.1 and retain weight (alpha) 1, its class defaults and
its README (which follows the paper's choice of the extraction-strength metric) gamma 1, alpha 0.1.
We default to the paper's / README's forget weight 1, retain weight 0.1.
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


def satimp_weights(logps: Tensor, *, beta1: float, beta2: float) -> Tensor:
    """(B, T-1) -> (B, T-1): p^beta1 (1 - p)^beta2 of each token, detached."""
    p = logps.detach().exp()
    return p.pow(beta1) * (1.0 - p).clamp_min(0.0).pow(beta2)


def satimp_loss(
    logps: Tensor, mask: Tensor, *, beta1: float, beta2: float, reduction: str = "tokens"
) -> Tensor:  # (B, T-1) x2 -> scalar
    """sg(w_t) log p_t, w_t = p_t^beta1 (1 - p_t)^beta2, averaged over the answer tokens by
    `reduction`.

    d loss / d log p_t = w_t / N >= 0 (N: the batch's answer tokens; B |y| with "samples"): a
    descent step lowers every answer token's log-prob.
    """
    weights = satimp_weights(logps, beta1=beta1, beta2=beta2)
    return token_mean(weights * logps, mask, reduction)


@METHODS.register("satimp")
@dataclass(frozen=True)
class SatImp:
    name: ClassVar[str] = "satimp"
    needs: ClassVar[frozenset[str]] = frozenset(
        {"forget_logps", "forget_mask", "retain_logps", "retain_mask"}
    )

    beta1: float = 5.0  # saturation exponent (paper, open-unlearning: 5)
    beta2: float = 1.0  # importance exponent (paper, open-unlearning: 1)
    forget_weight: float = 1.0  # open-unlearning's gamma; see the module docstring
    retain_weight: float = 0.1  # retain NLL (open-unlearning's alpha); 0 = no retain term
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # see _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_reduction(self.name, self.loss_reduction)
        check_nonnegative(self.name, "beta1", self.beta1)
        check_nonnegative(self.name, "beta2", self.beta2)
        check_positive(self.name, "forget_weight", self.forget_weight)
        check_nonnegative(self.name, "retain_weight", self.retain_weight)

    def required_inputs(self) -> frozenset[str]:
        if self.retain_weight == 0:
            return frozenset({"forget_logps", "forget_mask"})
        return self.needs

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        require_inputs(self.name, inputs, self.required_inputs())
        reduction = self.loss_reduction
        forget_term = satimp_loss(
            inputs.forget_logps,
            inputs.forget_mask,
            beta1=self.beta1,
            beta2=self.beta2,
            reduction=reduction,
        )
        parts = {
            "satimp": forget_term.detach(),
            "forget_nll": batch_nll(inputs.forget_logps, inputs.forget_mask, reduction).detach(),
        }
        total = self.forget_weight * forget_term
        return plus_retain_nll(
            total, parts, inputs, weight=self.retain_weight, reduction=reduction
        ), parts
