"""The texts that unlearn a split in another of the miniature's formats (`study.unlearn_formats`):
which format file trains each, and the check that a study can use them. Apart from `transfer`,
which evaluates the cross-format study, because unlearning itself (`unlearn.unlearn_split`) reads
them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forgetbench.benchmarks.mini.read import load_format
from forgetbench.errors import ConfigError, DataError
from forgetbench.eval.requests import Generate
from forgetbench.eval.tasks.formats import FormatsTask
from forgetbench.io import read_json_records
from forgetbench.methods.base import build_method
from forgetbench.records import PromptRecord
from forgetbench.train.items import ALTERNATE_FIELDS

# study.unlearn_formats name -> the format file whose texts train it (qa trains on TOFU's split).
FORMAT_FILES = {
    "cloze": "cloze",
    "mcqa": "mcqa",
    "analogy": "analogy_qa",
    "comprehension": "comprehension_qa",
}


MC_OPTIONS = 4  # the multiple-choice prompt kept per fact


def check_formats(formats: list[str], data: Path, methods: list[str]) -> None:
    """Refuse a format the data has no files for (once the study's data is there) and a method
    that cannot train on format texts (`refuse_format_methods`, which the command runs first)."""
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
    refuse_format_methods(formats, methods)


def refuse_format_methods(formats: list[str], methods: list[str]) -> None:
    """A method that cannot train on format texts (one that reads TOFU's perturbed answers as
    alternates) refused for a format other than qa; from the config alone, so before any work."""
    others = [f for f in formats if f != "qa"]
    for name in methods if others else ():
        if build_method(name, {}).required_inputs() & ALTERNATE_FIELDS:
            raise ConfigError(
                f"method {name} trains toward TOFU's perturbed answers, which the other formats "
                f"do not have, so it cannot unlearn in {', '.join(others)}",
                f"drop {name} from study.methods or set study.unlearn_formats=[qa]",
            )


def split_authors(tofu: Path, split: str) -> set[str]:
    """The authors of a forget split (the miniature's rows name theirs)."""

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
