"""The steps every kind of study is made of: unlearn one method on one split (the one place a study
calls the engine), evaluate a model, turn an evaluation into a results row, and run jobs in a
pool with a progress bar. `run`, `sweep`, `sequence`, `transfer` and the meta-evaluation build
on them, so none of those imports another to reach them."""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from forgetbench.config import RunConfig
from forgetbench.data.logs import EvalLog
from forgetbench.eval.runner import EXTRA_NAME, relative_scores
from forgetbench.eval.summary import UTILITY_SETS, held_out_scores, set_scores
from forgetbench.eval.tasks.mia import relative_membership
from forgetbench.io import read_json
from forgetbench.methods.base import trains
from forgetbench.metrics.degeneracy import degenerate_items
from forgetbench.metrics.tofu import model_utility
from forgetbench.study.evaluate import Evaluated, evaluate_cached, log_folder, summary_scores
from forgetbench.study.inputs import Study
from forgetbench.study.pool import InlinePool
from forgetbench.study.unlearn import resolved_run, run_settings, unlearn_split


@dataclass
class Shadows:
    """A split's shadow models for LiRA / RMIA: each one's MIA log and membership mask over the
    split's candidates (forget then holdout items, the MIA log's order)."""

    items: list[list[dict[str, Any]]]
    members: list[list[bool]]


def mia_items(evaluated: Evaluated | None) -> list[dict[str, Any]] | None:
    """The per-item MIA log of an evaluation (`extra_log.json`), None when it has none."""
    if evaluated is None or not (evaluated.folder / EXTRA_NAME).is_file():
        return None
    items = read_json(evaluated.folder / EXTRA_NAME, what="evaluation log").get("mia")
    return items if isinstance(items, list) and items else None


def study_row(
    split: str,
    method: str,
    step: int,
    epoch: float,
    evaluated: Evaluated,
    reference: Evaluated | None,
    config: RunConfig,
    out: Path,
    retain_logs: dict[str, EvalLog],
    shadows: Shadows | None = None,
    seed: int | None = None,
) -> dict[str, Any]:

    scores = dict(evaluated.scores)
    items = mia_items(evaluated)
    if items is not None:
        # Row-time attacks: they need the retain model's and the shadows' logs beside this one.
        scores.update(
            relative_membership(
                items,
                reference_items=mia_items(reference),
                shadow_items=shadows.items if shadows else (),
                shadow_members=shadows.members if shadows else (),
                gamma=config.eval.mia_rmia_gamma,
            )
        )
    reference_log = reference.log if reference else retain_logs.get(split)
    # A retain model given as its log (study.retain_logs) brings its scores in the summary.json
    # `forgetbench eval` wrote beside it, when it did: PrivLeak needs its MIA AUC.
    reference_scores = reference.scores if reference else None
    if reference is None and reference_log is not None:
        reference_scores = summary_scores(reference_log.source)
    scores.update(
        relative_scores(
            evaluated.log,
            scores,
            reference_log,
            reference_scores,
            form=config.eval.truth_ratio_form,
        )
    )
    scores.setdefault("forget_quality", None)
    scores.update(
        leaderboard_scores(evaluated.log, reference_log, form=config.eval.truth_ratio_form)
    )
    return model_row(split, method, step, epoch, scores, evaluated, out, seed=seed)


def leaderboard_scores(
    log: EvalLog | None, reference_log: EvalLog | None, *, form: Any
) -> dict[str, Any]:
    """What the leaderboard reads beside a row's scores (docs/report.md): forget quality on each
    half of the forget questions (the step is chosen on one, reported on the other) and the share
    of degenerate forget-set generations (over-unlearning). Computed from the logs at row time,
    so a cached evaluation gets them too."""
    found: dict[str, Any] = {}
    if log is None or "forget" not in log.sets:
        return found
    texts = log.sets["forget"].fields.get("generated_text")
    if texts:
        found["forget/degenerate"] = float(np.mean(degenerate_items([g for _, g, _ in texts])))
    if reference_log is not None and "forget" in reference_log.sets:
        found.update(held_out_scores(reference_log, log, form=form))
    return found


def model_row(
    split: str,
    method: str,
    step: int,
    epoch: float,
    scores: dict[str, Any],
    evaluated: Evaluated,
    out: Path,
    *,
    seed: int | None = None,
) -> dict[str, Any]:
    """A results.json row, every study's: which model at which step, its scores, its log."""
    return {
        "split": split,
        "method": method,
        **({} if seed is None else {"seed": seed}),
        "step": step,
        "epoch": round(epoch, 4),
        **scores,
        "log": str(evaluated.folder.relative_to(out)),
    }


