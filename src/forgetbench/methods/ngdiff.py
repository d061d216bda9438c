"""NGDiff: normalised gradient difference with an automatically chosen learning rate.

Jin, Bu, Vinzamuri, Ramakrishna, Chang, Cevher and Hong 2024, "Unlearning as multi-task
optimization: A normalized gradient difference approach with an adaptive learning rate"
(arXiv 2410.22086, NAACL 2025); the NGDiff baseline of the LUME benchmark (Ramakrishna et al.
2025). Unlearning is two tasks — descend the retain loss L_R, ascend the forget loss L_F (both the
answer-token NLL, averaged over the batch as `loss_reduction` says: "tokens", default, pools every
answer token as HF's `outputs.loss`; "samples" per sample, then over the batch) — and each step
follows

    d = g_R / ||g_R|| - g_F / ||g_F||,      w <- w - eta * d

with g_R, g_F the gradients over *all* trainable parameters and ||.|| the joint L2 norm. Unit
normalisation makes the two tasks equally loud whatever the scale of their losses, and d always has
positive inner product with g_R and negative with g_F (the paper's Fig. 2 "green area"), unlike
GradDiff's g_R - g_F, which the larger gradient dominates.

Here d takes the place of the gradient in the optimizer every other method uses (AdamW through
the shared loop, `train/two_task.py`), rather than the plain step written above. Reason: a plain
`w <- w - eta * d` step (forgetbench before issue 14) moves the whole model by at most 2 * eta in
L2 norm, so at TOFU's lr 1e-5 a 7B model barely moves, while AdamW moves each weight by ~eta; and
the learning-rate rule below comes from GeN, which is defined for any base optimizer (its authors'
code, `gen-optim`'s `GeN.lr_parabola`, lets AdamW take its step and fits the loss along the
displacement AdamW produced). Not verified: which optimizer the NGDiff authors' own code uses.

The learning rate (the paper's AutoLR, from the GeN method of Bu and Xu 2024, "Gradient descent
with generalized Newton's method", ICLR 2025) minimises a second-order model of the objective
along the optimizer's step: evaluate the objective at a few trial multiples of the step (forward
passes only), fit a parabola, move toward its vertex. `gen_step_scale` is the GeN code's rule
(the default), `choose_step_size` forgetbench's earlier one. The objective
evaluated at the trials is `ngdiff_objective` = L_R/||g_R|| - L_F/||g_F|| with the norms frozen at
the current point — the scalar whose gradient is exactly d.

Engine recipe (the engine owns the model; everything here is pure; see train/two_task.py):
  1. L_F, L_R = method.task_losses(inputs); g_F, g_R = autograd grads of each (two backwards),
     each averaged over the step's micro-batches.
  2. d = method.combine_gradients(g_F, g_R) goes into .grad; the loop clips it like any gradient.
  3. AdamW steps at gain * (the scheduled lr); gain starts at 1.
  4. Every `lr_update_every` steps when `auto_lr`: with D the step AdamW just took, evaluate
     ngdiff_objective at w + m * D for m in `trial_multipliers` on the step's batches, then
     s = method.fit_scale(values, gain=gain) — `gen_step_scale` (default: the GeN package's rule,
     smoothed, at most +10% per fit) or `choose_step_size` (`lr_rule="vertex"`: jump to the
     fitted vertex) — within the gain bounds; the weights become w + s * D and gain *= s (later
     steps keep the fitted scale until the next fit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from torch import Tensor

from forgetbench.errors import ConfigError
from forgetbench.methods._terms import batch_nll, global_grad_norm
from forgetbench.methods.base import (
    METHODS,
    Parts,
    UnlearnInputs,
    check_choice,
    check_positive,
    check_reduction,
    require_inputs,
)

LR_RULES = ("gen", "vertex")


def ngdiff_task_losses(
    forget_logps: Tensor,
    forget_mask: Tensor,
    retain_logps: Tensor,
    retain_mask: Tensor,
    *,
    reduction: str = "tokens",
) -> tuple[Tensor, Tensor]:  # (B_f,T-1) x2, (B_r,T-1) x2 -> (L_F, L_R) scalars
    """The two task losses: each batch's answer-token NLL, averaged by `reduction`."""
    return (
        batch_nll(forget_logps, forget_mask, reduction),
        batch_nll(retain_logps, retain_mask, reduction),
    )


