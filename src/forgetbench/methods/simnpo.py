"""SimNPO: reference-free, length-normalised NPO with a margin.

Fan, Liu, Lin, Jia, Zhang, Mei and Liu 2024, "Simplicity Prevails: Rethinking Negative Preference
Optimization for LLM Unlearning" (arXiv 2410.07163), the SimNPO objective:

    L_SimNPO = E_F[ -(2/beta) log sigmoid( -(beta/|y|) log pi(y|x) - gamma ) ]
             = (2/beta) E_F[ softplus( beta * log pi(y|x)/|y| + gamma ) ]
    minimise  w_f * L_SimNPO + w_r * retain term

log pi(y|x)/|y| is the mean answer-token log-prob (= -L). Dropping NPO's reference removes its
bias toward long answers and needs no frozen model at all; gamma >= 0 is a reward margin
(TOFU setting: gamma = 0).

Sign convention, checked against the authors' code (OPTML-Group/Unlearn-Simple, TOFU/dataloader.py)
and open-unlearning's SimNPO trainer: both compute `-(2/beta) * logsigmoid(beta * (NLL/|y| - d))`
= (2/beta) softplus(beta * logp/|y| + beta * d). Their margin d therefore multiplies beta: the
paper's gamma equals beta * d (the code's `gamma` in Unlearn-Simple, `delta` in open-unlearning).
We use the paper's gamma; convert with gamma = beta * delta. At gamma = 0 all three agree.

The SimNPO term is a mean over samples of each sample's length-normalised log-prob in every
reduction (the paper, the authors' code and open-unlearning); `loss_reduction` sets how the retain
NLL averages over its batch ("tokens", default, as open-unlearning's `outputs.loss`; "samples").

Defaults follow the authors' TOFU forget10 run (beta = 4.5, forget weight 0.125, retain NLL
weight 1; open-unlearning's SimNPO config has the same numbers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch.nn.functional as F
from torch import Tensor

from forgetbench.methods._terms import answer_lengths, sequence_logprob
from forgetbench.methods.base import (
    KL_POSITIONS,
    METHODS,
    RETAIN_LOSSES,
    Parts,
    UnlearnInputs,
    check_choice,
    check_finite,
    check_nonnegative,
    check_positive,
    check_reduction,
    require_inputs,
    retain_inputs,
    retain_regulariser,
)


def simnpo_loss(avg_logp: Tensor, *, beta: float, gamma: float) -> Tensor:  # (B,) -> scalar
    """(2/beta) * mean softplus(beta * avg_logp + gamma); avg_logp = log pi(y|x) / |y|.

    d loss / d avg_logp_b = (2/B) * sigmoid(beta * avg_logp_b + gamma) > 0: a descent step lowers
    the forget answers' per-token likelihood.
    """
    return (2.0 / beta) * F.softplus(beta * avg_logp + gamma).mean()


@METHODS.register("simnpo")
@dataclass(frozen=True)
class SimNPO:
    name: ClassVar[str] = "simnpo"
    needs: ClassVar[frozenset[str]] = frozenset(
        {"forget_logps", "forget_mask", "retain_logps", "retain_mask"}
    )

    beta: float = 4.5  # authors' TOFU forget10 run
    gamma: float = 0.0  # paper's margin (not multiplied by beta), TOFU: 0
    forget_weight: float = 0.125  # authors' `npo_coeff` for forget10 (open-unlearning: gamma)
    retain_weight: float = 1.0  # authors' `grad_diff_coeff` (open-unlearning: alpha)
    retain_loss: Literal["nll", "kl"] = "nll"
    kl_positions: Literal["sequence", "answer", "all"] = "sequence"  # retain_loss="kl": kl.py
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # retain NLL; _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_reduction(self.name, self.loss_reduction)
        check_positive(self.name, "beta", self.beta)
        check_finite(self.name, "gamma", self.gamma)
        check_positive(self.name, "forget_weight", self.forget_weight)
        check_nonnegative(self.name, "retain_weight", self.retain_weight)
        check_choice(self.name, "retain_loss", self.retain_loss, RETAIN_LOSSES)
        check_choice(self.name, "kl_positions", self.kl_positions, KL_POSITIONS)

    def required_inputs(self) -> frozenset[str]:
        forget = frozenset({"forget_logps", "forget_mask"})
        if self.retain_weight == 0:
            return forget
        return forget | retain_inputs(self.retain_loss, self.kl_positions)

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        require_inputs(self.name, inputs, self.required_inputs())
        avg_logp = sequence_logprob(inputs.forget_logps, inputs.forget_mask) / answer_lengths(
            inputs.forget_mask
        )  # (B,)
        forget_term = simnpo_loss(avg_logp, beta=self.beta, gamma=self.gamma)
        parts = {"simnpo": forget_term.detach(), "forget_nll": (-avg_logp).mean().detach()}
        total = self.forget_weight * forget_term
        if self.retain_weight > 0:
            retain, part = retain_regulariser(
                inputs,
                loss=self.retain_loss,
                kl_positions=self.kl_positions,
                reduction=self.loss_reduction,
            )
            parts[part] = retain.detach()
            total = total + self.retain_weight * retain
        return total, parts
