"""The row arithmetic every layer above shares: pure functions over results.json rows.

A row is one evaluated model: `split`, `method`, `step` plus metric keys (`forget_quality`,
`model_utility`, `forget/rougeL`, ...); any metric may be missing or null. Reference rows
(`finetuned`, `retain`, `base`) sit at step 0; an unlearning method has one row per evaluated step.
The study picks its leaderboard and sweep settings here and the report draws from the same
functions, so both sit above this module and neither reaches into the other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from forgetbench.intervals import bootstrap_interval, log10_quality
from forgetbench.overunlearning import (
    OVER_DEGENERATE,
    OVER_PRIVLEAK,
    OVER_ROUGE_RATIO,
    over_unlearning,
)

Row = Mapping[str, Any]

REFERENCE_METHODS = ("finetuned", "retain", "base")
# The utility bar of the leaderboard: TOFU compares methods at "matched" utility, and a method that
# keeps 90% of the finetuned model's utility is the usual reading of "did not break the model".
UTILITY_RATIO = 0.9

# (key in a leaderboard row, key in a results row, column title); optional ones only when present.
COLUMNS = (
    ("method", "method", "method"),
    ("split", "split", "split"),
    ("step", "step", "step"),
    ("forget_quality", "forget_quality", "forget quality"),
    ("model_utility", "model_utility", "model utility"),
    ("forget_rougeL", "forget/rougeL", "forget ROUGE-L"),
    ("retain_rougeL", "retain/rougeL", "retain ROUGE-L"),
)
OPTIONAL_COLUMNS = (
    ("privleak", "privleak", "PrivLeak"),
    ("lume_final", "lume/final", "LUME final"),
)


def number(row: Row, key: str) -> float | None:
    """`row[key]` as a finite float, or None when missing, null or not finite."""
    return as_number(row.get(key))


def as_number(value: Any) -> float | None:
    """`value` as a finite float, or None when it is null, not a number or not finite."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def splits(rows: Sequence[Row]) -> list[str]:
    """Split names in order of first appearance."""
    return list(dict.fromkeys(str(r["split"]) for r in rows))


def methods(rows: Sequence[Row]) -> list[str]:
    """Unlearning methods (every method that is not a reference model) in order of appearance."""
    return [m for m in dict.fromkeys(str(r["method"]) for r in rows) if m not in REFERENCE_METHODS]


def reference(rows: Sequence[Row], split: str, method: str = "finetuned") -> Row | None:
    """The reference model's row on `split` (the lowest step if there are several), or None."""
    found = [r for r in rows if r["split"] == split and r["method"] == method]
    return min(found, key=step_of) if found else None


def trajectory(rows: Sequence[Row], split: str, method: str, *, start: bool = True) -> list[Row]:
    """`method`'s rows on `split` in step order. With `start`, a method that has no step-0 row
    begins at the finetuned model (step 0, epoch 0): every unlearning run starts from it."""
    path = sorted((r for r in rows if r["split"] == split and r["method"] == method), key=step_of)
    finetuned = reference(rows, split)
    if start and finetuned is not None and (not path or step_of(path[0]) > 0):
        path.insert(0, {**finetuned, "method": method, "step": 0, "epoch": 0.0})
    return path


def final(rows: Sequence[Row], split: str, method: str) -> Row | None:
    """`method`'s row with the highest step on `split`."""
    path = trajectory(rows, split, method, start=False)
    return path[-1] if path else None


# The score families of the document benchmarks' rows (`forgetbench run --benchmark muse|wmdp`).
DOCUMENT_FAMILIES = ("muse/", "wmdp/", "mmlu/")


def has_key(rows: Sequence[Row], key: str) -> bool:
    return any(number(r, key) is not None for r in rows)


def tofu_scored(rows: Sequence[Row]) -> bool:
    """Whether the matched-utility leaderboard has anything to rank: False only for a document
    benchmark's rows (MUSE, WMDP: `DOCUMENT_FAMILIES` keys and no TOFU score), which it would
    draw empty."""
    keys = {key for row in rows for key in row}
    tofu = any(k in ("forget_quality", "model_utility") or k.startswith("forget/") for k in keys)
    return tofu or not any(k.startswith(DOCUMENT_FAMILIES) for k in keys)


