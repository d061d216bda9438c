"""Unlearning requests one after another (`study.sequence`; MUSE's "sustainability"): nested forget
splits S1 in S2 in ... applied to the same model, request k forgetting the questions S_k adds to
S_(k-1) with the same method and budget, starting from request k-1's model. After each request
the model is evaluated on the union S_k against the retain model of the union (retain99 / 95 / 90
are exactly the unions' complements), with each request's own forget quality and ROUGE-L and how
much of the earlier requests' questions came back; beside it, the same method unlearning S_k in
one shot from the finetuned model (docs/transfer.md).

Rows go to results.json's `sequence` list, never to `rows`: the leaderboard and every other
section read one run per method and split."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from forgetbench.data.logs import EvalLog, SetLog
from forgetbench.data.tofu import load_tofu, tofu_eval_sets
from forgetbench.errors import DataError
from forgetbench.eval.runner import relative_scores, tofu_root
from forgetbench.study.evaluate import Evaluated
from forgetbench.study.inputs import Study
from forgetbench.study.jobs import eval_job, evaluate_model, run_pool, study_row
from forgetbench.study.unlearn import unlearn_split

# results.json row keys of the per-request numbers: sequence/request<j>/<what>.
REQUEST_PREFIX = "sequence/request"


def request_questions(tofu: Path, splits: list[str]) -> list[list[str]]:
    """Each request's questions: split k's minus split k-1's, refused where the splits do not
    nest or a request would forget nothing (at the tiny scale forget01, 05 and 10 are one
    author)."""
    requests: list[list[str]] = []
    seen: set[str] = set()
    previous = None
    for split in splits:
        questions = [r.question for r in load_tofu(tofu, split)]
        if not seen <= set(questions):
            raise DataError(
                f"study.sequence: {split} does not hold every question of {previous}, so the "
                "requests are not the differences of nested splits",
                "list nested splits, smallest first",
            )
        new = [q for q in questions if q not in seen]
        if not new:
            raise DataError(
                f"study.sequence: {split} adds no question to {previous} in this data (at the "
                "tiny scale forget01, forget05 and forget10 are the same author)",
                "use the instance splits (study.sequence=[forget01_instances, "
                "forget05_instances]) or a larger --scale",
            )
        requests.append(new)
        seen.update(new)
        previous = split
    return requests


@dataclass
class Step:
    """One request's unlearnt model and its evaluation on the union so far."""

    split: str
    steps: int
    epochs: float
    evaluated: Evaluated
    unlearn_seconds: float


def unlearn_step(
    study: Study,
    config: Any,
    out: Path,
    name: str,
    split: str,
    *,
    folder: Path,
    full: bool = False,
    run_split: str | None = None,
    eval_split: str | None = None,
    after: tuple[str, Path] | None = None,
) -> tuple[Step, Path]:
    """One request: method `name` unlearns `run_split` (default `split`; the cached stage's
    name) from the finetuned model, or from `after`'s model, and its final model is evaluated
    on `eval_split` (default `split`) into `folder`. Returns the request's Step and that model."""
    t = time.perf_counter()
    result, loop = unlearn_split(study, config, out, run_split or split, name, after=after)
    seconds = time.perf_counter() - t
    model = result.snapshots[-1][1]
    evaluated = evaluate_model(
        model, study, config, split=eval_split or split, folder=folder, full=full
    )
    return Step(split, result.snapshots[-1][0], float(loop.epochs), evaluated, seconds), model


def sequence_job(study: Study, config: Any, out: Path, name: str) -> list[Step]:
    """Every request of `study.sequence` with method `name`, each from the previous request's
    model (one pool job: the requests cannot run side by side)."""
    done: list[Step] = []
    after: tuple[str, Path] | None = None
    for k, split in enumerate(config.study.sequence, 1):
        folder = out / "sequence" / name / f"request-{k}"
        step, model = unlearn_step(study, config, out, name, split, folder=folder, after=after)
        done.append(step)
        after = (split, model)
    return done


def one_shot_job(study: Study, config: Any, out: Path, name: str, split: str) -> Step:
    """Method `name` unlearning `split` in one request from the finetuned model: the study's own
    run on that split (the same cached stage), evaluated as the sequence's requests are."""
    folder = out / "sequence" / name / f"one-shot-{split}"
    return unlearn_step(study, config, out, name, split, folder=folder)[0]


def _subset(log: EvalLog, positions: list[int]) -> EvalLog:
    """`log` with its forget set cut to the questions at `positions` (the other sets whole)."""
    forget = log.sets["forget"]
    cut = SetLog(
        forget.name,
        tuple(forget.keys[i] for i in positions),
        {k: [v[i] for i in positions] for k, v in forget.fields.items()},
    )
    return replace(log, sets={**log.sets, "forget": cut})


