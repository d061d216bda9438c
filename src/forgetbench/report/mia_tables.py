"""The report's membership-inference tables: per split a grid of every model's AUC per attack,
shaded by its distance from the retain model's, and per model the TPRs at low FPR beside the
retain model's (a TPR the holdout is too small to measure shows as `NOT_RESOLVABLE`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from forgetbench import rows as row_math
from forgetbench.metrics.mia_roc import LOW_FPRS, min_nonmembers
from forgetbench.report import plots, tables

NOT_RESOLVABLE = "n/r"
ATTACK_NAMES = {
    "loss": "LOSS",
    "zlib": "zlib",
    "min_k": "Min-K%",
    "min_k_plus_plus": "Min-K%++",
    "reference": "reference (retain model)",
    "lira": "LiRA (online, shadows)",
    "rmia": "RMIA (online, shadows)",
}


def _count(row: row_math.Row, key: str) -> int | None:
    value = row_math.number(row, key)
    return None if value is None else int(value)


def mia_grid(rows: Sequence[row_math.Row]) -> list[dict[str, Any]]:
    """Per split, one table of membership-inference AUCs: a row per model (the reference models,
    then each method at its last step), a column per attack. Each cell is shaded by how far the
    AUC lies from the retain model's (the target): red above it, blue below."""
    attacks = plots.mia_attacks(rows)
    out = []
    for split in row_math.splits(rows):
        retain = row_math.reference(rows, split, "retain")
        models = [(m, row_math.reference(rows, split, m)) for m in row_math.REFERENCE_METHODS]
        models += [(m, row_math.final(rows, split, m)) for m in row_math.methods(rows)]
        body = []
        for method, row in models:
            if row is None or not any(
                row_math.number(row, f"mia/{a}") is not None for a in attacks
            ):
                continue
            cells = []
            for attack in attacks:
                value = row_math.number(row, f"mia/{attack}")
                target = row_math.number(retain, f"mia/{attack}") if retain else None
                cells.append((tables.format_cell(value), _shade(value, target)))
            body.append({"model": method, "step": int(row.get("step") or 0), "cells": cells})
        if body:
            head = [ATTACK_NAMES.get(a, a) for a in attacks]
            out.append({"split": split, "head": head, "body": body})
    return out


def _shade(value: float | None, target: float | None) -> str:
    """A cell's background: its distance from the retain model's AUC, full colour at 0.3 away.
    Built from two numbers only, never from a string of the results."""
    if value is None or target is None:
        return ""
    distance = value - target
    alpha = min(abs(distance) / 0.3, 1.0) * 0.55
    if alpha < 0.005:
        return ""
    rgb = "214, 39, 40" if distance > 0 else "31, 119, 180"
    return f"background: rgba({rgb}, {alpha:.2f})"


def mia_tables(rows: Sequence[row_math.Row]) -> list[dict[str, Any]]:
    """One membership-inference table per split and model (the reference models, then each
    method at its last step): a row per attack, its AUC and TPRs at low FPR, beside the retain
    model's. A TPR the holdout is too small to measure shows as `NOT_RESOLVABLE`."""
    attacks = plots.mia_attacks(rows)
    if not attacks:
        return []

    def tpr(row: row_math.Row | None, attack: str, suffix: str) -> str:
        if row is None:
            return "—"
        value = row_math.number(row, f"mia/{attack}/{suffix}")
        if value is not None:
            return tables.format_cell(value)
        count = row_math.number(row, "mia/nonmembers")
        short = count is not None and count < min_nonmembers(LOW_FPRS[suffix])
        return (
            NOT_RESOLVABLE if short and row_math.number(row, f"mia/{attack}") is not None else "—"
        )

    head = ["attack", "AUC", *(f"TPR @ {s[4:-3]} FPR" for s in LOW_FPRS)]
    head += ["retain AUC", "retain TPR @ 1% FPR"]
    out = []
    for split in row_math.splits(rows):
        retain = row_math.reference(rows, split, "retain")
        models = [(m, row_math.reference(rows, split, m)) for m in row_math.REFERENCE_METHODS]
        models += [(m, row_math.final(rows, split, m)) for m in row_math.methods(rows)]
        for method, row in models:
            if row is None or not any(
                row_math.number(row, f"mia/{a}") is not None for a in attacks
            ):
                continue
            body = [
                [
                    ATTACK_NAMES.get(attack, attack),
                    tables.format_cell(row_math.number(row, f"mia/{attack}")),
                    *(tpr(row, attack, suffix) for suffix in LOW_FPRS),
                    tables.format_cell(
                        row_math.number(retain, f"mia/{attack}") if retain else None
                    ),
                    tpr(retain, attack, "tpr@1%fpr"),
                ]
                for attack in attacks
            ]
            out.append(
                {
                    "split": split,
                    "method": method,
                    "step": int(row.get("step") or 0),
                    "members": _count(row, "mia/members"),
                    "nonmembers": _count(row, "mia/nonmembers"),
                    "head": head,
                    "body": body,
                }
            )
    return out
