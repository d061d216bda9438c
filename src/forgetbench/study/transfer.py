"""Unlearning in another format (`study.unlearn_formats`): the forget set, and the retain set of a
method that reads one, presented as the training texts of a data-transformation format, so the
study can ask whether forgetting learnt in one format shows in the others (the cross-format
matrix; docs/transfer.md).

A format's training text is exactly the text its evaluation scores (`FormatsTask.requests`, the
one owner of each format's layout): the cloze span after the question and the answer up to it,
the right option's letter after a multiple-choice prompt, the answer after an analogy or a
comprehension passage. Multiple choice keeps one prompt per fact (its 4-option one), so every
format trains on one text per fact of the split, like QA: the same number of steps per epoch.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from forgetbench.study.evaluate import Evaluated
from forgetbench.study.jobs import evaluate_model, method_logs, run_pool, study_row
from forgetbench.study.unlearn import unlearn_split


def format_job(
    study: Any, config: Any, out: Path, split: str, name: str, fmt: str
) -> tuple[Evaluated, int, float, float]:
    """Method `name` unlearning `split` presented in format `fmt`, its final model evaluated in
    every format: (evaluation, optimizer steps, epochs, unlearning seconds)."""
    t = time.perf_counter()
    result, loop = unlearn_split(study, config, out, split, name, fmt=fmt)
    seconds = time.perf_counter() - t
    steps, model = result.snapshots[-1]
    folder = method_logs(out, split, name, None) / f"unlearn-{fmt}" / f"step-{steps}"
    evaluated = evaluate_model(model, study, config, split=split, folder=folder, full=True)
    return evaluated, steps, float(loop.epochs), seconds


def cross_format_rows(
    study: Any,
    config: Any,
    out: Path,
    pool: Any,
    timings: dict[str, float],
    rows: list[dict[str, Any]],
    *,
    retain_logs: dict[str, Any],
    progress: bool,
) -> list[dict[str, Any]]:
    """The `cross_format` rows of results.json: per split and method, the final model of each
    format in `study.unlearn_formats`, keyed by `unlearn_format` (qa's is the study's own final
    row, of its first seed)."""
    formats = list(config.study.unlearn_formats)
    first = (list(config.study.seeds) or [None])[0]
    jobs: list[Any] = []
    for split in config.study.splits:
        for name in config.study.methods:
            for fmt in formats:
                if fmt != "qa":
                    args = (study, config, out, split, name, fmt)
                    label = f"{split}: {name} in {fmt}"
                    jobs.append(((split, name, fmt), label, format_job, args))
    futures = run_pool(pool, jobs, title="cross-format", progress=progress)
    out_rows: list[dict[str, Any]] = []
    for split in config.study.splits:
        # The retain model's evaluation, read back from the study's cache: the reference.
        retain = None
        if split in study.retain:
            folder = out / "logs" / split / "retain" / "step-0"
            retain = evaluate_model(
                study.retain[split], study, config, split=split, folder=folder, full=True
            )
        for name in config.study.methods:
            for fmt in formats:
                if fmt == "qa":
                    own = [
                        r for r in rows
                        if r["split"] == split and r["method"] == name and r.get("seed") == first
                    ]  # fmt: skip
                    final = max(own, key=lambda r: r["step"])
                    row = {k: v for k, v in final.items() if k != "log"}
                    out_rows.append({**row, "unlearn_format": "qa", "log": final["log"]})
                    continue
                evaluated, steps, epochs, seconds = futures[split, name, fmt].result()
                timings[f"unlearn_{split}_{name}_{fmt}"] = seconds
                row = study_row(
                    split, name, steps, epochs, evaluated, retain, config, out, retain_logs
                )
                log = row.pop("log")
                out_rows.append({**row, "unlearn_format": fmt, "log": log})
    return out_rows
