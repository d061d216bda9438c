"""`forgetbench run`: the whole study in one command. Data -> base model -> finetuned -> retain
models -> every method on every split, with a snapshot per epoch -> every metric -> results
folder and report. Each stage is cached by its inputs, so an interrupted run resumes where it
stopped and a finished one reruns in seconds."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import time
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from forgetbench import __version__
from forgetbench.config import RunConfig
from forgetbench.data.logs import EvalLog
from forgetbench.errors import ConfigError
from forgetbench.io import atomic_write_json, atomic_write_text
from forgetbench.metrics import METRICS

RESULTS_NAME = "results.json"
CSV_NAME = "results.csv"


@dataclass(frozen=True)
class Study:
    """The models and data a study runs on, resolved once."""

    data: Path  # the benchmark folder (the miniature's root, or a TOFU-layout folder)
    finetuned: Path
    base: Path | None
    retain: dict[str, Path]  # split -> retain model
    template: Any
    max_length: int
    unlearn_defaults: Any  # name, layers -> (LoopConfig, options)


@dataclass
class Evaluated:
    log: EvalLog | None
    scores: dict[str, Any]
    folder: Path


def _git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _external_defaults(name: str) -> Any:
    from forgetbench.train.study import external_unlearn_defaults

    return external_unlearn_defaults()


def _train_job(
    out: Path, data_dir: Path, base_dir: Path, split: str, common: dict[str, Any]
) -> tuple[Path, float]:
    from forgetbench.train.mini import finetune_mini

    t = time.perf_counter()
    stage = finetune_mini(out, data_dir, base_dir, split=split, **common)
    return stage.model_dir, time.perf_counter() - t


def prepare_study(
    config: RunConfig,
    out: Path,
    *,
    model: str | None,
    data: str | None,
    progress: bool,
    pool: Any = None,
) -> tuple[Study, dict[str, float]]:
    pool = pool or InlinePool()
    from forgetbench.train.study import retain_split_for

    timings: dict[str, float] = {}
    splits = config.study.splits
    if model is None and config.benchmark.name == "mini":
        from forgetbench.benchmarks.mini import generate_mini
        from forgetbench.modeling import TINY_SIZES
        from forgetbench.train.mini import TEMPLATE, mini_unlearn_defaults, pretrain_base

        data_dir = out / "data"
        t = time.perf_counter()
        generate_mini(data_dir, scale=config.scale, seed=config.seed)
        timings["data"] = time.perf_counter() - t
        common = {"scale": config.scale, "seed": config.seed}
        # The user's train.* options apply to the finetuned and retain models (one recipe).
        train_common = {**common, "train": config.train}
        # Wall time of this run: a cached stage costs ~0 here, whatever it took to train.
        t = time.perf_counter()
        base = pretrain_base(out, data_dir, **common, progress=progress)
        timings["pretrain"] = time.perf_counter() - t
        # The finetuned and retain models only need the base: trained side by side.
        stages = {"finetune": "full"}
        stages.update({f"retain_{split}": retain_split_for(split) for split in splits})
        # Progress bars from parallel workers would interleave; in this process they show.
        train_common["progress"] = progress and isinstance(pool, InlinePool)
        jobs = {
            name: pool.submit(_train_job, out, data_dir, base.model_dir, split, train_common)
            for name, split in stages.items()
        }
        trained = {name: job.result() for name, job in jobs.items()}
        timings.update({name: seconds for name, (_, seconds) in trained.items()})
        finetuned_dir = trained["finetune"][0]
        retain = {split: trained[f"retain_{split}"][0] for split in splits}
        layers = TINY_SIZES[config.scale].layers
        return Study(
            data_dir,
            finetuned_dir,
            base.model_dir,
            retain,
            TEMPLATE,
            TINY_SIZES[config.scale].max_positions,
            partial(mini_unlearn_defaults, layers=layers),
        ), timings
    if model is None or data is None:
        raise ConfigError(
            "forgetbench run with --model also needs --data (a TOFU-layout folder or hub id)",
            "or neither, for the built-in miniature study (--benchmark mini)",
        )
    if config.benchmark.name == "lume":
        raise ConfigError(
            "forgetbench run --benchmark lume is not supported yet",
            "evaluate LUME models with 'forgetbench eval --benchmark lume'",
        )
    from forgetbench.modeling import load_tokenizer, resolve_template

    tokenizer = load_tokenizer(model, trust_remote_code=config.model.trust_remote_code)
    return Study(
        Path(data),
        Path(model),
        None,
        {},
        resolve_template(config.model.template, tokenizer, model),
        config.train.max_length,
        _external_defaults,
    ), timings


def evaluate_cached(
    model_dir: Path,
    study: Study,
    config: RunConfig,
    *,
    split: str,
    folder: Path,
    full: bool,
) -> Evaluated:
    """Every metric of one model on one split, from the cache when it is there."""
    from forgetbench.eval.runner import (
        cached_evaluation,
        evaluate_model,
        evaluation_key,
        write_evaluation,
    )
    from forgetbench.modeling import load_model

    options = config.eval
    if not full:
        options = options.model_copy(update={"formats": False, "lume": False})
    benchmark = "mini" if config.benchmark.name == "mini" else "tofu"
    key = evaluation_key(model_dir, study.data, split, options, benchmark)
    cached = cached_evaluation(folder, key)
    if cached is not None:
        return Evaluated(cached[0], cached[1], folder)
    model, tokenizer = load_model(
        model_dir, dtype=config.model.dtype, trust_remote_code=config.model.trust_remote_code
    )
    log, scores, extra = evaluate_model(
        model, tokenizer, study.template, data=study.data, split=split, benchmark=benchmark,
        options=options, max_length=study.max_length,
    )  # fmt: skip
    write_evaluation(folder, key, log, scores, extra, {"model": str(model_dir), "split": split})
    return Evaluated(log, scores, folder)


def load_retain_logs(config: RunConfig, study: Study) -> dict[str, EvalLog]:
    """`study.retain_logs` of the splits with no retain model of ours, read and checked before any
    work: every reference question must be one the evaluation will score (the forget and retain
    sets, cut to `eval.max_questions`), which would otherwise fail the study at its very end."""
    from forgetbench.data.logs import SetLog, match_questions, read_eval_log
    from forgetbench.errors import UnknownNameError
    from forgetbench.eval.runner import tofu_root
    from forgetbench.eval.tofu_eval import tofu_eval_sets

    logs: dict[str, EvalLog] = {}
    for split, path in config.study.retain_logs.items():
        if split not in ("forget01", "forget05", "forget10"):
            raise UnknownNameError(
                "split in study.retain_logs", split, ("forget01", "forget05", "forget10")
            )
        if split not in config.study.splits or split in study.retain:
            continue
        log = read_eval_log(path)
        sets = tofu_eval_sets(tofu_root(study.data), split, max_questions=config.eval.max_questions)
        # The questions the evaluation will log: the question text stands in for the prompt.
        expected = EvalLog(
            f"the {split} evaluation (eval.max_questions={config.eval.max_questions})",
            {
                name: SetLog(
                    name,
                    tuple(str(i) for i in range(len(sets[name]))),
                    {"generated_text": [[r.question, "", r.answer] for r in sets[name]]},
                )
                for name in ("forget", "retain")
            },
        )
        for name in ("forget", "retain"):
            match_questions(log, expected, name)
        logs[split] = log
    return logs


def _row(
    split: str,
    method: str,
    step: int,
    epoch: float,
    evaluated: Evaluated,
    reference: Evaluated | None,
    config: RunConfig,
    out: Path,
    retain_logs: dict[str, EvalLog],
) -> dict[str, Any]:
    from forgetbench.eval.runner import relative_scores

    scores = dict(evaluated.scores)
    reference_log = reference.log if reference else retain_logs.get(split)
    scores.update(
        relative_scores(
            evaluated.log,
            scores,
            reference_log,
            reference.scores if reference else None,
            form=config.eval.truth_ratio_form,
        )
    )
    scores.setdefault("forget_quality", None)
    return {
        "split": split,
        "method": method,
        "step": step,
        "epoch": round(epoch, 4),
        **scores,
        "log": str(evaluated.folder.relative_to(out)),
    }


def _examples(split: str, method: str, step: int, log: EvalLog | None, n: int) -> list[dict]:
    if log is None or n == 0 or "forget" not in log.sets:
        return []
    texts = log.sets["forget"].fields.get("generated_text", [])[:n]
    return [
        {
            "split": split,
            "method": method,
            "step": step,
            "question": prompt,
            "ground_truth": truth,
            "generation": generation,
        }
        for prompt, generation, truth in texts
    ]


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


def _init_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    _quiet_transformers()


def _quiet_transformers() -> None:
    # Its per-file "Loading weights" bars, from every model load of every worker, would bury
    # the study's own progress bar.
    from transformers.utils import logging

    logging.disable_progress_bar()


def study_workers(config: RunConfig, model: str | None) -> int:
    """`study.workers`, or (0) one process per CPU core for the built-in study on CPU."""
    if config.study.workers:
        return config.study.workers
    import torch

    from forgetbench.eval.distributed import process_layout

    if model is not None or torch.cuda.is_available() or process_layout()[1] > 1:
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


@dataclass
class Trajectory:
    """One method on one split: its snapshots' evaluations, in step order."""

    snapshots: list[tuple[int, float, bool, Evaluated]]  # step, epoch, final, evaluation
    unlearn_seconds: float
    eval_seconds: float


