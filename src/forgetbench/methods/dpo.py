"""Direct preference optimisation with the refusal as the preferred answer.

Rafailov et al. 2023, "Direct Preference Optimization: Your Language Model is Secretly a Reward
Model" (NeurIPS), eq. 7; applied to unlearning by Maini et al. 2024, "TOFU: A Task of Fictitious
Unlearning for LLMs", with a refusal string as the chosen answer y_w and the true answer as the
rejected y_l:

    L_DPO = -E[ log sigmoid( beta * ( (log pi(y_w|x) - log ref(y_w|x))
                                    - (log pi(y_l|x) - log ref(y_l|x)) ) ) ]
    minimise  s * L_DPO + w_r * L(R)

log pi(y|x) is the *summed* answer-token log-prob (TOFU's `get_batch_loss` sums). The reference
terms come from the frozen start model and are precomputed once, so no second model is kept.

`scale` (s): "paper" = 1, as in the DPO paper and the TOFU code (beta = 0.1, no retain term).
"open_unlearning" = 2/beta, the factor open-unlearning's `compute_dpo_loss` multiplies by (the
same 2/beta as NPO's normalisation); at beta = 0.1 that is a 20x larger step, so results from the
two code bases are only comparable with the matching option.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch.nn.functional as F
from torch import Tensor

from forgetbench.methods._terms import batch_nll, sequence_logprob
from forgetbench.methods.base import (
    METHODS,
    Parts,
    UnlearnInputs,
    check_choice,
    check_nonnegative,
    check_positive,
    check_reduction,
    require_inputs,
)

DPO_SCALES = ("paper", "open_unlearning")


def dpo_loss(
    chosen_logp: Tensor,
    chosen_ref_logp: Tensor,
    rejected_logp: Tensor,
    rejected_ref_logp: Tensor,
    *,
    beta: float,
    scale: float = 1.0,
) -> Tensor:  # (B,), (B,), (B,), (B,) -> scalar
    """-scale * mean log sigmoid(beta * (chosen log-ratio - rejected log-ratio)).

    d loss / d rejected_logp = scale * beta * sigmoid(-margin) / B > 0: minimising lowers the
    true answer's likelihood and (symmetrically) raises the refusal's.
    """
    margin = (chosen_logp - chosen_ref_logp) - (rejected_logp - rejected_ref_logp)
    return -scale * F.logsigmoid(beta * margin).mean()


@METHODS.register("dpo")
@dataclass(frozen=True)
class DPO:
    name: ClassVar[str] = "dpo"
    needs: ClassVar[frozenset[str]] = frozenset(
        {
            "forget_logps",
            "forget_mask",
            "ref_forget_logps",
            "refusal_logps",
            "refusal_mask",
            "ref_refusal_logps",
        }
    )

    beta: float = 0.1  # TOFU code: 0.1
    scale: Literal["paper", "open_unlearning"] = "paper"  # 1 or 2/beta, see module docstring
    retain_weight: float = 0.0  # optional retain NLL; TOFU's dpo has none
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # retain NLL; _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_reduction(self.name, self.loss_reduction)
        check_positive(self.name, "beta", self.beta)
        check_choice(self.name, "scale", self.scale, DPO_SCALES)
        check_nonnegative(self.name, "retain_weight", self.retain_weight)

    def required_inputs(self) -> frozenset[str]:
        if self.retain_weight > 0:
            return self.needs | {"retain_logps", "retain_mask"}
        return self.needs

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        require_inputs(self.name, inputs, self.required_inputs())
        chosen = sequence_logprob(inputs.refusal_logps, inputs.refusal_mask)
        chosen_ref = sequence_logprob(inputs.ref_refusal_logps.detach(), inputs.refusal_mask)
        rejected = sequence_logprob(inputs.forget_logps, inputs.forget_mask)
        rejected_ref = sequence_logprob(inputs.ref_forget_logps.detach(), inputs.forget_mask)
        scale = 1.0 if self.scale == "paper" else 2.0 / self.beta
        preference = dpo_loss(
            chosen, chosen_ref, rejected, rejected_ref, beta=self.beta, scale=scale
        )
        parts = {
            "dpo": preference.detach(),
            "forget_nll": batch_nll(
                inputs.forget_logps, inputs.forget_mask, self.loss_reduction
            ).detach(),
        }
        total = preference
        if self.retain_weight > 0:
            retain_nll = batch_nll(inputs.retain_logps, inputs.retain_mask, self.loss_reduction)
            parts["retain_nll"] = retain_nll.detach()
            total = total + self.retain_weight * retain_nll
        return total, parts
