"""Where a study's independent jobs (models, reference evaluations, each method's trajectory)
run: in this process, or in a pool of single-threaded worker processes."""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Sequence
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from typing import Any

import torch
from transformers.utils import logging

from forgetbench.config import RunConfig
from forgetbench.device import DEVICE_ENV, default_device
from forgetbench.eval.distributed import process_layout
from forgetbench.methods.plugins import load_plugins, loaded_plugins


class InlinePool:
    """The pool interface, run in this process: one worker (GPUs, distributed launches, external
    models) takes the same code path as many."""

    workers = 1

    def submit(self, function: Any, *args: Any) -> Future:
        # An error (or Ctrl-C) stops the study here, before the next job starts.
        future: Future = Future()
        future.set_result(function(*args))
        return future

    def shutdown(self, **_: Any) -> None:
        pass


def quiet_transformers() -> None:
    # Its per-file "Loading weights" bars, from every model load of every worker, would bury
    # the study's own progress bar.

    logging.disable_progress_bar()


# Ctrl-C reaches every process of the group, the workers too. In a worker it stops the job
# running there (KeyboardInterrupt, whose cleanup keeps every write whole, as in the main
# process) and no job starts after it. Without this, each worker went on with the jobs the
# executor had already queued to it (one more than it has workers): Ctrl-C took a whole job to
# return (18 s at tiny scale, minutes at small), and an idle worker died with a traceback,
# breaking the pool, whose manager then terminated the others mid-cleanup.
_stop: Any = None  # the pool's Event: set when it shuts down with jobs still queued
_running = False
_interrupted = False


def _init_worker(
    threads: int,
    stop: Any,
    plugins: tuple[str, ...] = (),
    environ: dict[str, str] | None = None,
    devices: tuple[str, ...] = (),
    started: Any = None,
) -> None:

    global _stop
    if environ is not None:
        # A forked worker inherits the fork server's environment, fixed when the server started;
        # the parent's now (the device, precision and cache it configured) is what a job must see.
        os.environ.clear()
        os.environ.update(environ)
    if devices:  # a placement on the GPU and the CPU: the i-th worker started takes devices[i]
        with started.get_lock():
            index = started.value
            started.value += 1
        os.environ[DEVICE_ENV] = devices[index % len(devices)]
    _stop = stop
    signal.signal(signal.SIGINT, _on_interrupt)
    torch.set_num_threads(threads)
    quiet_transformers()
    # A spawned process knows only the built-in methods: the parent's plugins are loaded before
    # any job names one of their methods.
    load_plugins(plugins, source="the study's plugins")


def _on_interrupt(signum: int, frame: Any) -> None:
    global _interrupted
    first = not _interrupted
    _interrupted = True
    # Once: a second Ctrl-C must not cut short the cleanup of the first.
    if first and _running:
        raise KeyboardInterrupt


def _run_job(function: Any, *args: Any) -> Any:
    global _running
    if _interrupted or (_stop is not None and _stop.is_set()):
        raise CancelledError("the study stopped before this job started")
    _running = True
    try:
        return function(*args)
    finally:
        _running = False


# What every job imports (torch, transformers, the evaluation and training code): about 4 s of CPU
# per interpreter. The fork server imports it once per process; each worker is a fork of it.
# rouge_score (with nltk) is imported lazily, on a process's first ROUGE, which every evaluation
# computes: 0.65 s more for each worker of each study unless the fork server holds it.
_PRELOAD = ["forgetbench.study.jobs", "rouge_score.rouge_scorer"]


def _worker_context() -> Any:
    """forkserver, not fork or spawn. A fork of this process could deadlock on the thread pools its
    own forward passes started; the fork server is a fresh interpreter that imports the study's
    code once and never computes, so its forks start at once and safely. A spawned worker imported
    everything again: 4 s of CPU per worker, per study."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context


class _WorkerPool:
    """A process pool whose queued jobs never start once it shuts down or is interrupted."""

    def __init__(self, workers: int, threads: int, devices: tuple[str, ...] = ()) -> None:

        context = _worker_context()
        self._stop = context.Event()
        started = context.Value("i", 0)
        self._executor = ProcessPoolExecutor(
            workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(threads, self._stop, loaded_plugins(), dict(os.environ), devices, started),
        )
        self.workers = workers

    def submit(self, function: Any, *args: Any) -> Future:
        return self._executor.submit(_run_job, function, *args)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if cancel_futures:
            self._stop.set()  # the jobs handed to a worker already are out of the executor's reach
        self._executor.shutdown(wait=wait, cancel_futures=cancel_futures)


def study_workers(config: RunConfig, model: str | None) -> int:
    """`study.workers`, or (0) one process per CPU core for the built-in study on CPU."""
    if config.study.workers:
        return config.study.workers

    if model is not None or default_device().type != "cpu" or process_layout()[1] > 1:
        return 1
    return os.cpu_count() or 1


def make_pool(workers: int, devices: Sequence[str] = ()) -> Any:
    """`workers` processes splitting the cores; `devices`, one per worker, places each (a
    study's `Placement`: some on the GPU, the rest one thread each on the CPU)."""
    if workers <= 1 and len(set(devices)) <= 1:
        return InlinePool()
    return _WorkerPool(
        workers, threads=max(1, (os.cpu_count() or 1) // workers), devices=tuple(devices)
    )
