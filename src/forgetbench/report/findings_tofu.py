"""TOFU's findings (Maini et al. 2024), each decided from a study's rows: gradient ascent loses
utility fastest, the zig-zag trade-off, no baseline passing forget10, forget01 easier."""

from __future__ import annotations

import math
from collections.abc import Sequence

from forgetbench.report.findings_common import (
    FAILS,
    FORGET_QUALITY_PASS,
    GRADIENT_ASCENT,
    HOLDS,
    MOST_UTILITY,
    UNMEASURABLE,
    ZIGZAG_DECADES,
    ZIGZAG_METHODS,
    Finding,
    _all,
    _f,
    _finetuned_utility,
)
from forgetbench.rows import Row, leaderboard, methods, number, reference, splits, trajectory


def ga_loses_utility_fastest(rows: Sequence[Row]) -> Finding:
    rule = (
        "per split, the steepest utility loss per unlearning epoch between consecutive evaluated "
        "points of each method's trajectory (from the finetuned model); holds when gradient "
        "ascent's is the steepest on every split where it and another method ran"
    )
    numbers, verdicts = [], []
    for split in splits(rows):
        rates = {m: r for m in methods(rows) if (r := _steepest_drop(rows, split, m)) is not None}
        if GRADIENT_ASCENT not in rates or len(rates) < 2:
            continue
        fastest = max(rates, key=lambda m: (rates[m], m == GRADIENT_ASCENT))
        verdicts.append(fastest == GRADIENT_ASCENT)
        ranked = sorted(rates.items(), key=lambda kv: -kv[1])[:4]
        numbers.append(
            f"{split}: "
            + ", ".join(f"{m} {_f(rate)}/epoch" for m, rate in ranked)
            + ("" if fastest == GRADIENT_ASCENT else f" (fastest: {fastest})")
        )
    return Finding(
        "TOFU",
        "Gradient ascent destroys model utility fastest.",
        rule,
        _all(verdicts),
        tuple(numbers),
    )


def _steepest_drop(rows: Sequence[Row], split: str, method: str) -> float | None:
    path = [
        (e, u)
        for r in trajectory(rows, split, method)
        if (e := number(r, "epoch")) is not None and (u := number(r, "model_utility")) is not None
    ]
    drops = [
        (u0 - u1) / (e1 - e0) for (e0, u0), (e1, u1) in zip(path, path[1:], strict=False) if e1 > e0
    ]
    return max(drops) if drops else None


def zigzag_trade_off(rows: Sequence[Row]) -> Finding:
    rule = (
        f"a trajectory (finetuned model, then every snapshot) zig-zags when its forget-quality "
        f"moves of at least {ZIGZAG_DECADES:g} decades (log10 p) change direction at least once; "
        f"holds when at least half of the {', '.join(ZIGZAG_METHODS)} trajectories with three or "
        f"more points zig-zag"
    )
    numbers, zigzags = [], []
    for split in splits(rows):
        for method in ZIGZAG_METHODS:
            path = [
                (u, math.log10(q))
                for r in trajectory(rows, split, method)
                if (q := number(r, "forget_quality")) is not None
                and q > 0
                and (u := number(r, "model_utility")) is not None
            ]
            if len(path) < 3 or method not in methods(rows):
                continue
            turns = _reversals([q for _, q in path])
            zigzags.append(turns > 0)
            numbers.append(
                f"{method} on {split}: log10 FQ "
                + " → ".join(f"{q:.2f}" for _, q in path)
                + f", utility {_f(path[0][0])} → {_f(path[-1][0])}; {turns} reversal(s)"
            )
    verdict = UNMEASURABLE if not zigzags else HOLDS if 2 * sum(zigzags) >= len(zigzags) else FAILS
    return Finding(
        "TOFU",
        "GradDiff and preference optimisation (DPO, NPO) trade forget quality against utility "
        "along zig-zag trajectories.",
        rule,
        verdict,
        tuple(numbers),
    )