def logged_retain_row(split: str, log: EvalLog, config: RunConfig, out: Path) -> dict[str, Any]:
    """The retain model's row when it comes as a log (`study.retain_logs`), not a model of ours:
    every score of the `summary.json` that `forgetbench eval` wrote beside the log (membership
    inference and memorisation included), else the TOFU sub-scores and model utility computed
    from the log's sets. Its forget quality is its KS test against itself: 1 by definition."""
    found = summary_scores(log.source)
    scores: dict[str, Any] = {}
    if isinstance(found, dict):
        scores = {k: v for k, v in found.items() if k != "forget_quality"}
    if not scores:
        form = config.eval.truth_ratio_form
        for set_log in log.sets.values():
            scores.update(set_scores(set_log, form=form))
        utility = {k: v for k, v in scores.items() if k.split("/")[0] in UTILITY_SETS}
        if len(utility) == 3 * len(UTILITY_SETS):
            scores["model_utility"] = model_utility(utility)
    scores.update(relative_scores(log, scores, log, scores, form=config.eval.truth_ratio_form))
    scores.setdefault("forget_quality", None)
    return {
        "split": split,
        "method": "retain",
        "step": 0,
        "epoch": 0.0,
        **scores,
        "log": os.path.relpath(log_folder(log.source), out),  # a folder, as every row's log
    }


def evaluate_model(
    model_dir: Path,
    study: Study,
    config: RunConfig,
    *,
    split: str,
    folder: Path,
    full: bool,
    instruction: str | None = None,
) -> Evaluated:
    """Every metric, or (`full=False`, trajectory snapshots) all but the formats and LUME tasks,
    which generate many more answers; `instruction` before every prompt (an instructed method's)."""
    eval_config = config.eval
    if not full:
        eval_config = eval_config.model_copy(update={"formats": False, "lume": False})
    return evaluate_cached(
        model_dir, study, split=split, eval_config=eval_config, folder=folder, model=config.model,
        instruction=instruction,
    )  # fmt: skip


def eval_job(
    model_dir: Path, study: Study, config: RunConfig, split: str, folder: Path, full: bool
) -> tuple[Evaluated, float]:
    t = time.perf_counter()
    evaluated = evaluate_model(model_dir, study, config, split=split, folder=folder, full=full)
    return evaluated, time.perf_counter() - t


def method_logs(out: Path, split: str, name: str, seed: int | None) -> Path:
    """Where one method run's evaluations go: a folder per seed when the study has seeds."""
    folder = out / "logs" / split / name
    return folder if seed is None else folder / f"seed-{seed}"


@dataclass
class Trajectory:
    """One method on one split: its snapshots' evaluations, in step order."""

    snapshots: list[tuple[int, float, bool, Evaluated]]  # step, epoch, final, evaluation
    unlearn_seconds: float
    eval_seconds: float
    final_model: Path  # the last snapshot's model folder, which the attacks start from
    unlearn_peak_gpu_mib: float | None = None
    # What the run trained with, as its rows record it (study.unlearn.run_settings).
    settings: dict[str, Any] = field(default_factory=dict)
    cached: bool = False  # the unlearning run was a finished one, reused from its folder


def method_job(
    study: Study,
    config: RunConfig,
    out: Path,
    split: str,
    name: str,
    seed: int | None = None,
    logs: Path | None = None,
) -> Trajectory:
    """Unlearn with one method on one split (at `seed`, with its `study.method_settings`), then
    evaluate every snapshot after step 0 into `logs` (default `method_logs`)."""
    logs = logs or method_logs(out, split, name, seed)
    t = time.perf_counter()
    result, loop = unlearn_split(study, config, out, split, name, seed)
    unlearn_seconds = time.perf_counter() - t
    t = time.perf_counter()
    total_steps = result.snapshots[-1][0]
    # An instructed method (icu) trains nothing: its one row is the start model at step 0, scored
    # with its instruction before every prompt ("{subject}" left for the task to fill).
    method = resolved_run(study, config, name, seed)[2]
    instruction = None if trains(method) else method.instruction("{subject}")  # type: ignore[attr-defined]
    snapshots = []
    for step, path in result.snapshots:
        if step == 0 and instruction is None:
            continue  # the finetuned model, evaluated with the references
        final = step == total_steps
        evaluated = evaluate_model(
            path, study, config, split=split, folder=logs / f"step-{step}",
            full=final or config.study.trajectory_formats, instruction=instruction,
        )  # fmt: skip
        epoch = loop.epochs * step / total_steps if total_steps else 0.0
        snapshots.append((step, epoch, final, evaluated))
    final_model = result.snapshots[-1][1]
    return Trajectory(
        snapshots, unlearn_seconds, time.perf_counter() - t, final_model, result.peak_gpu_mib,
        settings=run_settings(study, config, name, seed), cached=result.cached,
    )  # fmt: skip


Job = tuple[tuple, str, Any, tuple]  # key (split, role or method[, seed]), label, function, args


def run_pool(pool: Any, jobs: list[Job], *, title: str, progress: bool) -> dict[Any, Future]:
    """Every job submitted to `pool` with a progress bar; returns its futures by key once all
    finished (the first failure stops the study with its own message)."""
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    futures: dict[Any, Future] = {}
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task(f"{title} ({pool.workers} workers)", total=len(jobs))
        inline = isinstance(pool, InlinePool)  # a job runs inside submit, one at a time
        labels: dict[Future, str] = {}
        for key, label, function, args in jobs:
            bar.update(task, description=label if inline else "submitting")
            futures[key] = pool.submit(function, *args)
            labels[futures[key]] = label
            bar.update(task, advance=1 if inline else 0)
        for job in as_completed(labels):
            job.result()
            if not inline:
                bar.update(task, advance=1, description=f"done {labels[job]}")
    return futures
