"""StepProfiler on the CPU: it records exactly the steps after the skipped ones and counts what
ran in them."""

import torch

from forgetbench.profiling import StepProfiler


def test_the_window_and_the_reads_per_step():
    profiler = StepProfiler(torch.device("cpu"), skip=2, steps=3)
    a = torch.randn(64, 64)
    for step in range(8):
        (a @ a).sum().item()  # one read a step
        if step in (2, 3, 4):
            torch.mm(a, a)  # a second matmul only in the profiled steps
        profiler.step()
    profiler.close()
    summary = profiler.summary()
    assert summary["profiled_steps"] == 3 and summary["skipped_steps"] == 2
    assert summary["host_reads_per_step"] == 1.0
    mm = next(t for t in summary["top"] if t["name"] == "aten::mm")
    assert mm["calls_per_step"] == 2.0
    assert summary["device_busy_share"] is None and summary["kernels_per_step"] is None


def test_a_run_shorter_than_the_window_says_so():
    profiler = StepProfiler(torch.device("cpu"), skip=3, steps=2)
    profiler.step()
    profiler.close()
    assert profiler.summary()["profiled_steps"] == 0
    assert "nothing profiled" in profiler.summary()["note"]