def combine_normalized_gradients(
    forget_grads: Sequence[Tensor], retain_grads: Sequence[Tensor], *, eps: float = 1e-12
) -> list[Tensor]:  # per-parameter g_F, g_R (same shapes) -> per-parameter d
    """d_i = g_R,i / ||g_R|| - g_F,i / ||g_F||, the norms taken jointly over all parameters.

    Descending along d lowers L_R and raises L_F. A task whose gradient norm is below `eps`
    contributes nothing (there is no direction to normalise), so d stays finite.
    """
    if len(forget_grads) != len(retain_grads):
        raise ValueError(
            f"combine_normalized_gradients: {len(forget_grads)} forget gradients but "
            f"{len(retain_grads)} retain gradients"
        )
    for i, (f, r) in enumerate(zip(forget_grads, retain_grads, strict=True)):
        if f.shape != r.shape:
            raise ValueError(
                f"combine_normalized_gradients: parameter {i} has forget gradient "
                f"{tuple(f.shape)} but retain gradient {tuple(r.shape)}"
            )
    forget_norm = float(global_grad_norm(forget_grads))
    retain_norm = float(global_grad_norm(retain_grads))
    forget_scale = 1.0 / forget_norm if forget_norm > eps else 0.0
    retain_scale = 1.0 / retain_norm if retain_norm > eps else 0.0
    return [
        (r.detach() * retain_scale - f.detach() * forget_scale).to(r.dtype)
        for f, r in zip(forget_grads, retain_grads, strict=True)
    ]


def ngdiff_objective(
    forget_loss: Tensor, retain_loss: Tensor, *, forget_grad_norm: float, retain_grad_norm: float
) -> Tensor:  # scalar, scalar -> scalar
    """L_R/||g_R|| - L_F/||g_F||: the scalarisation whose gradient at the current point is d;
    the function of the step size that `choose_step_size` fits."""
    if forget_grad_norm <= 0 or retain_grad_norm <= 0:
        raise ValueError(
            f"ngdiff_objective: gradient norms must be > 0, got forget {forget_grad_norm}, "
            f"retain {retain_grad_norm}"
        )
    return retain_loss / retain_grad_norm - forget_loss / forget_grad_norm


def gen_step_scale(
    trial_multipliers: Sequence[float],
    trial_losses: Sequence[float],
    *,
    smoothing: float = 0.9,
    min_r2: float = 0.99,
) -> float:
    """GeN's learning-rate update as a factor on the current step (Bu and Xu's `gen-optim`
    package, `GeN.lr_parabola`, which NGDiff's AutoLR comes from).

    x = the trial multipliers (multiples of the current step, one of them 0), y = J(x) - J(0).
    Least squares y ~ a/2 x^2 - b x (through the origin); if a > 0, b > 0 and R^2 > `min_r2`,
    the optimum is x* = b/a and the new step is `smoothing` + (1 - smoothing) * clip(x*, 1/2, 2)
    times the current one (so at most 10% up or 5% down per fit with the package's 0.9);
    otherwise the step stays. Non-finite losses return 1/2: the package halves its lr when the
    fit fails.
    """
    if len(trial_multipliers) != len(trial_losses):
        raise ValueError(
            f"gen_step_scale: {len(trial_multipliers)} multipliers but {len(trial_losses)} losses"
        )
    x = np.asarray(trial_multipliers, dtype=np.float64)
    losses = np.asarray(trial_losses, dtype=np.float64)
    if np.count_nonzero(x == 0) != 1:
        raise ValueError("gen_step_scale: the trial multipliers must contain exactly one 0")
    if not np.all(np.isfinite(losses)):
        return 0.5
    y = losses - losses[x == 0][0]
    design = np.stack([0.5 * x**2, -x], axis=1)
    (a, b), *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = float(np.sum((design @ np.array([a, b]) - y) ** 2))
    spread = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - residual / spread if spread > 0 else 0.0
    if not (a > 0 and b > 0 and r2 > min_r2):
        return 1.0
    return smoothing + (1.0 - smoothing) * float(np.clip(b / a, 0.5, 2.0))


