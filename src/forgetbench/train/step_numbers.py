"""The numbers one optimizer step logs, kept on the device until the step is over.

Reading a number off a GPU (`.item()`, `float(t)`, `if t:`) makes the host wait until the device
has run everything queued before it. Done per micro-batch — the finite-loss check before
`backward`, the logged loss, each method's named terms, the token count, the gradient norm — it
leaves the GPU idle while the host launches the next kernels. So the loop only collects tensors
while a step runs and reads them all in one transfer at its end (`StepNumbers.read`), before the
step is logged or checkpointed: a non-finite loss still stops the run, one step later in the
device's timeline but before anything of that step is written.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class StepReading:
    loss: float  # the step's mean loss over its micro-batches (and processes)
    micro_losses: list[float]  # this process's loss per micro-batch, in order
    grad_norm: float | None  # before clipping; None when not clipped
    tokens: int  # this process's attention-mask tokens
    parts: dict[
        str, float
    ]  # named terms: tensors averaged over micro-batches, floats as last given

    def non_finite(self) -> tuple[str, float] | None:
        """("loss" | "gradient norm", the first non-finite value), or None when all are finite."""
        bad = next((v for v in self.micro_losses if not math.isfinite(v)), None)
        if bad is not None or not math.isfinite(self.loss):
            return "loss", self.loss if bad is None else bad
        if self.grad_norm is not None and not math.isfinite(self.grad_norm):
            return "gradient norm", self.grad_norm
        return None


class StepNumbers:
    """Collects one optimizer step's numbers as device tensors; `read` moves them to the host."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._losses: list[torch.Tensor] = []
        self._tokens: list[torch.Tensor | int] = []
        self._terms: dict[str, list[torch.Tensor]] = {}
        self._floats: dict[str, float] = {}
        self.grad_norm: torch.Tensor | float | None = None

    def add(self, loss: torch.Tensor, parts: Mapping[str, Any], tokens: torch.Tensor | int) -> None:
        """One micro-batch: its loss, its named parts (0-d tensors or floats), its token count."""
        self._losses.append(loss.detach())
        self._tokens.append(tokens)
        self.add_parts(parts)

    def add_parts(self, parts: Mapping[str, Any]) -> None:
        for name, value in parts.items():
            if isinstance(value, torch.Tensor):
                self._terms.setdefault(name, []).append(value.detach())
            else:
                self._floats[name] = float(value)

    def read(self, reduce: Callable[[torch.Tensor], torch.Tensor]) -> StepReading:
        """Everything collected, in one device-to-host copy; then start the next step afresh.
        `reduce` averages a tensor over processes (the logged loss is the processes' mean)."""
        if not self._losses:
            raise RuntimeError("StepNumbers.read before any micro-batch")
        first = self._losses[0]
        # Exact for float32 and bf16 losses and for token counts; MPS has no float64.
        dtype = torch.float32 if first.device.type == "mps" else torch.float64
        mean = reduce(torch.stack(self._losses).mean())
        names = list(self._terms)
        values = [mean.reshape(())]
        values += [torch.stack([t.float() for t in self._terms[k]]).mean() for k in names]
        tokens, counted = self._device_tokens()
        if tokens is not None:
            values.append(tokens)
        norm = self.grad_norm
        if isinstance(norm, torch.Tensor):
            values.append(norm.reshape(()))
        values += [loss.reshape(()) for loss in self._losses]
        host = torch.stack([v.to(device=first.device, dtype=dtype) for v in values]).tolist()
        terms = dict(zip(names, host[1 : 1 + len(names)], strict=True))
        at = 1 + len(names)
        if tokens is not None:
            counted += int(host[at])
            at += 1
        if isinstance(norm, torch.Tensor):
            grad_norm: float | None = host[at]
            at += 1
        else:
            grad_norm = None if norm is None else float(norm)
        reading = StepReading(
            loss=host[0],
            micro_losses=host[at:],
            grad_norm=grad_norm,
            tokens=counted,
            parts={**terms, **self._floats},
        )
        self._reset()
        return reading

    def _device_tokens(self) -> tuple[torch.Tensor | None, int]:
        # Counts already on the host stay there: copying one to the device would itself wait.
        on_device = [t for t in self._tokens if isinstance(t, torch.Tensor)]
        counted = sum(t for t in self._tokens if not isinstance(t, torch.Tensor))
        return (torch.stack(on_device).sum() if on_device else None), counted
