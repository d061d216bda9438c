"""Where the miniature's study runs on a GPU machine: worker processes on the GPU, the CPU cores,
or both, chosen from measured step times (`choose_placement`, fed measurements here); a CPU-only
machine measures nothing and keeps one CPU worker per core."""

from __future__ import annotations

import multiprocessing
import os
import signal

import pytest
import torch

from forgetbench.config import RunConfig
from forgetbench.device import DEVICE_ENV, configure
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.study import placement, pool
from forgetbench.study.placement import (
    Placement,
    _seconds_per_step,
    _Vocabulary,
    choose_placement,
    miniature_placement,
    placed,
    study_placement,
)


def test_a_launch_bound_gpu_takes_workers_and_the_other_cores_train_too():
    # One process: 20 ms a step, of which the GPU is busy 2 ms; a core: 50 ms a step.
    chosen = choose_placement(16, cpu_step_s=0.05, gpu_step_s=0.02, gpu_busy_s=0.002)
    # 8 GPU workers (the most tried) give 400 steps/s, the other 8 cores 160 more.
    assert (chosen.gpu_workers, chosen.cpu_workers, chosen.kind) == (8, 8, "both")
    assert chosen.estimates["8 gpu + 8 cpu"] == pytest.approx(560)
    assert chosen.estimates["0 gpu + 16 cpu"] == pytest.approx(320)
    assert chosen.estimates["8 gpu + 0 cpu"] == pytest.approx(400)
    assert chosen.measured == {"cpu": 0.05, "gpu": 0.02, "gpu_busy": 0.002}
    assert "8 GPU and 8 CPU worker processes" in chosen.line()
    assert chosen.devices() == ["cuda"] * 8 + ["cpu"] * 8
    assert chosen.record()["kind"] == "both"


def test_a_gpu_that_fills_at_two_workers_gets_two_and_no_cpu_worker_for_crumbs():
    # The GPU saturates at 2 workers (200 steps/s); a core's 0.001 steps/s is within the noise.
    chosen = choose_placement(4, cpu_step_s=1000.0, gpu_step_s=0.01, gpu_busy_s=0.005)
    assert (chosen.gpu_workers, chosen.cpu_workers, chosen.kind) == (2, 0, "gpu")
    assert chosen.estimates["3 gpu + 0 cpu"] == pytest.approx(200)


def test_a_slow_gpu_leaves_the_study_on_the_cpu_cores():
    chosen = choose_placement(4, cpu_step_s=0.05, gpu_step_s=0.5, gpu_busy_s=0.4)
    assert (chosen.gpu_workers, chosen.cpu_workers, chosen.kind) == (0, 4, "cpu")
    assert chosen.estimates["1 gpu + 3 cpu"] == pytest.approx(2 + 60)


def test_a_cpu_only_machine_measures_nothing_and_keeps_a_worker_per_core(monkeypatch):
    def no_measurement(_scale):
        raise AssertionError("measured without a GPU")

    chosen = study_placement(2, scale="tiny", gpu=False, measure=no_measurement)
    assert chosen == Placement(0, 2) and chosen.kind == "cpu" and chosen.devices() == ["cpu"] * 2
    # The study itself: on the CPU no placement is measured (study_workers decides, as before).
    monkeypatch.setattr(placement, "measure_steps", no_measurement)
    configure("cpu")
    assert miniature_placement(RunConfig(scale="tiny"), None) is None


def test_on_a_gpu_the_unset_built_in_study_is_placed_by_measurement(monkeypatch):
    import forgetbench.device

    monkeypatch.setattr(forgetbench.device, "default_device", lambda: torch.device("cuda"))
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    measured = {"cpu_step_s": 0.05, "gpu_step_s": 0.01, "gpu_busy_s": 0.005}
    monkeypatch.setattr(placement, "measure_steps", lambda scale: measured)
    chosen = miniature_placement(RunConfig(scale="tiny"), None)
    assert (chosen.gpu_workers, chosen.cpu_workers) == (2, 2)  # 200 + 40 steps/s
    # A worker count the user gave, or a given model, keeps the earlier rule.
    assert miniature_placement(RunConfig(scale="tiny", study={"workers": 3}), None) is None
    assert miniature_placement(RunConfig(scale="tiny"), "some/model") is None


def test_each_worker_takes_its_device_in_the_order_started(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV, "auto")
    handler = signal.getsignal(signal.SIGINT)
    threads = torch.get_num_threads()
    started = multiprocessing.get_context("spawn").Value("i", 0)
    seen = []
    try:
        for _ in range(3):
            pool._init_worker(threads, None, (), None, ("cuda", "cpu", "cpu"), started)
            seen.append(os.environ[DEVICE_ENV])
    finally:
        signal.signal(signal.SIGINT, handler)
    assert seen == ["cuda", "cpu", "cpu"]


def test_a_cpu_placement_puts_the_study_process_on_the_cpu_while_it_runs(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV, "auto")
    with placed(Placement(0, 4)):
        assert os.environ[DEVICE_ENV] == "cpu"
    assert os.environ[DEVICE_ENV] == "auto"
    with placed(Placement(2, 2)):  # GPU workers: the process stays where it was
        assert os.environ[DEVICE_ENV] == "auto"


def test_the_measurement_times_a_training_step_of_the_scales_shape(monkeypatch):
    monkeypatch.setattr(placement, "MEASURE_BATCH", 2)
    model = build_tiny_model(_Vocabulary(1024), scale="tiny")
    before = model.lm_head.weight.detach().clone()
    seconds, busy = _seconds_per_step(model, torch.device("cpu"))
    assert 0 < seconds < 5 and busy is None  # the CPU has no GPU-busy time
    assert not torch.equal(model.lm_head.weight, before)  # it trained: AdamW stepped