# The leaderboard's forget quality (docs/report.md#which-step-a-method-is-shown-at): each step's
# KS p-value on the even-numbered forget questions chooses the step, the odd-numbered ones' is
# reported, with its bootstrap interval over those questions. Rows from before these keys
# existed are chosen and reported on every question, and the entries say so (`selection`).
SELECTION_KEY = "forget_quality/selection"
HELD_OUT_KEY = "forget_quality/held_out"
HELD_OUT_RANGE = ("forget_quality/held_out_low", "forget_quality/held_out_high")
SELECTION_RULES = {
    "halves": "step chosen on half of the forget questions, forget quality on the other half",
    "all": "step chosen and forget quality reported on the same forget questions",
}


def selection_rule(rows: Sequence[Row]) -> str:
    """ "halves" when every unlearning method's row has both halves' forget quality, else "all"."""
    ranked = [r for r in rows if r["method"] not in REFERENCE_METHODS]
    both = all(number(r, SELECTION_KEY) is not None and number(r, HELD_OUT_KEY) is not None
               for r in ranked)  # fmt: skip
    return "halves" if ranked and both else "all"


def leaderboard(
    rows: Sequence[Row], *, utility_ratio: float = UTILITY_RATIO
) -> list[dict[str, Any]]:
    """One row per (split, unlearning method), best first: the matched-utility leaderboard.

    The matched-utility rule: among a method's evaluated steps on a split, keep those whose model
    utility is at least `utility_ratio` (0.9) times the finetuned model's utility on that split, and
    pick the one with the highest forget quality on the selection half of the forget questions
    (`SELECTION_KEY`; ties: the earlier step). If no step qualifies, pick the step with the
    highest model utility and flag the row (`matched` is False) — the method could not forget
    without losing more than 10% of the utility. If the split has no finetuned utility, the rule
    cannot apply: the highest forget quality wins, also flagged. The entry's `forget_quality` is
    the chosen step's on the other, held-out half (`HELD_OUT_KEY`), with `forget_quality_range`
    its 95% bootstrap interval over those questions; rows without the halves (older files) are
    chosen and reported on every question (`selection` says which: a `SELECTION_RULES` key).
    Rows are sorted by that forget quality, highest first (missing values last). Reference
    models are not ranked.

    Each row holds `method`, `split`, `step`, `forget_quality`, `model_utility`, `forget_rougeL`,
    `retain_rougeL` (plus `privleak` / `lume_final` when any results row has them), `matched`
    (bool), `note` (why the row is flagged, or ''), `selection`, `forget_quality_range` (or None)
    and `over_unlearning` (`over_unlearning`'s failed tests at that step, against the split's
    retain model).

    Rows from several unlearning seeds (a `seed` field, `study.seeds`): the rule picks the step on
    the seeds' mean trajectory (`seed_means`), the row shows those means (forget quality: the
    geometric mean), and the entry gains `seeds` (how many) and `intervals`: column key -> the
    95% bootstrap interval over seeds at that step (forget quality's on the log10 scale).
    """
    optional = [c for c in OPTIONAL_COLUMNS if has_key(rows, c[1])]
    seeded = is_seeded(rows)
    means = seed_means(rows) if seeded else rows
    rule = selection_rule(means)
    chooser, shown = (SELECTION_KEY, HELD_OUT_KEY) if rule == "halves" else ("forget_quality",) * 2
    board: list[dict[str, Any]] = []
    for split in splits(means):
        finetuned = reference(means, split)
        base_utility = number(finetuned, "model_utility") if finetuned else None
        retain = reference(means, split, "retain")
        for method in methods(means):
            path = trajectory(means, split, method, start=False)
            if not path:
                continue
            chosen, matched, note = _choose(path, base_utility, utility_ratio, key=chooser)
            entry = _entry(chosen, optional, shown)
            entry.update(
                matched=matched, note=note, over_unlearning=over_unlearning(chosen, retain)
            )
            if seeded:
                per_seed = _seed_rows(rows, split, method, step_of(chosen))
                entry["seeds"] = len(per_seed)
                entry["intervals"] = {
                    key: found
                    for key, source, _ in (*COLUMNS, *optional)
                    if key not in ("method", "split", "step")
                    and (found := seed_interval(per_seed, shown if key == "forget_quality"
                                                else source)) is not None
                }  # fmt: skip
            board.append(entry)
    return sorted(board, key=_rank)


