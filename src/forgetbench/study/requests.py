"""A document benchmark's series of forget requests (`CorpusBenchmark.requests`: MUSE News'
scalability and sustainability), run beside its study with every method of it.

A `one-shot` series unlearns each request's forget set from the finetuned model (one job per
method and request); a `sequential` series unlearns request k from request k-1's model (one job
per method: its requests cannot run side by side). After each request the unlearnt model gets
the benchmark's whole evaluation, the same as the study's models, so a request's row carries
every score the study's rows do (MUSE judges utility preservation on it; VerbMem, KnowMem and
PrivLeak per request come with it).

Requests with the same documents from the same starting model are one unlearning run: a request
is unlearnt under the name of the first forget set with its documents (`shared_runs`), so the
stage cache trains it once (at the miniature, sust's fold 1 is scal's forget_1 and scal's
forget_4 is the study's whole forget set).

Rows go to results.json's `sequence` list (mode `reference`, `one-shot` or `sequential`, and
`request` k), as the TOFU study's sequence of requests does: `rows` keep one run per method."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from forgetbench.benchmarks.corpus import CorpusBenchmark, Requests
from forgetbench.config import RunConfig
from forgetbench.study.evaluate import Evaluated
from forgetbench.study.inputs import Study
from forgetbench.study.jobs import Job
from forgetbench.study.sequence import Step, unlearn_step

# The row of one model: (split, method, step, epoch, evaluation) -> a results.json row.
RowMaker = Callable[[str, str, int, float, Evaluated], dict[str, Any]]


def present_series(bench: CorpusBenchmark, data: Path, config: RunConfig) -> list[Requests]:
    """The series this study runs: the benchmark's whose files the folder has, unless
    `study.requests` is off."""
    if not config.study.requests:
        return []
    return [series for series in bench.requests if series.present(data)]


def shared_runs(bench: CorpusBenchmark, data: Path, series: list[Requests]) -> dict[str, str]:
    """Each request split started from the finetuned model -> the first forget set with the
    same documents (the study's own forget sets first, then the series' requests in order)."""
    first: dict[tuple[str, ...], str] = {}
    for split, texts in bench.sets(data).items():
        first.setdefault(tuple(texts(data)), split)
    names: dict[str, str] = {}
    for one in series:
        for k in range(1, one.count + 1):
            if one.mode == "sequential" and k > 1:
                continue  # starts from request k-1's model: no other run starts there
            split = one.split(k)
            names[split] = first.setdefault(tuple(one.texts(data, k)), split)
    return names


def request_job(
    study: Study,
    config: RunConfig,
    out: Path,
    name: str,
    series: Requests,
    requests: list[int],
    runs: dict[str, str],
    eval_split: str,
) -> list[Step]:
    """Method `name` on `requests` of `series` (one request for a one-shot job, every request in
    order for a sequential one), each unlearnt model evaluated as the study's models are."""
    done: list[Step] = []
    after: tuple[str, Path] | None = None
    for k in requests:
        split = series.split(k)
        # A run from the finetuned model goes under the first forget set with its documents.
        label = runs.get(split, split) if after is None else split
        step, model = unlearn_step(
            study, config, out, name, split, run_split=label, eval_split=eval_split,
            folder=out / "requests" / series.name / name / f"request-{k}", full=True,
            after=after,
        )  # fmt: skip
        done.append(step)
        if series.mode == "sequential":
            after = (label, model)
    return done


def request_jobs(
    study: Study,
    config: RunConfig,
    out: Path,
    series: list[Requests],
    runs: dict[str, str],
    eval_split: str,
) -> list[Job]:
    """The pool jobs of every series and method, keyed ("requests", series, method, k)."""
    jobs: list[Job] = []
    for one in series:
        for name in config.study.methods:
            if one.mode == "sequential":
                groups = [list(range(1, one.count + 1))]
            else:
                groups = [[k] for k in range(1, one.count + 1)]
            for requests in groups:
                key = ("requests", one.name, name, requests[0])
                label = f"{one.name}: {name}" + (
                    "" if len(groups) == 1 else f" request {requests[0]}"
                )
                args = (study, config, out, name, one, requests, runs, eval_split)
                jobs.append((key, label, request_job, args))
    return jobs


def request_rows(
    series: list[Requests],
    methods: list[str],
    futures: dict[Any, Any],
    references: list[dict[str, Any]],
    make_row: RowMaker,
    timings: dict[str, float],
) -> list[dict[str, Any]]:
    """results.json's `sequence` rows: per series and request the study's reference rows (the
    finetuned and retain models, mode `reference`: every request is scored on the same test sets,
    so theirs are the study's own), then each method's unlearnt model (mode `one-shot` or
    `sequential`)."""
    rows: list[dict[str, Any]] = []
    for one in series:
        for k in range(1, one.count + 1):
            rows += [_tagged({**row, "split": one.split(k)}, "reference", k) for row in references]
        for name in methods:
            steps: list[Step] = []
            for k in range(1, one.count + 1):
                found = futures.get(("requests", one.name, name, k))
                steps += found.result() if found is not None else []
            for k, step in enumerate(steps, 1):
                timings[f"{one.name}_{name}_request{k}"] = step.unlearn_seconds
                row = make_row(step.split, name, step.steps, step.epochs, step.evaluated)
                rows.append(_tagged(row, one.mode, k))
    return rows


def _tagged(row: dict[str, Any], mode: str, k: int) -> dict[str, Any]:
    """The row with its mode and request before its log (the sequence rows' order of fields)."""
    log = row.pop("log")
    return {**row, "mode": mode, "request": k, "log": log}
