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

from forgetbench.errors import ConfigError, DataError
from forgetbench.records import PromptRecord
from forgetbench.study.evaluate import Evaluated

# study.unlearn_formats name -> the format file whose texts train it (qa trains on TOFU's split).
FORMAT_FILES = {
    "cloze": "cloze",
    "mcqa": "mcqa",
    "analogy": "analogy_qa",
    "comprehension": "comprehension_qa",
}
MC_OPTIONS = 4  # the multiple-choice prompt kept per fact


def check_formats(formats: list[str], data: Path, methods: list[str]) -> None:
    """Refuse, before any work, a format the data has no files for and a method that cannot
    train on format texts (one that reads TOFU's perturbed answers as alternates)."""
    from forgetbench.methods.base import build_method
    from forgetbench.train.unlearn import ALTERNATE_FIELDS

    others = [f for f in formats if f != "qa"]
    if not others:
        return
    missing = [
        f"formats/{FORMAT_FILES[f]}_{side}.jsonl"
        for f in others
        for side in ("forget", "retain")
        if not (data / "formats" / f"{FORMAT_FILES[f]}_{side}.jsonl").is_file()
    ]
    if missing:
        raise ConfigError(
            f"study.unlearn_formats={formats} needs {missing[0]} in {data} (the miniature's "
            "format files)",
            "run the built-in miniature, or set study.unlearn_formats=[qa]",
        )
    for name in methods:
        if build_method(name, {}).required_inputs() & ALTERNATE_FIELDS:
            raise ConfigError(
                f"method {name} trains toward TOFU's perturbed answers, which the other formats "
                f"do not have, so it cannot unlearn in {', '.join(others)}",
                f"drop {name} from study.methods or set study.unlearn_formats=[qa]",
            )


def split_authors(tofu: Path, split: str) -> set[str]:
    """The authors of a forget split (the miniature's rows name theirs)."""
    from forgetbench.io import read_json_records

    rows = read_json_records(tofu / f"{split}.json")
    authors = {row.get("author") for row in rows}
    if None in authors:
        raise DataError(
            f"{tofu / f'{split}.json'} has rows without an 'author' field, so its facts cannot "
            "be found in the format files",
            "use the miniature's data (forgetbench data generate)",
        )
    return authors  # type: ignore[return-value]


def format_texts(
    data: Path,
    fmt: str,
    side: str,
    template: Any,
    tokenizer: Any,
    *,
    authors: set[str] | None = None,
) -> list[PromptRecord]:
    """The training texts of format `fmt` ("cloze", "mcqa", ...) for one side (forget or retain)
    of the format files, in file order; `authors` keeps only those authors' facts."""
    from forgetbench.benchmarks.mini.read import load_format
    from forgetbench.eval.requests import Generate
    from forgetbench.eval.tasks.formats import FormatsTask
    from forgetbench.io import read_json_records

    name = FORMAT_FILES[fmt]
    records = load_format(data, name, side)
    rows = read_json_records(data / "formats" / f"{name}_{side}.jsonl")
    task = FormatsTask({}, template, tokenizer, max_new_tokens=1)
    texts = []
    for record, row in zip(records, rows, strict=True):
        if authors is not None and row.get("author") not in authors:
            continue
        if fmt == "mcqa" and len(record.options) != MC_OPTIONS:  # type: ignore[union-attr]
            continue
        (request,) = task.requests(f"{name}/{side}", record)
        if isinstance(request, Generate):
            texts.append(PromptRecord(request.prompt, template.answer(record.answer)))  # type: ignore[union-attr]
        else:
            # Cloze scores one answer (the span); multiple choice one per letter: the right one.
            label = getattr(record, "label", 0)
            texts.append(PromptRecord(request.prompt, request.answers[label]))
    if not texts:
        where = f" for {len(authors)} author(s)" if authors is not None else ""
        raise DataError(f"formats/{name}_{side}.jsonl has no {fmt} texts{where}")
    return texts


def format_job(
    study: Any, config: Any, out: Path, split: str, name: str, fmt: str
) -> tuple[Evaluated, int, float, float]:
    """Method `name` unlearning `split` presented in format `fmt`, its final model evaluated in
    every format: (evaluation, optimizer steps, epochs, unlearning seconds)."""
    from forgetbench.study.run import _evaluate, method_logs, unlearn_split

    t = time.perf_counter()
    result, loop = unlearn_split(study, config, out, split, name, fmt=fmt)
    seconds = time.perf_counter() - t
    steps, model = result.snapshots[-1]
    folder = method_logs(out, split, name, None) / f"unlearn-{fmt}" / f"step-{steps}"
    evaluated = _evaluate(model, study, config, split=split, folder=folder, full=True)
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
    from forgetbench.study.run import _evaluate, _row, _run_pool

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
    futures = _run_pool(pool, jobs, title="cross-format", progress=progress)
    out_rows: list[dict[str, Any]] = []
    for split in config.study.splits:
        # The retain model's evaluation, read back from the study's cache: the reference.
        retain = None
        if split in study.retain:
            folder = out / "logs" / split / "retain" / "step-0"
            retain = _evaluate(
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
                row = _row(split, name, steps, epochs, evaluated, retain, config, out, retain_logs)
                log = row.pop("log")
                out_rows.append({**row, "unlearn_format": fmt, "log": log})
    return out_rows
