"""Preference optimisation toward refusals ("IDK"): learn to answer forget questions with
"I don't know", keep the retain answers.

Maini et al. 2024, "TOFU: A Task of Fictitious Unlearning for LLMs", Sec. 4 ("Preference
Optimization"):

    minimise  w_r * L(R) + w_idk * L(F_idk)

where F_idk pairs each forget question with a refusal string drawn at random (seeded) from a list,
and L the answer-token NLL, averaged over each batch as `loss_reduction` says ("tokens",
default: over every answer token of the batch; "samples": per sample, then over the batch).
Only plain finetuning, so nothing pushes the true
answer's likelihood down directly; it falls because the refusal takes its probability mass.

TOFU's code concatenates the refusal and retain batches into one forward pass and takes the
token-pooled mean over both (`outputs.loss`), which weighs each term by its share of answer tokens;
we keep the two terms separate, as the paper's equation does.
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


def idk_loss(
    idk_nll: Tensor, retain_nll: Tensor, *, idk_weight: float, retain_weight: float
) -> Tensor:  # (B_f,) or scalar, (B_r,) or scalar -> scalar
    return idk_weight * idk_nll.mean() + retain_weight * retain_nll.mean()


@METHODS.register("idk")
@dataclass(frozen=True)
class IDK:
    name: ClassVar[str] = "idk"
    needs: ClassVar[frozenset[str]] = frozenset(
        {"refusal_logps", "refusal_mask", "retain_logps", "retain_mask"}
    )

    idk_weight: float = 1.0  # TOFU: 1
    retain_weight: float = 1.0  # TOFU: 1
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # see _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_positive(self.name, "idk_weight", self.idk_weight)
        check_nonnegative(self.name, "retain_weight", self.retain_weight)
        check_reduction(self.name, self.loss_reduction)

    def required_inputs(self) -> frozenset[str]:
        if self.retain_weight == 0:
            return frozenset({"refusal_logps", "refusal_mask"})
        return self.needs

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        require_inputs(self.name, inputs, self.required_inputs())
        idk_nll = batch_nll(inputs.refusal_logps, inputs.refusal_mask, self.loss_reduction)
        parts = {"idk_nll": idk_nll.detach()}
        retain_nll = idk_nll.new_zeros(1)
        if self.retain_weight > 0:
            retain_nll = batch_nll(inputs.retain_logps, inputs.retain_mask, self.loss_reduction)
            parts["retain_nll"] = retain_nll.detach()
        total = idk_loss(
            idk_nll, retain_nll, idk_weight=self.idk_weight, retain_weight=self.retain_weight
        )
        return total, parts
