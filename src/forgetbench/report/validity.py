"""The validity gates as the terminal and the report say them: first, before any table.

The checks themselves (`forgetbench.validity`) are arithmetic over the rows; here they become
sentences: one verdict, then each check that did not pass with what it found, what it means and
what to do."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape

from forgetbench.lume_gate import lume_noise
from forgetbench.validity import failed_checks, passed, problems

NOT_RANKED = (
    "This study cannot rank methods: a validity gate failed. The rows are all kept "
    "(results.json, results.csv), but they are not a ranking."
)


def verdict(validity: Mapping[str, Any] | None) -> str:
    """One sentence: whether the gates passed, failed or could not all be checked."""
    if not validity:
        return "Validity gates: not checked (results written before they existed)."
    failed = failed_checks(validity)
    if failed:
        return f"{NOT_RANKED} Failed: {', '.join(failed)}."
    unknown = [c for c in problems(validity) if c["status"] == "unknown"]
    if unknown:
        return (
            "Validity gates: none failed, but "
            f"{len(unknown)} could not be checked; read the ranking with care."
        )
    return "Validity gates: all pass (" + "; ".join(passed_findings(validity)) + ")."


def passed_findings(validity: Mapping[str, Any] | None) -> list[str]:
    return [c["finding"] for c in passed(validity)]


def print_validity(validity: Mapping[str, Any] | None, console: Console | None = None) -> None:
    """The verdict, then every check that did not pass, each with its meaning and remedy."""
    # Soft-wrapped off a terminal: a log keeps each sentence on one line, greppable.
    console = console or Console(soft_wrap=not sys.stdout.isatty())
    failed = bool(failed_checks(validity))
    style = "bold red" if failed else ("yellow" if problems(validity) else "green")
    console.print(f"[{style}]{escape(verdict(validity))}[/{style}]")
    for check in problems(validity):
        console.print(f"  {check['status'].upper()}: {escape(check['finding'])}", highlight=False)
        if check.get("meaning"):
            console.print(f"    what it means: {escape(check['meaning'])}", highlight=False)
        if check.get("todo"):
            console.print(f"    what to do: {escape(check['todo'])}", highlight=False)
    if problems(validity):  # which gates did pass, so the next attempt knows where it stands
        for finding in passed_findings(validity):
            console.print(f"  PASS: {escape(finding)}", highlight=False)
    for check in lume_noise(validity):  # LUME final: shown or not, never a gate on the ranking
        console.print(f"  LUME {check['status'].upper()}: {escape(check['finding'])}",
                      style="yellow", highlight=False)  # fmt: skip
        if check.get("todo"):
            console.print(f"    what to do: {escape(check['todo'])}", highlight=False)