def _rouge(log: EvalLog | None, positions: list[int]) -> float | None:
    if log is None or not positions:
        return None
    return float(np.mean(log.sets["forget"].rougeL_recall[positions]))


def request_scores(
    study: Study,
    config: Any,
    k: int,
    step: Step,
    reference: Evaluated,
    previous: Step | None,
    requests: list[list[str]],
) -> dict[str, Any]:
    """Request k's own numbers: forget quality (against the union's retain model, on each
    request's questions alone) and forget ROUGE-L of every request so far, and the earlier
    requests' relearning: their ROUGE-L now minus right after request k-1."""
    records = tofu_eval_sets(
        tofu_root(study.data), step.split, max_questions=config.eval.max_questions
    )["forget"]
    order = [r.question for r in records]
    log, ref = step.evaluated.log, reference.log
    scores: dict[str, Any] = {}
    for j, questions in enumerate(requests[:k], 1):
        wanted = set(questions)
        positions = [i for i, q in enumerate(order) if q in wanted]
        quality = None
        if log is not None and ref is not None and positions:
            quality = relative_scores(
                log, {}, _subset(ref, positions), None, form=config.eval.truth_ratio_form
            ).get("forget_quality")
        scores[f"{REQUEST_PREFIX}{j}/forget_quality"] = quality
        scores[f"{REQUEST_PREFIX}{j}/rougeL"] = _rouge(log, positions)
    if previous is not None:
        earlier = {q for questions in requests[: k - 1] for q in questions}
        now = [i for i, q in enumerate(order) if q in earlier]
        before_order = [
            r.question
            for r in tofu_eval_sets(
                tofu_root(study.data), previous.split, max_questions=config.eval.max_questions
            )["forget"]
        ]
        before = [i for i, q in enumerate(before_order) if q in earlier]
        a, b = _rouge(log, now), _rouge(previous.evaluated.log, before)
        scores["sequence/earlier/rougeL"] = a
        scores["sequence/earlier/relearned_rougeL"] = None if a is None or b is None else a - b
    return scores


def sequence_rows(
    study: Study,
    config: Any,
    out: Path,
    pool: Any,
    timings: dict[str, float],
    *,
    retain_logs: dict[str, EvalLog],
    progress: bool,
) -> list[dict[str, Any]]:
    """The `sequence` rows of results.json: per union split the retain and finetuned models
    (mode "reference"), then per method each request (mode "sequential") and the one-shot run
    on the same union (mode "one-shot"; request 1's is the sequence's own first run)."""
    splits = list(config.study.sequence)
    requests = request_questions(tofu_root(study.data), splits)
    methods = config.study.methods
    jobs: list[Any] = []
    for split in splits:
        for role, model_dir in (("retain", study.retain[split]), ("finetuned", study.finetuned)):
            folder = out / "sequence" / role / split
            args = (model_dir, study, config, split, folder, False)
            jobs.append((("ref", split, role), f"sequence: {role} on {split}", eval_job, args))
    for name in methods:
        args = (study, config, out, name)
        jobs.append((("seq", name), f"sequence: {name}", sequence_job, args))
        for split in splits[1:]:
            args = (study, config, out, name, split)
            label = f"sequence: {name} one-shot on {split}"
            jobs.append((("one", name, split), label, one_shot_job, args))
    futures = run_pool(pool, jobs, title="sequence", progress=progress)
    references = {
        (split, role): futures["ref", split, role].result()[0]
        for split in splits
        for role in ("retain", "finetuned")
    }

    def row(step: Step, method: str, mode: str, k: int, extra: dict[str, Any]) -> dict[str, Any]:
        retain = references[step.split, "retain"]
        base = study_row(step.split, method, step.steps, step.epochs, step.evaluated, retain,
                    config, out, retain_logs)  # fmt: skip
        log = base.pop("log")
        return {**base, "mode": mode, "request": k, **extra, "log": log}

    rows: list[dict[str, Any]] = []
    for k, split in enumerate(splits, 1):
        for role in ("retain", "finetuned"):
            step = Step(split, 0, 0.0, references[split, role], 0.0)
            # The references' own per-request numbers: what each request's questions start at
            # (finetuned) and where forgetting aims (retain).
            extra = request_scores(
                study, config, k, step, references[split, "retain"], None, requests
            )
            rows.append(row(step, role, "reference", k, extra))
    for name in methods:
        steps: list[Step] = futures["seq", name].result()
        for k, step in enumerate(steps, 1):
            timings[f"sequence_{name}_request{k}"] = step.unlearn_seconds
            previous = steps[k - 2] if k > 1 else None
            extra = request_scores(
                study, config, k, step, references[step.split, "retain"], previous, requests
            )
            rows.append(row(step, name, "sequential", k, extra))
        for k, split in enumerate(splits, 1):
            shot = steps[0] if k == 1 else futures["one", name, split].result()
            rows.append(row(shot, name, "one-shot", k, {}))
    return rows
