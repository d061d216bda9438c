"""What a training run plugs into the one loop: a loss function (`LossFn`), the examples of each
epoch (`Examples`), and the two ways a method keeps what a scalar loss cannot say: a `StepHook`
(an update that is not the gradient of one scalar) and a `StatefulLoss` (state beyond the model's
and the optimizer's, saved with each checkpoint)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

# A loss function returns the scalar to minimise, or (scalar, named parts to log: 0-d tensors,
# read with the step's other numbers, or floats).
LossFn = Callable[[torch.nn.Module, Any], torch.Tensor | tuple[torch.Tensor, dict[str, Any]]]
# The examples of one epoch, or a function epoch -> that epoch's examples (same count every epoch;
# e.g. unlearning redraws each forget sample's retain partner per epoch).
Examples = Sequence[Any] | Callable[[int], Sequence[Any]]


@runtime_checkable
class StepHook(Protocol):
    """How a method whose update is not `backward(loss)` + `optimizer.step()` joins the loop.

    The loop still owns the data order, gradient accumulation, the optimizer (AdamW) and its
    schedule, gradient clipping, the log, checkpoints and resume; the hook only replaces the two
    calls in between. Calls per optimizer step: `backward` once per micro-batch, then
    `prepare_step` (the update direction goes into `.grad`), clipping, then `step`.
    One process only (the hook's gradients bypass DDP's all-reduce).
    """

    def backward(self, model: torch.nn.Module, batch: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        """One micro-batch: keep its share of the step's gradients; return a scalar to log (a
        non-finite one stops the run) and named parts."""
        ...

    def prepare_step(self, model: torch.nn.Module) -> None:
        """All micro-batches of the step are in: write the update direction into `.grad`."""
        ...

    def step(self, model: torch.nn.Module, optimizer: Any, *, step: int) -> dict[str, float]:
        """Take the optimizer step (`step` = optimizer steps done before it); return named
        numbers to log."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state saved with each checkpoint, so a resumed run continues exactly."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class StatefulLoss(Protocol):
    """A `loss_fn` with state beyond the model's and the optimizer's (a method's dual variable):
    the loop calls `end_step` once after each optimizer step (`reduce` averages a tensor over
    processes; `epoch` is the 0-based epoch of the step) and saves `state_dict()` with every
    checkpoint, restoring it on resume, as it does a step hook's."""

    def __call__(
        self, model: torch.nn.Module, batch: Any
    ) -> torch.Tensor | tuple[torch.Tensor, dict[str, Any]]: ...

    def end_step(self, reduce: Callable[[torch.Tensor], torch.Tensor], *, epoch: int) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
