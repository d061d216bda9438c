"""The robustness table: per attacked model, what each attack brought back (knowledge recovered
on the B half of the forget set), for the terminal and the HTML report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

# Attack variants in the order they are shown; `quantize` is one variant per scheme.
VARIANTS = ("relearn", "int8", "int4", "nf4", "incontext")
VARIANT_TITLES = {
    "relearn": "relearn (A half)",
    "int8": "int8",
    "int4": "int4",
    "nf4": "NF4",
    "incontext": "in-context facts",
}
REFERENCES = ("finetuned", "retain")


def variants(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The variants any row was attacked with, in display order."""
    return [v for v in VARIANTS if any(f"attack/{v}/rougeL" in row for row in rows)]


def _two(row: Mapping[str, Any], variant: str) -> str:
    rouge = row.get(f"attack/{variant}/recovered_rougeL")
    prob = row.get(f"attack/{variant}/recovered_probability")
    if rouge is None and prob is None:
        return "—"
    show = lambda v: "—" if v is None else f"{v:+.2f}"  # noqa: E731
    return f"{show(rouge)} / {show(prob)}"


def robustness_rows(named: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """(header, cells) with one row per attacked model (references first): its unattacked B-half
    ROUGE-L and probability, knowledge recovered as ROUGE-L / probability per variant, and the
    plain relearning variant's steps back to the finetuned ROUGE-L."""
    shown = variants(list(named.values()))
    header = ["model", "B ROUGE-L", "B prob.", *(VARIANT_TITLES[v] for v in shown)]
    full = any("attack/relearn_full/budget_steps" in row for row in named.values())
    if full:
        header.append("steps to relearn")
    order = [n for n in REFERENCES if n in named] + [n for n in named if n not in REFERENCES]
    cells = []
    for name in order:
        row = named[name]
        line = [
            name,
            _number(row.get("attack/none/rougeL")),
            _number(row.get("attack/none/probability")),
            *(_two(row, v) for v in shown),
        ]
        if full:
            steps, budget = (
                row.get("attack/relearn_full/steps"),
                row.get("attack/relearn_full/budget_steps"),
            )
            line.append(
                "—" if budget is None else str(steps) if steps is not None else f"> {budget}"
            )
        cells.append(line)
    return header, cells


def _number(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}"


CAPTION = (
    "Knowledge recovered on the B half of the forget set (questions no attack trains on or shows), "
    "as ROUGE-L / probability: (attacked - unlearned) / (finetuned - unlearned); 0 = the attack "
    "brought nothing back, 1 = it restored the finetuned model's score, — = nothing was "
    "forgotten to recover (within 0.001 of the finetuned model). The retain model, which never "
    "saw the forget set, is the control. Steps to relearn: optimizer steps of relearning on the "
    "whole forget set until forget ROUGE-L is back to attack.relearn_target x the finetuned "
    "model's ('> N': not within the budget)."
)


def print_attack_table(named: Mapping[str, Mapping[str, Any]], attacks: Sequence[str]) -> None:
    header, cells = robustness_rows(named)
    table = Table(title=f"Robustness attacks ({', '.join(attacks)})", caption=CAPTION)
    for i, column in enumerate(header):
        table.add_column(column, justify="left" if i == 0 else "right")
    for line in cells:
        table.add_row(*line)
    Console(width=140).print(table)
