"""Gradient difference: ascend on the forget set, descend on the retain set.

Liu et al. 2022, "Continual Learning and Private Unlearning" (CoLLAs); the `grad_diff` baseline
of Maini et al. 2024, "TOFU: A Task of Fictitious Unlearning for LLMs":

    minimise  -w_f * L(F) + w_r * L(R)

with L the answer-token NLL of each batch, averaged as `loss_reduction` says ("tokens", default:
over every answer token of the batch, HF's `outputs.loss` as TOFU's and open-unlearning's code;
"samples": per sample, then over the batch). TOFU uses w_f = w_r = 1
(open-unlearning calls them gamma and alpha, same defaults). The retain term anchors utility; one
retain sample is drawn per forget sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from torch import Tensor

from forgetbench.methods._terms import batch_nll
from forgetbench.methods.base import (
    METHODS,
    Parts,
    UnlearnInputs,
    check_nonnegative,
    check_positive,
    check_reduction,
    require_inputs,
)


def grad_diff_loss(
    forget_nll: Tensor, retain_nll: Tensor, *, forget_weight: float, retain_weight: float
) -> Tensor:  # (B_f,) or scalar, (B_r,) or scalar -> scalar
    return -forget_weight * forget_nll.mean() + retain_weight * retain_nll.mean()


@METHODS.register("grad_diff")
@dataclass(frozen=True)
class GradDiff:
    name: ClassVar[str] = "grad_diff"
    needs: ClassVar[frozenset[str]] = frozenset(
        {"forget_logps", "forget_mask", "retain_logps", "retain_mask"}
    )

    forget_weight: float = 1.0  # w_f (TOFU: 1)
    retain_weight: float = 1.0  # w_r (TOFU: 1); 0 reduces to grad_ascent
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # see _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_positive(self.name, "forget_weight", self.forget_weight)
        check_nonnegative(self.name, "retain_weight", self.retain_weight)
        check_reduction(self.name, self.loss_reduction)

    def required_inputs(self) -> frozenset[str]:
        if self.retain_weight == 0:
            return frozenset({"forget_logps", "forget_mask"})
        return self.needs

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        require_inputs(self.name, inputs, self.required_inputs())
        forget_nll = batch_nll(inputs.forget_logps, inputs.forget_mask, self.loss_reduction)
        parts = {"forget_nll": forget_nll.detach()}
        retain_nll = forget_nll.new_zeros(1)
        if self.retain_weight > 0:
            retain_nll = batch_nll(inputs.retain_logps, inputs.retain_mask, self.loss_reduction)
            parts["retain_nll"] = retain_nll.detach()
        total = grad_diff_loss(
            forget_nll,
            retain_nll,
            forget_weight=self.forget_weight,
            retain_weight=self.retain_weight,
        )
        return total, parts
