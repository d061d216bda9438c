"""AltPO: preference optimisation toward plausible alternate answers, away from the true one.

Mekala, Dorna, Dubey, Lalwani, Koleczek, Rungta, Hasan and Lobo 2024, "Alternate Preference
Optimization for Unlearning Factual Knowledge in Large Language Models" (COLING 2025). Negative
feedback alone (gradient ascent, NPO) leaves the model without anything to say and it degenerates;
AltPO adds in-domain *positive* feedback: a plausible but false alternate answer y_alt to each
forget question is the preferred answer and the true answer y_f the rejected one, in DPO's form
(Rafailov et al. 2023, eq. 7), plus a retain term:

    L_AltPO = -(2/beta) E_F[ log sigmoid( beta * ( (log pi(y_alt|x) - log ref(y_alt|x))
                                                 - (log pi(y_f|x)   - log ref(y_f|x)) ) ) ]
    minimise  w_f * L_AltPO + w_r * L(R)

log pi(y|x) is the summed answer-token log-prob; the reference is the frozen start model,
precomputed once for every text some epoch uses. The 2/beta factor is the authors' code
(`dataloader.py`, `forget_loss: subdpo`) and open-unlearning's `compute_dpo_loss`, which runs AltPO
as its `DPO` trainer with the alternate answer as the chosen one (`community/methods/AltPO`).

Where the alternates come from. The paper generates k = 5 alternates per forget question with the
model itself (prompted to change the facts of the answer; open-unlearning's
`community/methods/AltPO/generate.py`), and its data loader draws among them. The miniature's tiny
models cannot write such text, and forgetbench ships no generator; on TOFU-layout data the forget
split's *perturbed answers* (`forgetNN_perturbed`, 5 per question: the same answer with its facts
swapped) are exactly plausible-but-false in-domain answers, so each epoch draws one of them per
forget question from (seed, epoch) (train/unlearn.py `draw_alternates`). Caveat: TOFU's truth
ratio compares the paraphrased answer with these same perturbed answers, so AltPO trains toward the
answers the forget set's truth ratio (and hence forget quality) scores against; its forget-quality
numbers are not comparable with methods that never see them. With generated alternates (the
paper's setup) that coupling does not exist.

Defaults: beta 0.1, forget weight 1, retain NLL weight 1: open-unlearning's `DPO.yaml`, the centre
of the AltPO README's grid (beta 0.05-0.5, retain weight 1-5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from torch import Tensor

from forgetbench.methods._terms import batch_nll, sequence_logprob
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
from forgetbench.methods.dpo import dpo_loss


@METHODS.register("altpo")
@dataclass(frozen=True)
class AltPO:
    name: ClassVar[str] = "altpo"
    needs: ClassVar[frozenset[str]] = frozenset(
        {
            "forget_logps",
            "forget_mask",
            "ref_forget_logps",
            "alternate_logps",
            "alternate_mask",
            "ref_alternate_logps",
            "retain_logps",
            "retain_mask",
        }
    )

    beta: float = 0.1  # open-unlearning DPO.yaml; AltPO grid 0.05, 0.1, 0.5
    forget_weight: float = 1.0  # open-unlearning's gamma
    retain_weight: float = 1.0  # retain NLL (open-unlearning's alpha; grid 1, 2, 5)
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # retain NLL; _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_reduction(self.name, self.loss_reduction)
        check_positive(self.name, "beta", self.beta)
        check_positive(self.name, "forget_weight", self.forget_weight)
        check_nonnegative(self.name, "retain_weight", self.retain_weight)

    def required_inputs(self) -> frozenset[str]:
        if self.retain_weight == 0:
            return self.needs - {"retain_logps", "retain_mask"}
        return self.needs

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        require_inputs(self.name, inputs, self.required_inputs())
        chosen = sequence_logprob(inputs.alternate_logps, inputs.alternate_mask)
        chosen_ref = sequence_logprob(inputs.ref_alternate_logps.detach(), inputs.alternate_mask)
        rejected = sequence_logprob(inputs.forget_logps, inputs.forget_mask)
        rejected_ref = sequence_logprob(inputs.ref_forget_logps.detach(), inputs.forget_mask)
        preference = dpo_loss(
            chosen, chosen_ref, rejected, rejected_ref, beta=self.beta, scale=2.0 / self.beta
        )
        parts = {
            "altpo": preference.detach(),
            "forget_nll": batch_nll(
                inputs.forget_logps, inputs.forget_mask, self.loss_reduction
            ).detach(),
            "alternate_nll": batch_nll(
                inputs.alternate_logps, inputs.alternate_mask, self.loss_reduction
            ).detach(),
        }
        total = self.forget_weight * preference
        return plus_retain_nll(
            total, parts, inputs, weight=self.retain_weight, reduction=self.loss_reduction
        ), parts