def _eval_job(
    model_dir: Path, study: Study, config: RunConfig, split: str, folder: Path, full: bool
) -> tuple[Evaluated, float]:
    t = time.perf_counter()
    evaluated = evaluate_cached(model_dir, study, config, split=split, folder=folder, full=full)
    return evaluated, time.perf_counter() - t


def _method_job(study: Study, config: RunConfig, out: Path, split: str, name: str) -> Trajectory:
    """Unlearn with one method on one split, then evaluate every snapshot after step 0."""
    from forgetbench.data.tofu import load_tofu
    from forgetbench.eval.runner import tofu_root
    from forgetbench.methods.refusals import load_refusals
    from forgetbench.train.study import resolve_method, retain_split_for
    from forgetbench.train.unlearn import run_unlearning

    t = time.perf_counter()
    tofu = tofu_root(study.data)
    loop, options = study.unlearn_defaults(name)
    loop, method = resolve_method(config, name, loop, options)
    result = run_unlearning(
        out, model_dir=study.finetuned, forget=load_tofu(tofu, split),
        retain=load_tofu(tofu, retain_split_for(split)), method=method, config=loop,
        template=study.template, refusals=load_refusals(config.unlearn.refusals_file),
        split=split, max_length=study.max_length,
        snapshot_every=config.unlearn.snapshot_every, progress=False,
        trust_remote_code=config.model.trust_remote_code,
    )  # fmt: skip
    unlearn_seconds = time.perf_counter() - t
    t = time.perf_counter()
    total_steps = result.snapshots[-1][0]
    snapshots = []
    for step, path in result.snapshots:
        if step == 0:
            continue  # the finetuned model, evaluated with the references
        final = step == total_steps
        evaluated = evaluate_cached(
            path, study, config, split=split, folder=out / "logs" / split / name / f"step-{step}",
            full=final or config.study.trajectory_formats,
        )  # fmt: skip
        epoch = loop.epochs * step / total_steps if total_steps else 0.0
        snapshots.append((step, epoch, final, evaluated))
    return Trajectory(snapshots, unlearn_seconds, time.perf_counter() - t)