def choose_step_size(
    trial_sizes: Sequence[float], trial_losses: Sequence[float], *, min: float, max: float
) -> float:
    """The learning rate for a step w - eta * d, from the objective at trial step sizes.

    Rule: least-squares fit J(eta) ~ a*eta^2 + b*eta + c through the finite (eta, J) pairs
    (exact interpolation for three); if the parabola is convex (a > 0, judged relative to the
    spread of the losses) its vertex -b/(2a) is the step; otherwise (concave, flat, or fewer than
    three usable trials) fall back to the trial with the lowest loss. The result is clipped to
    [min, max] — a step outside the trial range is an extrapolation and the clip bounds the damage.
    Negative trial sizes are allowed (GeN evaluates at -eta, 0, +eta for a centred difference).
    """
    if len(trial_sizes) != len(trial_losses):
        raise ValueError(
            f"choose_step_size: {len(trial_sizes)} trial sizes but {len(trial_losses)} losses"
        )
    if not (math.isfinite(min) and math.isfinite(max) and 0 <= min <= max):
        raise ValueError(f"choose_step_size: need 0 <= min <= max, got min={min}, max={max}")
    if not trial_sizes:
        raise ValueError("choose_step_size: no trial step sizes")
    etas = np.asarray(trial_sizes, dtype=np.float64)
    losses = np.asarray(trial_losses, dtype=np.float64)
    finite = np.isfinite(etas) & np.isfinite(losses)
    etas, losses = etas[finite], losses[finite]

    def clip(value: float) -> float:
        return float(np.clip(value, min, max))

    if etas.size == 0:
        return clip(min)  # every trial diverged: take the smallest allowed step
    best = float(etas[int(np.argmin(losses))])
    if np.unique(etas).size < 3:
        return clip(best)
    # Fit in units of the largest trial so eta^2 ~ 1e-10 does not wreck the conditioning.
    unit = float(np.abs(etas).max())
    a, b, _ = np.polyfit(etas / unit, losses, deg=2)
    # Curvature counts only if it is clearly above rounding noise relative to the losses' spread
    # (a and the losses share units once eta is rescaled); flat or concave -> best trial.
    spread = float(losses.max() - losses.min())
    if not np.isfinite(a) or spread == 0 or a <= 1e-12 * spread:
        return clip(best)
    return clip(float(-b / (2.0 * a)) * unit)


