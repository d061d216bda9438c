"""KL minimisation: ascend on the forget set, stay close to the start model on the retain set.

Maini et al. 2024, "TOFU: A Task of Fictitious Unlearning for LLMs", Sec. 4 ("KL Minimization"):

    minimise  -w_f * L(F) + w_kl * (1/|R|) sum_{s in R} (1/|s|) sum_i KL(M_ref(s_<i) || M(s_<i))

KL runs over next-token distributions of the frozen reference (start) model and the current one,
reference first. L(F) is the forget answers' NLL, averaged over the batch as `loss_reduction`
says ("tokens", default: over every answer token, HF's `outputs.loss`; "samples": per sample, then
over the batch). Which positions of each retain sequence the KL counts (`kl_positions`, its own
averaging; `loss_reduction` does not change it):

- "sequence" (default): every position that predicts a real token of the sequence, prompt and
  answer alike, padding excluded; averaged per sample, then over the batch. This is the paper's
  equation above (i = 2..|s| over the whole retain sequence s).
- "answer": only the positions that predict answer tokens (the tokens finetuning trained),
  averaged per sample, then over the batch. forgetbench's default before issue 14; no reference
  uses it.
- "all": every position of the padded batch, padding included, one mean over B*T — what the TOFU
  code (`dataloader.py`, `loss_type == "KL"`) and open-unlearning's `compute_kl_divergence`
  compute: `kl_div(log_softmax(cur).view(-1, V), log_softmax(ref).view(-1, V),
  reduction="batchmean", log_target=True)`. TOFU pads every sample to max_length (500) and
  open-unlearning to the batch's longest, so their number is diluted by padding positions, which
  also pull the model toward what the reference predicts after padding. Use it to reproduce their
  losses.

This is the one method that needs the reference model's full (B, T, V) logits on retain data, so
the engine keeps a frozen copy only for `kl` (and `retain_loss="kl"` elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from torch import Tensor

from forgetbench.methods._terms import batch_nll
from forgetbench.methods.base import (
    KL_POSITIONS,
    METHODS,
    Parts,
    UnlearnInputs,
    check_choice,
    check_nonnegative,
    check_positive,
    check_reduction,
    kl_inputs,
    require_inputs,
    retain_kl,
)


def kl_loss(
    forget_nll: Tensor, retain_kl: Tensor, *, forget_weight: float, kl_weight: float
) -> Tensor:  # (B_f,) or scalar, scalar -> scalar
    """-w_f * mean L(F) + w_kl * KL; retain_kl from `_terms.next_token_kl`."""
    return -forget_weight * forget_nll.mean() + kl_weight * retain_kl


@METHODS.register("kl")
@dataclass(frozen=True)
class KL:
    name: ClassVar[str] = "kl"
    needs: ClassVar[frozenset[str]] = frozenset(
        {
            "forget_logps",
            "forget_mask",
            "retain_logits",
            "ref_retain_logits",
            "retain_attention_mask",
        }
    )

    forget_weight: float = 1.0  # TOFU: 1
    kl_weight: float = 1.0  # TOFU: 1
    kl_positions: Literal["sequence", "answer", "all"] = "sequence"  # the paper's equation
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # see _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_reduction(self.name, self.loss_reduction)
        check_positive(self.name, "forget_weight", self.forget_weight)
        check_nonnegative(self.name, "kl_weight", self.kl_weight)
        check_choice(self.name, "kl_positions", self.kl_positions, KL_POSITIONS)

    def required_inputs(self) -> frozenset[str]:
        return frozenset({"forget_logps", "forget_mask"}) | kl_inputs(self.kl_positions)

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        require_inputs(self.name, inputs, self.required_inputs())
        forget_nll = batch_nll(inputs.forget_logps, inputs.forget_mask, self.loss_reduction)
        kl = retain_kl(inputs, kl_positions=self.kl_positions)
        total = kl_loss(forget_nll, kl, forget_weight=self.forget_weight, kl_weight=self.kl_weight)
        return total, {"forget_nll": forget_nll.detach(), "retain_kl": kl.detach()}