def run_study(
    config: RunConfig,
    *,
    out: Path,
    model: str | None = None,
    data: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    started = time.perf_counter()
    _quiet_transformers()
    workers = study_workers(config, model)
    pool = make_pool(workers)
    try:
        study, timings = prepare_study(
            config, out, model=model, data=data, progress=progress, pool=pool
        )
        retain_logs = load_retain_logs(config, study)
        rows, examples = _run_jobs(
            study, config, out, pool, timings, retain_logs=retain_logs, progress=progress
        )
    finally:
        pool.shutdown(cancel_futures=True)
    timings["total"] = time.perf_counter() - started
    results = {
        "forgetbench_version": __version__,
        "git_sha": _git_sha(),
        "seed": config.seed,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "benchmark": config.benchmark.name,
        "scale": config.scale if model is None else None,
        "model": str(model or study.finetuned),
        "workers": workers,
        "config": config.model_dump(),
        "metric_versions": {name: info.version for name, info in METRICS.items()},
        "timings": {k: round(v, 2) for k, v in timings.items()},
        "rows": rows,
        "examples": examples,
    }
    write_results(out, results)
    return results


def _run_jobs(
    study: Study,
    config: RunConfig,
    out: Path,
    pool: Any,
    timings: dict[str, float],
    *,
    retain_logs: dict[str, EvalLog],
    progress: bool,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every evaluation and method run of the study as pool jobs; rows in a fixed order
    (split, then retain / finetuned / base, then each method's steps) whatever finishes first."""
    from concurrent.futures import as_completed

    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    splits, methods = config.study.splits, config.study.methods
    jobs: list[tuple[tuple[str, str], str, Any, tuple]] = []  # key, label, function, args
    for split in splits:
        models = {"retain": study.retain.get(split), "finetuned": study.finetuned}
        models["base"] = study.base
        for role, model_dir in models.items():
            if model_dir is not None:
                folder = out / "logs" / split / role / "step-0"
                # The base model never saw the authors: it is a point on the forget-quality /
                # utility plane, and its formats and LUME scores would only cost time.
                args = (model_dir, study, config, split, folder, role != "base")
                jobs.append(((split, role), f"{split}: {role}", _eval_job, args))
        for name in methods:
            args = (study, config, out, split, name)
            jobs.append(((split, name), f"{split}: {name}", _method_job, args))
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    futures: dict[tuple[str, str], Future] = {}
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task(f"study ({pool.workers} workers)", total=len(jobs))
        inline = isinstance(pool, InlinePool)  # a job runs inside submit, one at a time
        labels: dict[Future, str] = {}
        for key, label, function, args in jobs:
            bar.update(task, description=label if inline else "submitting")
            futures[key] = pool.submit(function, *args)
            labels[futures[key]] = label
            bar.update(task, advance=1 if inline else 0)
        for job in as_completed(labels):
            job.result()  # the first failure stops the study with its own message
            if not inline:
                bar.update(task, advance=1, description=f"done {labels[job]}")
    references = {key: futures[key] for key, _, function, _ in jobs if function is _eval_job}
    trajectories = {key: futures[key] for key, _, function, _ in jobs if function is _method_job}

    rows: list[dict[str, Any]] = []
    examples: list[dict[str, Any]] = []
    for split in splits:
        evaluated = {}
        for role in ("retain", "finetuned", "base"):
            if (split, role) in references:
                evaluated[role], seconds = references[split, role].result()
                timings[f"eval_{split}_{role}"] = seconds
        retain_eval = evaluated.get("retain")
        for role, reference in evaluated.items():
            rows.append(_row(split, role, 0, 0.0, reference, retain_eval, config, out, retain_logs))
        examples += _examples(
            split, "finetuned", 0, evaluated["finetuned"].log, config.study.examples
        )
        for name in methods:
            trajectory = trajectories[split, name].result()
            timings[f"unlearn_{split}_{name}"] = trajectory.unlearn_seconds
            timings[f"eval_{split}_{name}"] = trajectory.eval_seconds
            for step, epoch, final, result in trajectory.snapshots:
                rows.append(
                    _row(split, name, step, epoch, result, retain_eval, config, out, retain_logs)
                )
                if final:
                    examples += _examples(split, name, step, result.log, config.study.examples)
    return rows, examples


def write_results(out: Path, results: dict[str, Any]) -> None:
    """results.json (everything) and results.csv (one row per model and step), atomically."""
    from forgetbench.results import Results

    # Written through the model `report` reads with, so a study never writes a file the report
    # would refuse; a ValidationError here is a bug in the study, not in anyone's file.
    results = Results.model_validate(results).dump()
    atomic_write_json(out / RESULTS_NAME, results)
    columns: list[str] = []
    for row in results["rows"]:
        columns += [k for k in row if k not in columns]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in results["rows"]:
        writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in columns})
    atomic_write_text(out / CSV_NAME, buffer.getvalue())