@METHODS.register("ngdiff")
@dataclass(frozen=True)
class NGDiff:
    """Hyperparameters of the update rule. The step-size bounds are ratios of the scheduled
    learning rate (`unlearn.lr` with warm-up and decay), so one config serves 7B models
    (lr 1e-5) and the miniature model alike; they are ours, the paper leaves the range open."""

    name: ClassVar[str] = "ngdiff"
    needs: ClassVar[frozenset[str]] = frozenset(
        {"forget_logps", "forget_mask", "retain_logps", "retain_mask"}
    )

    auto_lr: bool = True  # False: AdamW along d at the scheduled lr, no fitted gain
    lr_rule: Literal["gen", "vertex"] = "gen"  # gen_step_scale (GeN's code) | choose_step_size
    trial_multipliers: tuple[float, ...] = (-1.0, 0.0, 1.0)  # x current step: GeN's lr_factor
    min_lr_ratio: float = 0.01  # fitted lr >= min_lr_ratio x the scheduled lr
    max_lr_ratio: float = 10.0  # fitted lr <= max_lr_ratio x the scheduled lr
    lr_update_every: int = 1  # steps between re-fits (GeN amortises the forward passes this way)
    loss_reduction: Literal["tokens", "samples"] = "tokens"  # see _terms.LOSS_REDUCTIONS

    def __post_init__(self) -> None:
        check_reduction(self.name, self.loss_reduction)
        if not isinstance(self.auto_lr, bool):
            raise ConfigError(f"ngdiff.auto_lr must be true or false, got {self.auto_lr!r}")
        multipliers = self.trial_multipliers
        if len(set(multipliers)) < 3 or not all(math.isfinite(m) for m in multipliers):
            raise ConfigError(
                f"ngdiff.trial_multipliers must hold at least 3 distinct finite numbers, "
                f"got {list(multipliers)}",
                "a parabola needs three points, e.g. [-1, 0, 1]",
            )
        check_choice(self.name, "lr_rule", self.lr_rule, LR_RULES)
        if self.lr_rule == "gen" and list(multipliers).count(0) != 1:
            raise ConfigError(
                f"ngdiff.trial_multipliers must contain 0 exactly once for lr_rule=gen, "
                f"got {list(multipliers)}",
                "GeN measures the objective relative to the current point, e.g. [-1, 0, 1]",
            )
        check_positive(self.name, "min_lr_ratio", self.min_lr_ratio)
        check_positive(self.name, "max_lr_ratio", self.max_lr_ratio)
        if self.min_lr_ratio > self.max_lr_ratio:
            raise ConfigError(
                f"ngdiff.min_lr_ratio must be <= ngdiff.max_lr_ratio, got "
                f"{self.min_lr_ratio} > {self.max_lr_ratio}"
            )
        if (
            isinstance(self.lr_update_every, bool)
            or not isinstance(self.lr_update_every, int)
            or self.lr_update_every < 1
        ):
            raise ConfigError(f"ngdiff.lr_update_every must be >= 1, got {self.lr_update_every}")

    def required_inputs(self) -> frozenset[str]:
        return self.needs

    def gain_bounds(self) -> tuple[float, float]:
        """Bounds of the fitted learning rate as multiples of the scheduled one."""
        return self.min_lr_ratio, self.max_lr_ratio

    def fit_scale(self, trial_losses: Sequence[float], *, gain: float) -> float:
        """Factor s on the step just taken, from the objective at `trial_multipliers` x that step;
        the fitted lr (gain x s x the scheduled lr) stays within `gain_bounds`."""
        low, high = self.min_lr_ratio / gain, self.max_lr_ratio / gain
        if self.lr_rule == "gen":
            return float(np.clip(gen_step_scale(self.trial_multipliers, trial_losses), low, high))
        return choose_step_size(self.trial_multipliers, trial_losses, min=low, max=high)

    def task_losses(self, inputs: UnlearnInputs) -> tuple[Tensor, Tensor]:
        """(L_F, L_R), to be back-propagated separately."""
        require_inputs(self.name, inputs, self.required_inputs())
        return ngdiff_task_losses(
            inputs.forget_logps,
            inputs.forget_mask,
            inputs.retain_logps,
            inputs.retain_mask,
            reduction=self.loss_reduction,
        )

    def combine_gradients(
        self, forget_grads: Sequence[Tensor], retain_grads: Sequence[Tensor]
    ) -> list[Tensor]:
        """The update direction d from the two task gradients (what the optimizer steps on)."""
        return combine_normalized_gradients(forget_grads, retain_grads)

    def objective(
        self, forget_loss: Tensor, retain_loss: Tensor, *, forget_norm: float, retain_norm: float
    ) -> Tensor:
        """The scalar the step size is fitted on (its gradient at the current point is d)."""
        return ngdiff_objective(
            forget_loss, retain_loss, forget_grad_norm=forget_norm, retain_grad_norm=retain_norm
        )

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        """L_R - L_F (GradDiff's objective), for logging: NGDiff does NOT step along its gradient
        — the engine uses `task_losses` and `combine_gradients` (it is a `TwoTaskMethod`)."""
        forget, retain = self.task_losses(inputs)
        return retain - forget, {"forget_nll": forget.detach(), "retain_nll": retain.detach()}
