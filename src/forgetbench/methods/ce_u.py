"""CE-U: cross entropy toward the model's own distribution with the true token taken out.

Yang et al. 2025, "CE-U: Cross Entropy Unlearning" (arXiv 2503.01224), the CE-U loss: at each
answer position, with z the model's logits and y_t the true next token, the
target is the softmax of z with z_{y_t} set to -inf (held constant), and the loss is the cross
entropy of the model's distribution against it:

    q_t = softmax(sg(z_t) with z_t,y_t = -inf)            (q_t,y_t = 0)
    L_CE-U = E_F[ (1/|y|) sum_t -sum_{v != y_t} q_t,v log p_t,v ]

Its gradient with respect to the logits is p - q: +p_y on the true token's logit (pushed down)
and -p_v p_y / (1 - p_y) on every other (pushed up in proportion to the mass they already have),
the gradient of -log(1 - p_y), which stays bounded as p_y -> 0 — unlike gradient ascent, whose
-log p_y term explodes. The value differs from -log(1 - p_y) by H(q), a constant of the step.

`ignore_first_answer_tokens`: the paper's training-settings footnote skips the first answer
token (a model asked a question has little choice over it; pushing it down only damages the
format); open-unlearning's `CEU.yaml` `ignore_first_n_answer_tokens: 1`. Default 1.
No retain term, as the paper and open-unlearning (`CEU.yaml` derives from `finetune`); a retain NLL
can be added with `retain_weight`.

Averaging (`loss_reduction`): "tokens" (default) is one mean over every counted token of the
batch, as open-unlearning's `cross_entropy_unlearning_loss`; "samples" per sample over its counted
tokens, then over the samples that have any (`_terms.answer_mean`), as the paper's per-answer
mean. The optional retain NLL follows the same reduction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from forgetbench.errors import ConfigError
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


def skip_first_tokens(mask: Tensor, n: int) -> Tensor:
    """(B, T-1) bool -> the same mask without each sample's first n answer tokens."""
    mask = mask.bool()
    return mask & (mask.long().cumsum(dim=1) > n)


def ce_u_loss(
    logits: Tensor, targets: Tensor, mask: Tensor, *, reduction: str = "tokens"
) -> Tensor:  # (B, T-1, V), (B, T-1), (B, T-1) -> scalar
    """CE(softmax of sg(z) without the true token, softmax(z)), averaged over the counted tokens
    by `reduction`.

    d loss / d z_y = p_y / N > 0 at each counted position (N: the batch's counted tokens; B |y|
    with "samples"): a descent step lowers the true token's logit.
    """
    masked = logits.detach().float().scatter(-1, targets.unsqueeze(-1), float("-inf"))
    target_probs = F.softmax(masked, dim=-1)
    return token_mean(soft_cross_entropy(logits, target_probs), mask, reduction)


@METHODS.register("ce_u")
@dataclass(frozen=True)
class CEU:
    name: ClassVar[str] = "ce_u"
    needs: ClassVar[frozenset[str]] = frozenset(
        {"forget_logits", "forget_targets", "forget_mask", "forget_logps"}
    )

    ignore_first_answer_tokens: int = 1  # the paper's footnote; open-unlearning: 1
    forget_weight: float = 1.0
    retain_weight: float = 0.0  # retain NLL; the paper and open-unlearning have none
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # see _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_reduction(self.name, self.loss_reduction)
        if isinstance(self.ignore_first_answer_tokens, bool) or not (
            isinstance(self.ignore_first_answer_tokens, int)
            and self.ignore_first_answer_tokens >= 0
        ):
            raise ConfigError(
                f"{self.name}.ignore_first_answer_tokens must be an integer >= 0, "
                f"got {self.ignore_first_answer_tokens!r}"
            )
        check_positive(self.name, "forget_weight", self.forget_weight)
        check_nonnegative(self.name, "retain_weight", self.retain_weight)

    def required_inputs(self) -> frozenset[str]:
        if self.retain_weight > 0:
            return self.needs | {"retain_logps", "retain_mask"}
        return self.needs

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        require_inputs(self.name, inputs, self.required_inputs())
        counted = skip_first_tokens(inputs.forget_mask, self.ignore_first_answer_tokens)
        if torch.any(counted.any(dim=1)):
            forget_term = ce_u_loss(
                inputs.forget_logits,
                inputs.forget_targets,
                counted,
                reduction=self.loss_reduction,
            )
        else:  # every answer of the batch is shorter than the skipped prefix: nothing to unlearn
            forget_term = inputs.forget_logits.sum() * 0.0
        parts = {
            "ce_u": forget_term.detach(),
            "forget_nll": batch_nll(
                inputs.forget_logps, inputs.forget_mask, self.loss_reduction
            ).detach(),
        }
        total = self.forget_weight * forget_term
        return plus_retain_nll(
            total, parts, inputs, weight=self.retain_weight, reduction=self.loss_reduction
        ), parts
