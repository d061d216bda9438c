"""Where a study's independent jobs (models, reference evaluations, each method's trajectory)
run: in this process, or in a pool of single-threaded worker processes."""

from __future__ import annotations

import os
from concurrent.futures import Future
from typing import Any

from forgetbench.config import RunConfig


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
    from transformers.utils import logging

    logging.disable_progress_bar()


def _init_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    quiet_transformers()


def study_workers(config: RunConfig, model: str | None) -> int:
    """`study.workers`, or (0) one process per CPU core for the built-in study on CPU."""
    if config.study.workers:
        return config.study.workers
    from forgetbench.device import default_device
    from forgetbench.eval.distributed import process_layout

    if model is not None or default_device().type != "cpu" or process_layout()[1] > 1:
        return 1
    return os.cpu_count() or 1


def make_pool(workers: int) -> Any:
    if workers <= 1:
        return InlinePool()
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn, not fork: a forked torch process can deadlock on its parent's thread pools.
    threads = max(1, (os.cpu_count() or 1) // workers)
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(threads,),
    )
    pool.workers = workers  # type: ignore[attr-defined]
    return pool
