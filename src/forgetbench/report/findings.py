"""The seed papers' qualitative findings, checked against a study's results.json rows.

Each finding is a claim, a rule that decides it from the rows (its thresholds are the constants
below, and the rule's text, shown in the report, quotes them), the study's numbers behind the
verdict, and the verdict: "holds", "does not hold", or "not measurable here" when the rows lack
what the rule needs (a method, a split, forget quality, formats). Nothing here is typed in by
hand: the same rows always give the same verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from forgetbench.generalisation import ENTAILED, MIN_GAP, generalisation
from forgetbench.rows import (
    UTILITY_RATIO,
    Row,
    final,
    leaderboard,
    methods,
    number,
    reference,
    splits,
    trajectory,
)

Verdict = Literal["holds", "does not hold", "not measurable here"]
HOLDS: Verdict = "holds"
FAILS: Verdict = "does not hold"
UNMEASURABLE: Verdict = "not measurable here"

# "Most utility": the leaderboard's bar, model utility >= 0.9 x the finetuned model's.
MOST_UTILITY = UTILITY_RATIO
# TOFU's threshold: a KS p-value above it means the forget-set truth ratios cannot be told apart
# from the retain model's.
FORGET_QUALITY_PASS = 0.05
# A forget-quality move along a trajectory counts when log10 p changes by at least this much;
# smaller moves are the KS test's own jitter between neighbouring snapshots.
ZIGZAG_DECADES = 0.1
# Utility has collapsed when the final model keeps at most this share of the finetuned utility.
COLLAPSED = 0.5
# Membership inference is near chance when |AUC - 0.5| is at most this.
MIA_BAND = 0.1
# Formats: a method counts as having unlearned the QA format when it removed at least half of the
# finetuned-over-retain gap on forget-set ROUGE-L; it "keeps answering in other formats" when the
# share of the gap left on the other formats exceeds the QA share by at least FORMAT_GAP. Formats
# whose finetuned and retain scores differ by less than MIN_FORMAT_SPREAD have no gap to measure
# (at tiny scale that is one or two questions). Shares are clipped to [0, 1]: a format pushed past
# the retain model, or above the finetuned one, by a question or two must not outweigh the rest.
QA_UNLEARNED = 0.5
FORMAT_GAP = 0.1
MIN_FORMAT_SPREAD = 0.1

# Generalisation probes: a method's forgetting "stops at the sentences" when the mean share of the
# entailed probes' gap it closed is at least PROBE_SHORTFALL below its share of the forget set's.
PROBE_SHORTFALL = 0.1

GRADIENT_ASCENT = "grad_ascent"
ZIGZAG_METHODS = ("grad_diff", "dpo", "npo")


@dataclass(frozen=True)
class Finding:
    source: str
    claim: str
    rule: str
    verdict: Verdict
    numbers: tuple[str, ...]


def check_findings(rows: Sequence[Row]) -> list[Finding]:
    """Every finding, in the order of the papers."""
    return [check(rows) for check in CHECKS]


def _f(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3g}" if 0 < abs(value) < 1e-3 else f"{value:.3f}"


def _finetuned_utility(rows: Sequence[Row], split: str) -> float | None:
    row = reference(rows, split)
    return number(row, "model_utility") if row else None


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


def formats_keep_knowledge(rows: Sequence[Row]) -> Finding:
    rule = (
        f"for each method's final model, the share of the finetuned-over-retain gap left on "
        f"forget-set QA (ROUGE-L) and on each other format (formats/<f>/forget), clipped to "
        f"[0, 1] (formats whose two references differ by < {MIN_FORMAT_SPREAD:g} left out); among "
        f"the models that removed >= {QA_UNLEARNED:g} of the QA gap, holds when more than half keep a mean share on the "
        f"other formats at least {FORMAT_GAP:g} above their QA share"
    )
    numbers, keeps = [], []
    for split in splits(rows):
        finetuned, retain = reference(rows, split), reference(rows, split, "retain")
        if finetuned is None or retain is None:
            continue
        formats = sorted(k for k in finetuned if k.startswith("formats/") and k.endswith("/forget"))
        for method in methods(rows):
            row = final(rows, split, method)
            if row is None:
                continue
            qa = _gap_left(row, finetuned, retain, "forget/rougeL")
            if qa is None or qa > QA_UNLEARNED:
                continue
            shares = {
                k.split("/")[1]: s
                for k in formats
                if (s := _gap_left(row, finetuned, retain, k)) is not None
            }
            if not shares:
                continue
            mean = sum(shares.values()) / len(shares)
            keeps.append(mean - qa >= FORMAT_GAP)
            numbers.append(
                f"{method} on {split}: QA {_f(qa)} of the gap left, other formats {_f(mean)} "
                f"(" + ", ".join(f"{f} {_f(s)}" for f, s in shares.items()) + ")"
            )
    verdict = _most(keeps)
    return Finding(
        "Data transformations (Joshi et al. 2024)",
        "An unlearned model keeps answering forgotten facts in other formats.",
        rule,
        verdict,
        tuple(numbers),
    )


def _gap_left(row: Row, finetuned: Row, retain: Row, key: str) -> float | None:
    """(value - retain) / (finetuned - retain) in [0, 1]: 1 = as the finetuned model, 0 = as the
    retain model."""
    value, top, bottom = number(row, key), number(finetuned, key), number(retain, key)
    if value is None or top is None or bottom is None or abs(top - bottom) < MIN_FORMAT_SPREAD:
        return None
    return min(max((value - bottom) / (top - bottom), 0.0), 1.0)


def forgetting_stops_at_the_sentences(rows: Sequence[Row]) -> Finding:
    rule = (
        f"for each method's final model that closed >= {QA_UNLEARNED:g} of the finetuned-vs-retain "
        f"forget-set probability gap, the mean share it closed on the paraphrase, reverse and "
        f"two-hop probes; holds when more than half of them close at least {PROBE_SHORTFALL:g} "
        f"less of the probes' gaps than of the forget set's"
    )
    numbers, short = [], []
    for split in splits(rows):
        for entry in generalisation(rows, split):
            forget = entry["forget"]
            probes = [v for k in ENTAILED if isinstance(v := entry[k], float)]
            if not isinstance(forget, float) or forget < QA_UNLEARNED or not probes:
                continue
            mean = sum(probes) / len(probes)
            short.append(forget - mean >= PROBE_SHORTFALL)
            collateral = entry["collateral"]
            numbers.append(
                f"{entry['method']} on {split}: forget set {_f(forget)} of the gap closed, "
                f"probes {_f(mean)} ("
                + ", ".join(f"{k} {_f(entry[k])}" for k in ENTAILED)  # type: ignore[arg-type]
                + f"); collateral {_f(collateral if isinstance(collateral, float) else None)}"
            )
    verdict = _most(short)
    return Finding(
        "Generalisation probes (RWKU, Jin et al. 2024; UGBench 2025)",
        "Forgetting stops at the trained sentences: what the forget set entails (the same facts "
        "asked in other words, backwards, or through another fact) is forgotten less.",
        rule,
        verdict,
        tuple(numbers),
    )


def mia_near_chance(rows: Sequence[Row]) -> Finding:
    rule = (
        f"the LOSS-attack AUC of each method's final model (LUME's documents, lume/mia/loss, "
        f"else the forget set's mia/loss, skipping one on which the finetuned model itself is "
        f"near chance: it measures no membership there, as LUME's documents on the miniature, "
        f"which no model trains on); near chance when |AUC - 0.5| <= {MIA_BAND:g}; holds "
        f"when at least one method is near chance on every split it ran on"
    )
    numbers, near = [], {}
    for split in splits(rows):
        finetuned = reference(rows, split)
        key = None
        for candidate in ("lume/mia/loss", "mia/loss"):
            if not _has(rows, split, candidate):
                continue
            own = number(finetuned, candidate) if finetuned else None
            if own is not None and abs(own - 0.5) <= MIA_BAND:
                numbers.append(
                    f"{split}: {candidate} skipped, the finetuned model is at {_f(own)} on it"
                )
                continue
            key = candidate
            break
        if key is None:
            continue
        retain = reference(rows, split, "retain")
        line = []
        for method in methods(rows):
            row = final(rows, split, method)
            auc = number(row, key) if row else None
            if auc is None:
                continue
            inside = abs(auc - 0.5) <= MIA_BAND
            near[method] = near.get(method, True) and inside
            line.append(f"{method} {_f(auc)}{' (near chance)' if inside else ''}")
        if line:
            retain_auc = number(retain, key) if retain else None
            numbers.append(f"{split} ({key}; retain model {_f(retain_auc)}): " + ", ".join(line))
    chance = [m for m, ok in near.items() if ok]
    if chance:
        numbers.append("near chance everywhere: " + ", ".join(chance))
    verdict = UNMEASURABLE if not near else HOLDS if chance else FAILS
    return Finding(
        "LUME (Ramakrishna et al. 2025)",
        "Some unlearning methods keep membership inference near chance.",
        rule,
        verdict,
        tuple(numbers),
    )


def _has(rows: Sequence[Row], split: str, key: str) -> bool:
    return any(r["split"] == split and number(r, key) is not None for r in rows)


def ga_collapses_utility(rows: Sequence[Row]) -> Finding:
    rule = (
        f"gradient ascent's final model keeps at most {COLLAPSED:g} x the finetuned model's "
        f"utility on every split it ran on"
    )
    numbers, verdicts = [], []
    for split in splits(rows):
        row = final(rows, split, GRADIENT_ASCENT)
        base = _finetuned_utility(rows, split)
        utility = number(row, "model_utility") if row else None
        if row is None or base is None or utility is None or base <= 0:
            continue
        verdicts.append(utility <= COLLAPSED * base)
        numbers.append(
            f"{split}: step {row['step']} utility {_f(utility)} = {_f(utility / base)} x "
            f"finetuned {_f(base)}"
        )
    return Finding(
        "LUME (Ramakrishna et al. 2025)",
        "Gradient ascent collapses model utility.",
        rule,
        _all(verdicts),
        tuple(numbers),
    )


def _all(verdicts: Sequence[bool]) -> Verdict:
    if not verdicts:
        return UNMEASURABLE
    return HOLDS if all(verdicts) else FAILS


def _most(verdicts: Sequence[bool]) -> Verdict:
    """Holds when more than half of the cases hold."""
    if not verdicts:
        return UNMEASURABLE
    return HOLDS if 2 * sum(verdicts) > len(verdicts) else FAILS


CHECKS: tuple[Callable[[Sequence[Row]], Finding], ...] = (
    ga_loses_utility_fastest,
    zigzag_trade_off,
    no_baseline_passes_forget10,
    forget01_easier,
    formats_keep_knowledge,
    forgetting_stops_at_the_sentences,
    mia_near_chance,
    ga_collapses_utility,
)


def findings_rules() -> dict[str, Any]:
    """The thresholds the rules use, by name, for the report."""
    return {
        "most utility (x finetuned)": MOST_UTILITY,
        "forget quality pass (KS p)": FORGET_QUALITY_PASS,
        "zig-zag move (decades of p)": ZIGZAG_DECADES,
        "collapsed utility (x finetuned)": COLLAPSED,
        "MIA near chance (|AUC - 0.5|)": MIA_BAND,
        "QA unlearned (gap removed)": QA_UNLEARNED,
        "formats gap over QA": FORMAT_GAP,
        "least format spread": MIN_FORMAT_SPREAD,
        "probes' shortfall (gap closed)": PROBE_SHORTFALL,
        "least probe gap (probability)": MIN_GAP,
    }
