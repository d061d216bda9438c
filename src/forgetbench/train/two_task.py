"""The two-gradient step of a `TwoTaskMethod` (NGDiff) as a `StepHook` of the one training loop.

Jin et al. 2024, "Unlearning as multi-task optimization: A normalized gradient difference approach
with an adaptive learning rate" (NAACL 2025); the formulas are in forgetbench.methods.ngdiff. The
loop keeps everything it does for every other method — data order, gradient accumulation, AdamW
with its warm-up/decay schedule, gradient clipping, the log, checkpoints and resume; this hook only
replaces `backward(loss)` and `optimizer.step()`:

1. `backward`, per micro-batch: L_F, L_R = method.task_losses(...); g_F and g_R by two backward
   passes (`torch.autograd.grad`, so nothing lands in `.grad`), each summed over the step's
   micro-batches.
2. `prepare_step`: d = method.combine_gradients(mean g_F, mean g_R) becomes `.grad`.
3. `step`: AdamW steps on d at `gain` x the scheduled lr. On fit steps (AutoLR, the GeN rule of
   Bu and Xu 2024 applied to the optimizer's own step, as the authors' `GeN.lr_parabola` does
   for Adam): with w the weights before the step and D the step AdamW took, the objective is
   evaluated at w + m * D for each trial multiplier m (forward passes on the step's batches),
   s = method.fit_scale(...) moves toward its fitted minimiser (the GeN package's smoothed rule
   by default; the gain stays within the method's bounds), the weights become w + s * D and the
   gain is multiplied by s.

AdamW's step is linear in its learning rate (decoupled weight decay included: w(1 - lr*wd) -
lr*m/(sqrt(v)+eps)), so scaling the step by s is the same as having stepped at s x the lr; AdamW's
moments are updated once per step, with d. The gain is the only state beyond AdamW's and goes into
every checkpoint, so a killed run resumes to the same weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from forgetbench.methods._terms import global_grad_norm
from forgetbench.methods.base import Parts, TwoTaskMethod, UnlearnInputs
from forgetbench.methods.plugins import plugin_call


class TwoTaskStep:
    """`StepHook` for a `TwoTaskMethod`; `inputs_fn(model, batch)` runs the forward passes."""

    def __init__(
        self,
        method: TwoTaskMethod,
        inputs_fn: Callable[[torch.nn.Module, Any], UnlearnInputs],
    ) -> None:
        self.method = method
        self.inputs_fn = inputs_fn
        self.gain = 1.0  # fitted lr / scheduled lr
        self._forget_grads: list[torch.Tensor] | None = None  # summed over the step's batches
        self._retain_grads: list[torch.Tensor] | None = None
        self._batches: list[Any] = []  # this step's micro-batches, for the step-size fit
        self._norms = (0.0, 0.0)  # ||g_F||, ||g_R|| of the step's mean gradients

    # --- StepHook ---------------------------------------------------------------------------

    def backward(self, model: torch.nn.Module, batch: Any) -> tuple[torch.Tensor, Parts]:
        inputs = self.inputs_fn(model, batch)
        forget, retain = plugin_call(
            self.method, "task_losses", lambda: self.method.task_losses(inputs)
        )
        logged = (retain - forget).detach()  # GradDiff's objective, for the log only
        parts = {"forget_nll": forget.detach(), "retain_nll": retain.detach()}
        if not torch.isfinite(logged):
            return logged, parts  # the loop stops the run with its usual message
        params = _trainable(model)
        forget_grads = _grads(forget, params, retain_graph=True)
        retain_grads = _grads(retain, params, retain_graph=False)
        if self._forget_grads is None or self._retain_grads is None:
            self._forget_grads, self._retain_grads = forget_grads, retain_grads
        else:
            for total, g in zip(self._forget_grads, forget_grads, strict=True):
                total.add_(g)
            for total, g in zip(self._retain_grads, retain_grads, strict=True):
                total.add_(g)
        self._batches.append(batch)
        return logged, parts

    def prepare_step(self, model: torch.nn.Module) -> None:
        if self._forget_grads is None or self._retain_grads is None:
            raise RuntimeError("TwoTaskStep.prepare_step before any backward")
        count = len(self._batches)
        forget_grads = [g / count for g in self._forget_grads]
        retain_grads = [g / count for g in self._retain_grads]
        self._forget_grads = self._retain_grads = None
        self._norms = (float(global_grad_norm(forget_grads)), float(global_grad_norm(retain_grads)))
        direction = self.method.combine_gradients(forget_grads, retain_grads)
        for parameter, d in zip(_trainable(model), direction, strict=True):
            parameter.grad = d.to(parameter.dtype)

    def step(self, model: torch.nn.Module, optimizer: Any, *, step: int) -> dict[str, float]:
        params = _trainable(model)
        fit = (
            self.method.auto_lr
            and step % self.method.lr_update_every == 0
            and min(self._norms) > 0  # a task without gradient has no objective to fit
        )
        before = [p.detach().clone() for p in params] if fit else None
        scheduled = [group["lr"] for group in optimizer.param_groups]
        for group in optimizer.param_groups:
            group["lr"] *= self.gain
        optimizer.step()
        for group, lr in zip(optimizer.param_groups, scheduled, strict=True):
            group["lr"] = lr  # the scheduler keeps owning the schedule
        if before is not None:
            self.gain *= self._fit(model, params, before)
        self._batches = []
        return {"lr_gain": self.gain}

    def state_dict(self) -> dict[str, Any]:
        return {"gain": self.gain}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.gain = float(state.get("gain", 1.0))

    # --- AutoLR -----------------------------------------------------------------------------

    @torch.no_grad()
    def _fit(
        self, model: torch.nn.Module, params: list[torch.Tensor], before: list[torch.Tensor]
    ) -> float:
        """Multiple s of the step just taken that minimises the fitted objective; the weights are
        left at before + s * step."""
        steps = [p.detach() - w for p, w in zip(params, before, strict=True)]
        multipliers = list(self.method.trial_multipliers)
        values = []
        for m in multipliers:
            _place(params, before, steps, m)
            values.append(self._objective(model))
        scale = self.method.fit_scale(values, gain=self.gain)
        _place(params, before, steps, scale)
        return scale

    def _objective(self, model: torch.nn.Module) -> float:
        forget_norm, retain_norm = self._norms
        total = 0.0
        for batch in self._batches:
            forget, retain = self.method.task_losses(self.inputs_fn(model, batch))
            value = self.method.objective(
                forget, retain, forget_norm=forget_norm, retain_norm=retain_norm
            )
            total += float(value)
        return total / len(self._batches)


def _trainable(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p for p in model.parameters() if p.requires_grad]


def _grads(
    loss: torch.Tensor, params: list[torch.Tensor], *, retain_graph: bool
) -> list[torch.Tensor]:
    grads = torch.autograd.grad(loss, params, retain_graph=retain_graph, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]


def _place(
    params: list[torch.Tensor], before: list[torch.Tensor], steps: list[torch.Tensor], m: float
) -> None:
    """Set the weights to before + m * step, in place."""
    for p, w, d in zip(params, before, steps, strict=True):
        if m == 0:
            p.data.copy_(w)
        else:
            torch.add(w, d, alpha=m, out=p.data)
