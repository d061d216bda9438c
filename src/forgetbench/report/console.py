"""Terminal tables (rich). Presentation only: every number arrives computed."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from forgetbench.data.logs import SET_FILES
from forgetbench.eval.summary import SUBSCORE_METRICS

_SET_TITLES = {
    "forget": "Forget",
    "retain": "Retain",
    "real_authors": "Real Authors",
    "world_facts": "World Facts",
}


def _console() -> Console:
    # Piped output would otherwise be squeezed to 80 columns and wrap every path.
    return Console() if sys.stdout.isatty() else Console(width=140)


def print_rows(rows: list[dict[str, Any]], *, title: str, console: Console | None = None) -> None:
    console = console or _console()
    table = Table(title=title)
    for column in rows[0] if rows else []:
        table.add_column(
            column, justify="right" if isinstance(rows[0][column], int | float) else "left"
        )
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    console.print(table)


def print_comparison(result: dict[str, Any], *, console: Console | None = None) -> None:
    console = console or _console()
    console.print(f"candidate: {result['candidate']}\nreference: {result['reference']}")
    table = Table(title="TOFU sub-scores of the candidate")
    table.add_column("set")
    for metric in SUBSCORE_METRICS:
        table.add_column(metric, justify="right")
    for name in SET_FILES:
        table.add_row(
            _SET_TITLES[name], *(f"{result[f'{name}/{m}']:.4f}" for m in SUBSCORE_METRICS)
        )
    console.print(table)
    console.print(f"model_utility     {result['model_utility']:.4f}")
    for name, key in (("forget", "forget_quality"), ("retain", "retain_ks_pvalue")):
        console.print(f"{key:<18}{result[key]:<10.4g}  {_questions_used(result, name)}")


def _questions_used(result: dict[str, Any], name: str) -> str:
    """Which questions the KS test used, from `compare`'s counts."""
    used = result.get(f"{name}/questions")
    if used is None:
        return ""
    how = result.get(f"{name}/matched_by")
    if how == "unchecked":
        ref = result.get(f"{name}/reference_questions", "?")
        return (
            f"(KS p-value on all {used} candidate vs {ref} reference {name} questions, unmatched)"
        )
    of = result.get(f"{name}/candidate_questions", used)
    by = f", matched to the reference by {how}" if how else ""
    return f"(KS p-value on {used} of the candidate's {of} {name} questions{by})"


def print_released_comparison(result: dict[str, Any], *, console: Console | None = None) -> None:
    """`compare --benchmark muse|wmdp`: one column per model of each file, one row per score (on
    forgetbench's scale, with open-unlearning's name beside), then the metrics only
    open-unlearning has and the conventions that differ."""
    console = console or _console()
    table = Table(title=f"{result['benchmark'].upper()} scores side by side")
    # Names are never cut; the model headers wrap instead.
    table.add_column("score", no_wrap=True)
    table.add_column("open-unlearning", no_wrap=True)
    for i, column in enumerate(result["columns"], 1):
        where = f" ({column['split']}, step {column['step']})" if column["split"] else ""
        header = Text(f"[{i}] {column['model']}{where}")
        table.add_column(header, justify="right", overflow="fold")
    for key in result["keys"]:
        cells = [_released_cell(key, c["values"].get(key)) for c in result["columns"]]
        table.add_row(key, result["their_names"].get(key) or "—", *cells)
    console.print(table)
    for i, column in enumerate(result["columns"], 1):
        console.print(Text(f"[{i}] {column['tool']}: {column['source']}"))
    for extra in result["theirs_only"]:
        console.print(Text(f"open-unlearning only: {extra['name']} = {extra['value']:.4f} "
                           f"({extra['source']})"))  # fmt: skip
    for note in result["conventions"]:
        console.print(Text(f"note: {note}"))


def _released_cell(key: str, value: float | None) -> str:
    if value is None:
        return "—"
    if key == "muse/privleak":
        return f"{value:+.2f}"
    return (
        f"{value:.2f}"
        if key in ("muse/verbmem_f", "muse/knowmem_f", "muse/knowmem_r")
        else f"{value:.4f}"
    )