def _reversals(values: Sequence[float]) -> int:
    moves = [
        b - a for a, b in zip(values, values[1:], strict=False) if abs(b - a) >= ZIGZAG_DECADES
    ]
    return sum(1 for a, b in zip(moves, moves[1:], strict=False) if (a > 0) != (b > 0))


def no_baseline_passes_forget10(rows: Sequence[Row]) -> Finding:
    rule = (
        f"on forget10, no snapshot of any method has forget quality > {FORGET_QUALITY_PASS:g} "
        f"while keeping model utility >= {MOST_UTILITY:g} x the finetuned model's"
    )
    split = "forget10"
    base = _finetuned_utility(rows, split)
    # (row, forget quality, utility) of every evaluated snapshot of every method.
    snapshots = [
        (r, q, u)
        for m in methods(rows)
        for r in trajectory(rows, split, m, start=False)
        if (q := number(r, "forget_quality")) is not None
        and (u := number(r, "model_utility")) is not None
    ]
    if base is None or not snapshots:
        return Finding("TOFU", _NO_PASS_CLAIM, rule, UNMEASURABLE, ())
    passing = [
        (r, q, u) for r, q, u in snapshots if q > FORGET_QUALITY_PASS and u >= MOST_UTILITY * base
    ]
    best, quality, utility = max(snapshots, key=lambda s: s[1])
    numbers = [
        f"finetuned utility {_f(base)}; bar {_f(MOST_UTILITY * base)}",
        f"highest forget quality: {best['method']} step {best['step']}, {_f(quality)} at "
        f"utility {_f(utility)}",
    ]
    numbers += [
        f"passes: {r['method']} step {r['step']}, forget quality {_f(q)}, utility {_f(u)}"
        for r, q, u in passing
    ]
    return Finding("TOFU", _NO_PASS_CLAIM, rule, FAILS if passing else HOLDS, tuple(numbers))


_NO_PASS_CLAIM = (
    "No baseline reaches forget quality p > 0.05 on forget10 while keeping most of its utility."
)


def forget01_easier(rows: Sequence[Row]) -> Finding:
    rule = (
        f"per method, forget quality at matched utility (the leaderboard's step: utility >= "
        f"{MOST_UTILITY:g} x finetuned, highest forget quality) on forget01 against forget10; "
        f"holds when forget01's is higher for more than half of the methods on both (a KS test "
        f"on fewer questions gives larger p-values by itself, in TOFU too); not measurable when "
        f"both splits hold the same number of forget questions"
    )
    sizes = {s: _questions(rows, s) for s in ("forget01", "forget10")}
    if sizes["forget01"] is not None and sizes["forget01"] == sizes["forget10"]:
        # The miniature's tiny scale has one forget author for every split: nothing to compare.
        numbers = (f"forget01 and forget10 both hold {sizes['forget01']:g} forget questions",)
        return Finding("TOFU", _EASIER_CLAIM, rule, UNMEASURABLE, numbers)
    board = {
        (e["split"], e["method"]): e["forget_quality"]
        for e in leaderboard(rows)
        if e["forget_quality"] is not None
    }
    pairs = {
        m: (board[("forget01", m)], board[("forget10", m)])
        for m in methods(rows)
        if ("forget01", m) in board and ("forget10", m) in board
    }
    if not pairs:
        return Finding(
            "TOFU", "forget01 is easier to unlearn than forget10.", rule, UNMEASURABLE, ()
        )
    easier = [m for m, (small, large) in pairs.items() if small > large]
    numbers = tuple(f"{m}: forget01 {_f(a)}, forget10 {_f(b)}" for m, (a, b) in pairs.items())
    verdict = HOLDS if 2 * len(easier) > len(pairs) else FAILS
    return Finding("TOFU", _EASIER_CLAIM, rule, verdict, numbers)


_EASIER_CLAIM = "forget01 is easier to unlearn than forget10."


def _questions(rows: Sequence[Row], split: str) -> float | None:
    """How many forget-set questions the split's finetuned model was scored on."""
    row = reference(rows, split)
    return number(row, "forget/questions") if row else None
