"""Gradient ascent on the forget set.

Jang et al. 2023, "Knowledge Unlearning for Mitigating Privacy Risks in Language Models" (ACL);
used as the `grad_ascent` baseline of Maini et al. 2024, "TOFU: A Task of Fictitious Unlearning
for LLMs":

    minimise  -L(F),   L(F) = the forget batch's answer-token NLL.

How L averages over a batch is `loss_reduction` (`unlearn.loss_reduction`): "tokens" (default)
is one mean over every answer token of the batch, HF's `outputs.loss`, which TOFU's code and
open-unlearning's `GradAscent` negate; "samples" is the per-sample mean, then the batch mean.

It drives the forget answers' likelihood down without any anchor, so it also destroys utility;
TOFU reports exactly that collapse, which makes it the reference point for every other method.
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
    check_positive,
    check_reduction,
    require_inputs,
)


def grad_ascent_loss(forget_nll: Tensor) -> Tensor:  # (B,) or scalar -> scalar
    """-mean L: minimising it raises the forget NLL (d loss / d L_b = -1/B < 0)."""
    return -forget_nll.mean()


@METHODS.register("grad_ascent")
@dataclass(frozen=True)
class GradAscent:
    """`forget_weight` only rescales the step (TOFU: 1); kept so sweeps read like grad_diff's."""

    name: ClassVar[str] = "grad_ascent"
    needs: ClassVar[frozenset[str]] = frozenset({"forget_logps", "forget_mask"})

    forget_weight: float = 1.0
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # see _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_positive(self.name, "forget_weight", self.forget_weight)
        check_reduction(self.name, self.loss_reduction)

    def required_inputs(self) -> frozenset[str]:
        return self.needs

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        require_inputs(self.name, inputs, self.required_inputs())
        forget_nll = batch_nll(inputs.forget_logps, inputs.forget_mask, self.loss_reduction)
        total = self.forget_weight * grad_ascent_loss(forget_nll)
        return total, {"forget_nll": forget_nll.detach()}