def _entry(row: Row, optional: Sequence[tuple[str, str, str]], shown: str) -> dict[str, Any]:
    """A leaderboard entry's columns from `row`, forget quality read from `shown`."""
    entry = {key: _value(row, source) for key, source, _ in (*COLUMNS, *optional)}
    entry["forget_quality"] = number(row, shown)
    low, high = (number(row, key) for key in HELD_OUT_RANGE)
    held_out = shown == HELD_OUT_KEY and low is not None and high is not None
    entry["selection"] = "halves" if shown == HELD_OUT_KEY else "all"
    entry["forget_quality_range"] = [low, high] if held_out else None
    return entry


def leaderboard_record(rows: Sequence[Row]) -> dict[str, Any]:
    """results.json's `leaderboard`: how the step was chosen (`selection`, `rule`), the
    thresholds over-unlearning was judged by, the reference models' entries and the ranked
    entries as `leaderboard` gives them (each with its `over_unlearning` tests and numbers)."""
    board = leaderboard(rows)
    rule = selection_rule(rows)
    return {
        "selection": rule,
        "rule": (
            f"matched utility (>= {UTILITY_RATIO:g} x the finetuned model's), then the "
            f"highest forget quality; {SELECTION_RULES[rule]}"
        ),
        "over_unlearning_bars": {
            "forget_rougeL_ratio": OVER_ROUGE_RATIO,
            "privleak": OVER_PRIVLEAK,
            "degenerate": OVER_DEGENERATE,
        },
        "references": reference_entries(rows),
        "entries": board,
    }


