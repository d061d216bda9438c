"""PDU: primal-dual unlearning, a flattening forget loss under a retain-loss constraint.

Entesari, Hatami, Khaziev, Ramakrishna and Fazlyab 2025, "Constrained Entropic Unlearning: A
Primal-Dual Framework for Large Language Models" (arXiv 2506.05314). Unlearning as a constrained
problem,

    minimise_theta  L_F(theta)   subject to   L_R(theta) <= eps,

with the *logit-margin flattening* forget loss: at each answer position the squared gap
between the largest logit and the mean logit, which is 0 exactly when the next-token distribution
is uniform (maximal entropy) and, unlike gradient ascent, bounded below and convex in the logits:

    L_F = E_F[ (1/|y|) sum_t ( max_v z_t,v - (1/V) sum_v z_t,v )^2 ]

and L_R the retain answers' NLL; both average over the batch as `loss_reduction` says ("tokens",
default: one mean over every answer token of the batch, as open-unlearning's PDU trainer (its
flattening term is a sum over answer positions over their count, its retain term HF's
`outputs.loss`); "samples": per sample, then over the batch, the E_F[(1/|y|) sum_t] above). It is
solved on the Lagrangian
L(theta, lambda) = w_f L_F + lambda (L_R - eps) by alternating one primal step (the optimizer's,
on theta at the current lambda) with one projected dual ascent step:

    lambda <- max(0, lambda + eta * (L_R - eps))

with L_R the retain loss of the step's batches (before the primal step), so lambda grows while
the constraint is violated and decays once it holds. lambda starts at `retain_weight` and the dual
updates begin after `dual_warmup_epochs` epochs (the authors' schedule: a fixed retain weight
first, then the constraint).

The engine owns lambda (the `StatefulMethod` protocol in base.py): it is logged as `dual` with each
step, saved in every checkpoint and restored on resume, and a pure function of the run (no
randomness), so a rerun or a resumed run reproduces it. With several processes the retain loss is
averaged over them before the update, so every process holds the same lambda.

Where open-unlearning's `PDU` trainer (contributed by the authors) differs: its forget loss
averages the flattening term over the logits *at* answer-token positions (`labels != -100` on the
unshifted logits: the distributions after each answer token, the last one after the answer's end)
while ours, like every method here, takes the positions that predict answer tokens; it updates
lambda once per micro-batch (the same as per step without gradient accumulation); its
`dual_update_upon: epoch` mode (one update per epoch from a full pass over the retain batches) is
not implemented here. Defaults are the authors' TOFU run (community/methods/PDU/run.sh: initial
lambda 100, eta 5, eps 0.3, warm-up 5 epochs of 10); `retain_eps` must be set above the start
model's retain NLL on the data at hand, or the constraint only grows lambda.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from torch import Tensor

from forgetbench.errors import ConfigError
from forgetbench.methods._terms import batch_nll, token_mean
from forgetbench.methods.base import (
    METHODS,
    Parts,
    UnlearnInputs,
    check_finite,
    check_nonnegative,
    check_positive,
    check_reduction,
    require_inputs,
)


def flattening_loss(
    logits: Tensor, mask: Tensor, *, reduction: str = "tokens"
) -> Tensor:  # (B, T-1, V), (B, T-1) -> scalar
    """(max_v z_v - mean_v z_v)^2 averaged over the answer positions by `reduction`.

    d/dz_v at a position: 2 g (1[v = argmax] - 1/V) with g = max - mean >= 0, so a descent step
    lowers the top logit and raises the rest: the distribution flattens.
    """
    z = logits.float()
    gap = z.max(dim=-1).values - z.mean(dim=-1)
    return token_mean(gap.pow(2), mask, reduction)


def dual_update(dual: float, retain_loss: float, *, step_size: float, eps: float) -> float:
    """Projected dual ascent: max(0, lambda + eta * (L_R - eps))."""
    return max(0.0, dual + step_size * (retain_loss - eps))


@METHODS.register("pdu")
@dataclass(frozen=True)
class PDU:
    name: ClassVar[str] = "pdu"
    needs: ClassVar[frozenset[str]] = frozenset(
        {"forget_logits", "forget_mask", "forget_logps", "retain_logps", "retain_mask"}
    )

    retain_eps: float = 0.3  # eps, the retain-loss bound (authors' TOFU run: 0.3)
    retain_weight: float = 100.0  # initial lambda (authors' TOFU run: 100; open-unlearning: alpha)
    dual_step_size: float = 5.0  # eta (authors' TOFU run: 5; open-unlearning's default 1)
    dual_warmup_epochs: int = 5  # lambda stays fixed this many epochs (authors: 5)
    forget_weight: float = 1.0  # w_f (open-unlearning's gamma)
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # see _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_reduction(self.name, self.loss_reduction)
        check_finite(self.name, "retain_eps", self.retain_eps)
        check_nonnegative(self.name, "retain_weight", self.retain_weight)
        check_nonnegative(self.name, "dual_step_size", self.dual_step_size)
        if isinstance(self.dual_warmup_epochs, bool) or not (
            isinstance(self.dual_warmup_epochs, int) and self.dual_warmup_epochs >= 0
        ):
            raise ConfigError(
                f"{self.name}.dual_warmup_epochs must be an integer >= 0, "
                f"got {self.dual_warmup_epochs!r}"
            )
        check_positive(self.name, "forget_weight", self.forget_weight)

    def required_inputs(self) -> frozenset[str]:
        return self.needs

    # --- StatefulMethod: the dual variable -------------------------------------------------

    def initial_state(self) -> dict[str, float]:
        return {"dual": float(self.retain_weight)}

    def stateful_loss(
        self, inputs: UnlearnInputs, state: dict[str, float]
    ) -> tuple[Tensor, Parts, dict[str, Tensor]]:
        require_inputs(self.name, inputs, self.required_inputs())
        reduction = self.loss_reduction
        forget_term = flattening_loss(inputs.forget_logits, inputs.forget_mask, reduction=reduction)
        retain_nll = batch_nll(inputs.retain_logps, inputs.retain_mask, reduction)
        # The -lambda*eps constant changes the value, not the gradient; it makes the logged loss
        # the Lagrangian.
        total = self.forget_weight * forget_term + state["dual"] * (retain_nll - self.retain_eps)
        parts = {
            "flattening": forget_term.detach(),
            "forget_nll": batch_nll(inputs.forget_logps, inputs.forget_mask, reduction).detach(),
            "retain_nll": retain_nll.detach(),
        }
        return total, parts, {"retain_nll": retain_nll.detach()}

    def next_state(
        self, state: dict[str, float], observed: dict[str, float], *, epoch: int
    ) -> dict[str, float]:
        if epoch < self.dual_warmup_epochs:
            return dict(state)
        return {
            "dual": dual_update(
                state["dual"],
                observed["retain_nll"],
                step_size=self.dual_step_size,
                eps=self.retain_eps,
            )
        }

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        total, parts, _ = self.stateful_loss(inputs, self.initial_state())
        return total, parts
