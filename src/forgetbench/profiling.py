"""Where a run's time goes: torch.profiler over a few steady steps, summarised in numbers.

A `StepProfiler` is told each time a step ends (an optimizer step of a training run, a forward
pass of an evaluation); it skips the first `skip` steps (kernel selection, allocator warm-up, lazy
initialisation) and records the next `steps`. Its `summary()`:

- `seconds_per_step`: wall time per recorded step;
- `device_busy_share`: the share of that wall time in which the GPU ran anything (kernels,
  copies, fills; overlapping ones counted once). A GPU waiting on the host shows here;
- `device_seconds_per_step` and `launch_seconds_per_step`: the GPU's busy time against the host's
  time in the CUDA launch calls (many small kernels launched one by one make the second larger);
- `host_syncs_per_step`: calls that make the host wait for the GPU (stream, device and event
  synchronisation, blocking copies);
- `host_reads_per_step`: numbers read off a tensor into Python (`.item()`, `float(t)`, `if t:`:
  `aten::_local_scalar_dense`), each a synchronisation on a GPU;
- `top`: the operations that took the most time: GPU kernels on a GPU, host operators (by their
  own time) on the CPU.

On the CPU the device figures are None: the same profile then shows the host's operators, the
CPU profile. The figures are measurements of the steps recorded, nothing is estimated.
"""

from __future__ import annotations

import time
from typing import Any

import torch

# CUDA runtime and driver calls that block the host until the device has caught up.
SYNC_CALLS = (
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",  # the blocking form; cudaMemcpyAsync does not match (exact names)
    "cuStreamSynchronize",
    "cuCtxSynchronize",
)
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
READ_OP = "aten::_local_scalar_dense"
TOP = 8


class StepProfiler:
    """Profile steps `skip + 1` ... `skip + steps` of a run on `device`; call `step()` at the end
    of each step and `close()` when the run is over (it stops a window the run cut short)."""

    def __init__(self, device: torch.device, *, skip: int = 1, steps: int = 3) -> None:
        self.device = torch.device(device)
        self.skip = skip
        self.steps = steps
        self.seen = 0
        self.recorded = 0
        self._profiler: Any = None
        self._started = 0.0
        self._seconds = 0.0
        self._events: list[Any] = []
        self._averages: list[Any] = []

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def step(self) -> None:
        self.seen += 1
        if self._profiler is not None:
            self.recorded += 1
            if self.recorded >= self.steps:
                self._stop()
        elif self.seen == self.skip and self.recorded == 0:
            self._start()

    def close(self) -> None:
        if self._profiler is not None:
            self._stop()

    def _start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        self._sync()
        self._profiler = profile(activities=activities)
        self._profiler.start()
        self._started = time.perf_counter()

    def _stop(self) -> None:
        self._sync()
        self._seconds = time.perf_counter() - self._started
        profiler, self._profiler = self._profiler, None
        profiler.stop()
        self._events = list(profiler.profiler.kineto_results.events())
        self._averages = list(profiler.key_averages())

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def summary(self) -> dict[str, Any]:
        steps = self.recorded
        out: dict[str, Any] = {
            "device": str(self.device),
            "skipped_steps": self.skip,
            "profiled_steps": steps,
        }
        if not steps:
            return {**out, "note": f"the run ended before step {self.skip + 1}: nothing profiled"}
        names = [e.name() for e in self._events]
        device_events = [e for e in self._events if _on_device(e)]
        busy = _union_seconds(device_events) if self.cuda else None
        launch = sum(e.duration_ns() for e in self._events if e.name() in LAUNCH_CALLS) / 1e9
        kernels = [e for e in device_events if e.name() not in ("Memcpy", "Memset")]
        out.update(
            seconds_per_step=round(self._seconds / steps, 6),
            device_busy_share=None if busy is None else round(min(1.0, busy / self._seconds), 4),
            device_seconds_per_step=None if busy is None else round(busy / steps, 6),
            launch_seconds_per_step=round(launch / steps, 6) if self.cuda else None,
            kernels_per_step=round(len(kernels) / steps, 1) if self.cuda else None,
            host_syncs_per_step=(
                round(sum(n in SYNC_CALLS for n in names) / steps, 2) if self.cuda else None
            ),
            host_reads_per_step=round(names.count(READ_OP) / steps, 2),
            top=self._top(steps),
        )
        return out

    def _top(self, steps: int) -> list[dict[str, Any]]:
        def own_us(average: Any) -> float:
            if self.cuda:
                return float(getattr(average, "self_device_time_total", 0.0))
            return float(average.self_cpu_time_total)

        ranked = sorted(self._averages, key=own_us, reverse=True)
        total = sum(own_us(a) for a in self._averages) or 1.0
        return [
            {
                "name": a.key,
                "seconds_per_step": round(own_us(a) / 1e6 / steps, 6),
                "share": round(own_us(a) / total, 4),
                "calls_per_step": round(a.count / steps, 1),
            }
            for a in ranked[:TOP]
            if own_us(a) > 0
        ]


def _on_device(event: Any) -> bool:
    return event.device_type() != torch.autograd.DeviceType.CPU and not event.is_async()


def _union_seconds(events: list[Any]) -> float:
    """Total time covered by the events' intervals, overlaps counted once."""
    spans = sorted((e.start_ns(), e.end_ns()) for e in events)
    total, end = 0, None
    for start, stop in spans:
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total / 1e9
