"""MUSE's six criteria and WMDP's accuracy against utility, written out: the report's two sections
(with their figures, `report/corpus_plots.py`'s) and the terminal's two tables. What each
criterion decides is `forgetbench.criteria`'s; here it is only written out (every string from
results.json is escaped by the template, and shown literally in the figures)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from forgetbench.criteria import (
    MUSE_CRITERIA,
    PRIVLEAK_TOLERANCE,
    WMDP_CHANCE,
    muse_criteria,
    muse_met,
    wmdp_accuracy,
)
from forgetbench.overunlearning import OVER_PRIVLEAK, OVER_ROUGE_RATIO
from forgetbench.report.console import _console
from forgetbench.report.corpus_plots import WMDP_TITLES, muse_figures, wmdp_figures
from forgetbench.report.tables import format_cell, format_privleak
from forgetbench.rows import UTILITY_RATIO, Row

MARKS = {True: "yes", False: "no", None: "—"}
MUSE_HEAD = ["model", "step", "VerbMem forget", "KnowMem forget", "PrivLeak", "KnowMem retain",
             "over-unlearning"]  # fmt: skip
_MUSE_CRITERIA_TITLES = [title for _, title in MUSE_CRITERIA]


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def muse_tables(rows: Sequence[Row], sequence: Sequence[Row] = ()) -> list[dict[str, Any]]:
    """Per split: the numbers table and the criteria table (one row per model, yes/no/— per
    criterion), with C5/C6's per-request values where the sequence study ran."""
    sections = []
    for section in muse_criteria(rows, sequence):
        numbers, marks = [], []
        for model in section["models"]:
            numbers.append([
                model["model"], model["step"], _number(model["verbmem_f"]),
                _number(model["knowmem_f"]), format_privleak(model["privleak"]),
                _number(model["knowmem_r"]),
                "; ".join(model["over_unlearning"].values()) or ("—" if model["model"] in
                                                        ("finetuned", "retain") else "no"),
            ])  # fmt: skip
            met = muse_met(section, model)
            marks.append([model["model"], *(_mark(section, key, met[key], model)
                                            for key, _ in MUSE_CRITERIA)])  # fmt: skip
        requests = [
            [criterion, name, *map(_number, found["values"]), MARKS[found["met"]]]
            for criterion in ("scalability", "sustainability")
            for name, found in section[criterion].items()
        ]
        if requests:  # first the value each request is judged against: the finetuned model's
            requests.insert(0, ["reference", "finetuned", *map(_number, section["finetuned"]), ""])
        resolution = section["privleak_resolution"]
        sections.append({
            "split": section["split"],
            "privleak_resolution": None if resolution is None else f"{resolution:.1f}",
            "privleak_undecided": section["privleak_undecided"],
            "head": MUSE_HEAD,
            "numbers": numbers,
            "criteria_head": ["model", *_MUSE_CRITERIA_TITLES],
            "criteria": marks,
            "requests_head": ["criterion", "model",
                              *(f"request {k}" for k in section["requests"]), "kept"],
            "requests": requests,
            "verbmem_requests": [[series, name, *map(_number, values)]
                                 for (series, name), values in section["verbmem"].items()],
        })  # fmt: skip
    return sections


def _mark(section: dict[str, Any], key: str, met: bool | None, model: dict[str, Any]) -> str:
    """A criterion's cell: yes/no/—, "undecided" for a PrivLeak coarser than MUSE's band, and
    "yes, over-unlearnt" for a VerbMem that meets "no verbatim memorisation" by falling far below
    the retain model's (the text destroyed, not forgotten)."""
    if key == "no_privleak" and section["privleak_undecided"] and model["privleak"] is not None:
        return "undecided"
    if key == "no_verbmem" and met and "verbmem" in model["over_unlearning"]:
        return "yes, over-unlearnt"
    return MARKS[met]


def wmdp_tables(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per split: one row per model with its accuracy per subset, MMLU, and `all` minus chance."""
    sections = []
    for section in wmdp_accuracy(rows):
        body = [
            [model["model"], model["step"],
             *(format_cell(model["accuracy"][s]) for s in section["subsets"]),
             format_cell(model["mmlu"]),
             "—" if model["above_chance"] is None else f"{model['above_chance']:+.4f}",
             MARKS[model["utility_kept"]]]
            for model in section["models"]
        ]  # fmt: skip
        head = ["model", "step", *(WMDP_TITLES[s] for s in section["subsets"]), "MMLU",
                "all − chance", "MMLU kept"]  # fmt: skip
        sections.append({"split": section["split"], "head": head, "body": body,
                         "subsets": section["subsets"]})  # fmt: skip
    return sections


def muse_wmdp_sections(rows: Sequence[Row], sequence: Sequence[Row] = ()) -> dict[str, Any]:
    """What the report's MUSE and WMDP sections show (each empty without its scores); each split
    carries its figures' SVG by kind (`curves`: the scores over the steps; `plane`: forget
    against utility)."""
    wmdp = wmdp_tables(rows)
    for section in wmdp:
        section["figures"] = dict(
            wmdp_figures(rows, section["split"], section["subsets"], WMDP_CHANCE)
        )
    muse = muse_tables(rows, sequence)
    for section in muse:
        section["figures"] = dict(muse_figures(rows, section["split"]))
    return {"muse": muse, "wmdp": wmdp, "bars": criteria_notes()}


def criteria_notes() -> dict[str, str]:
    """The bars the MUSE criteria use, for the captions."""
    return {"privleak": f"{PRIVLEAK_TOLERANCE:g}", "utility": f"{UTILITY_RATIO:g}",
            "chance": f"{WMDP_CHANCE:g}", "over_ratio": f"{OVER_ROUGE_RATIO:g}",
            "over_privleak": f"{OVER_PRIVLEAK:g}"}  # fmt: skip


def print_muse_wmdp(
    rows: Sequence[Row], sequence: Sequence[Row] = (), console: Console | None = None
) -> None:
    """The terminal's view of a MUSE or WMDP study: the same tables as the report's sections."""
    console = console or _console()
    for section in muse_tables(rows, sequence):
        split = section["split"]
        console.print(_table(f"MUSE on {split}", section["head"], section["numbers"]))
        console.print(_table(f"MUSE's criteria on {split}", section["criteria_head"],
                             section["criteria"]))  # fmt: skip
        if section["privleak_undecided"]:
            console.print(Text(
                f"PrivLeak on {split} moves {section['privleak_resolution']} points when one "
                f"forget/holdout pair swaps order, coarser than MUSE's +-{PRIVLEAK_TOLERANCE:g} "
                "band: 'no privacy leak' is undecided"
            ))  # fmt: skip
        if section["requests"]:
            console.print(_table(f"KnowMem retain per request on {split}",
                                 section["requests_head"], section["requests"]))  # fmt: skip
            console.print(_table(f"VerbMem forget per request on {split}",
                                 section["requests_head"][:-1], section["verbmem_requests"]))  # fmt: skip
    for section in wmdp_tables(rows):
        console.print(_table(f"WMDP on {section['split']} (chance {WMDP_CHANCE:g})",
                             section["head"], section["body"]))  # fmt: skip


def _table(title: str, head: Sequence[str], body: Sequence[Sequence[Any]]) -> Table:
    table = Table(title=title)
    for i, column in enumerate(head):
        table.add_column(column, justify="left" if i == 0 else "right", overflow="fold")
    for cells in body:
        table.add_row(*(Text(str(c)) for c in cells))  # a name is text, never rich markup
    return table