def tie_ranks(board: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each leaderboard entry's rank among its split's entries by forget quality: "1", "2=",
    "2=", "4" (equal forget quality shares a rank and says so; KS p-values over a few questions
    tie often); "—" without forget quality."""
    qualities: dict[str, list[float]] = {}
    for entry in board:
        if (q := as_number(entry.get("forget_quality"))) is not None:
            qualities.setdefault(str(entry["split"]), []).append(q)
    ranks = []
    for entry in board:
        q = as_number(entry.get("forget_quality"))
        if q is None:
            ranks.append("—")
            continue
        peers = qualities[str(entry["split"])]
        rank = 1 + sum(other > q for other in peers)
        ranks.append(f"{rank}=" if peers.count(q) > 1 else str(rank))
    return ranks


def reference_entries(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """The reference models (finetuned, retain, base) of every split as leaderboard entries:
    the same columns, step 0, never flagged; what the ranked methods are read against."""
    optional = [c for c in OPTIONAL_COLUMNS if has_key(rows, c[1])]
    shown = HELD_OUT_KEY if selection_rule(rows) == "halves" else "forget_quality"
    return [
        {**_entry(row, optional, shown), "matched": True, "note": "", "over_unlearning": []}
        for split in splits(rows)
        for method in REFERENCE_METHODS
        if (row := reference(rows, split, method)) is not None
    ]


def chosen_steps(rows: Sequence[Row]) -> set[tuple[str, str, int]]:
    """(split, method, step) of every leaderboard entry: the rows results.csv marks as chosen,
    so the leaderboard can be rebuilt from the CSV alone (with seeds: every seed's row at the
    step chosen on the seeds' means)."""
    return {(e["split"], e["method"], e["step"]) for e in leaderboard(rows)}


# --- seeds (study.seeds) ------------------------------------------------------------------------

_NOT_SCORES = ("split", "method", "seed", "step", "epoch", "log")
# A row's record of the settings that made its model (study/unlearn.py): not scores.
SETTINGS = "settings/"


def _is_quality(key: str) -> bool:
    """Forget quality and its halves: p-values, averaged and bootstrapped on the log10 scale."""
    return key == "forget_quality" or key.startswith("forget_quality/")


def _not_score(key: str) -> bool:
    return key in _NOT_SCORES or key.startswith(SETTINGS)


def is_seeded(rows: Sequence[Row]) -> bool:
    """Whether the rows come from a study with `study.seeds` (every method row carries `seed`)."""
    return any("seed" in r for r in rows)


def _seed_rows(rows: Sequence[Row], split: str, method: str, step: int) -> list[Row]:
    return [r for r in rows if r["split"] == split and r["method"] == method and step_of(r) == step]


def seed_interval(rows: Sequence[Row], key: str) -> dict[str, float | int] | None:
    """Mean and 95% bootstrap interval of `key` over `rows` (one per seed); forget quality on
    the log10 scale. None when no row has a value."""
    if _is_quality(key):
        values = [log10_quality(number(r, key)) for r in rows]
    else:
        values = [number(r, key) for r in rows]
    present = [v for v in values if v is not None]
    return bootstrap_interval(present).as_dict() if present else None


def seed_means(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One row per (split, method, step): the mean over seeds of every numeric score (forget
    quality: 10 ** the mean of its log10, the geometric mean), in first-appearance order, without
    `seed`; the first seed's `log`. Rows without a seed (reference models) pass unchanged."""
    groups: dict[tuple[str, str, int], list[Row]] = {}
    for row in rows:
        groups.setdefault((str(row["split"]), str(row["method"]), step_of(row)), []).append(row)
    merged = []
    for group in groups.values():
        if len(group) == 1 and "seed" not in group[0]:
            merged.append(dict(group[0]))
            continue
        row = {k: v for k, v in group[0].items() if k != "seed"}
        for key in row:
            if _not_score(key) or as_number(row[key]) is None:
                continue
            found = seed_interval(group, key)
            mean = None if found is None else float(found["mean"])
            row[key] = 10**mean if _is_quality(key) and mean is not None else mean
        merged.append(row)
    return merged


def seed_summary(rows: Sequence[Row], board: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """results.json's `seed_intervals`: for each leaderboard entry, at its chosen step, every
    numeric score's mean and 95% bootstrap interval over seeds (forget quality as
    `log10_forget_quality`)."""
    summary = []
    for entry in board:
        per_seed = _seed_rows(rows, entry["split"], entry["method"], entry["step"])
        keys = [k for k in dict.fromkeys(k for r in per_seed for k in r) if not _not_score(k)]
        scores = {}
        for key in keys:
            found = seed_interval(per_seed, key)
            if found is not None:
                name = "log10_forget_quality" if key == "forget_quality" else key
                scores[name] = found
        summary.append(
            {
                "split": entry["split"],
                "method": entry["method"],
                "step": entry["step"],
                "seeds": sorted(r["seed"] for r in per_seed if "seed" in r),
                "scores": scores,
            }
        )
    return summary


def choose(
    path: Sequence[Row], base_utility: float | None, ratio: float = UTILITY_RATIO
) -> tuple[Row, bool, str]:
    """The leaderboard's matched-utility rule over `path` (any rows, e.g. every step of every
    sweep trial) on every forget question: (chosen row, whether it keeps `ratio` x
    `base_utility`, note when not)."""
    return _choose(path, base_utility, ratio)


def _choose(
    path: Sequence[Row], base_utility: float | None, ratio: float, *, key: str = "forget_quality"
) -> tuple[Row, bool, str]:
    def by_quality(row: Row) -> tuple[float, int]:
        return _or_low(number(row, key)), -step_of(row)

    if base_utility is None:
        return max(path, key=by_quality), False, "no finetuned utility on this split to match"
    bar = ratio * base_utility
    eligible = [r for r in path if (u := number(r, "model_utility")) is not None and u >= bar]
    if eligible:
        return max(eligible, key=by_quality), True, ""
    best = max(path, key=lambda r: (_or_low(number(r, "model_utility")), -step_of(r)))
    return best, False, f"no step keeps {ratio:g} x the finetuned utility; highest-utility step"


def _value(row: Row, key: str) -> Any:
    if key in ("method", "split"):
        return str(row[key])
    if key == "step":
        return step_of(row)
    return number(row, key)


def _rank(entry: Mapping[str, Any]) -> tuple[float, str, str]:
    return (-_or_low(entry["forget_quality"]), entry["split"], entry["method"])


def _or_low(value: float | None) -> float:
    return -math.inf if value is None else value


def step_of(row: Row) -> int:
    step = row.get("step")
    return int(step) if isinstance(step, int | float) and not isinstance(step, bool) else 0
