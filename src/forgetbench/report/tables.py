"""The leaderboard and the row bookkeeping the plots share. Pure functions over results.json rows.

A row is one evaluated model: `split`, `method`, `step` plus metric keys (`forget_quality`,
`model_utility`, `forget/rougeL`, ...); any metric may be missing or null. Reference rows
(`finetuned`, `retain`, `base`) sit at step 0; an unlearning method has one row per evaluated step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

Row = Mapping[str, Any]

REFERENCE_METHODS = ("finetuned", "retain", "base")
# The utility bar of the leaderboard: TOFU compares methods at "matched" utility, and a method that
# keeps 90% of the finetuned model's utility is the usual reading of "did not break the model".
UTILITY_RATIO = 0.9

# (key in a leaderboard row, key in a results row, column title); optional ones only when present.
_COLUMNS = (
    ("method", "method", "method"),
    ("split", "split", "split"),
    ("step", "step", "step"),
    ("forget_quality", "forget_quality", "forget quality"),
    ("model_utility", "model_utility", "model utility"),
    ("forget_rougeL", "forget/rougeL", "forget ROUGE-L"),
    ("retain_rougeL", "retain/rougeL", "retain ROUGE-L"),
)
_OPTIONAL_COLUMNS = (
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
    return min(found, key=_step) if found else None


def trajectory(rows: Sequence[Row], split: str, method: str, *, start: bool = True) -> list[Row]:
    """`method`'s rows on `split` in step order. With `start`, a method that has no step-0 row
    begins at the finetuned model (step 0, epoch 0): every unlearning run starts from it."""
    path = sorted((r for r in rows if r["split"] == split and r["method"] == method), key=_step)
    finetuned = reference(rows, split)
    if start and finetuned is not None and (not path or _step(path[0]) > 0):
        path.insert(0, {**finetuned, "method": method, "step": 0, "epoch": 0.0})
    return path


def final(rows: Sequence[Row], split: str, method: str) -> Row | None:
    """`method`'s row with the highest step on `split`."""
    path = trajectory(rows, split, method, start=False)
    return path[-1] if path else None


def has_key(rows: Sequence[Row], key: str) -> bool:
    return any(number(r, key) is not None for r in rows)


def leaderboard(
    rows: Sequence[Row], *, utility_ratio: float = UTILITY_RATIO
) -> list[dict[str, Any]]:
    """One row per (split, unlearning method), best first: the matched-utility leaderboard.

    The matched-utility rule: among a method's evaluated steps on a split, keep those whose model
    utility is at least `utility_ratio` (0.9) times the finetuned model's utility on that split, and
    pick the one with the highest forget quality (ties: the earlier step). If no step qualifies,
    pick the step with the highest model utility and flag the row (`matched` is False) — the method
    could not forget without losing more than 10% of the utility. If the split has no finetuned
    utility, the rule cannot apply: the highest forget quality wins, also flagged. Rows are sorted by
    forget quality, highest first (missing values last). Reference models are not ranked.

    Each row holds `method`, `split`, `step`, `forget_quality`, `model_utility`, `forget_rougeL`,
    `retain_rougeL` (plus `privleak` / `lume_final` when any results row has them), `matched`
    (bool) and `note` (why the row is flagged, or '').

    Rows from several unlearning seeds (a `seed` field, `study.seeds`): the rule picks the step on
    the seeds' mean trajectory (`seed_means`), the row shows those means (forget quality: the
    geometric mean), and the entry gains `seeds` (how many) and `intervals`: column key -> the
    95% bootstrap interval over seeds at that step (forget quality's on the log10 scale).
    """
    optional = [c for c in _OPTIONAL_COLUMNS if has_key(rows, c[1])]
    seeded = is_seeded(rows)
    means = seed_means(rows) if seeded else rows
    board: list[dict[str, Any]] = []
    for split in splits(means):
        finetuned = reference(means, split)
        base_utility = number(finetuned, "model_utility") if finetuned else None
        for method in methods(means):
            path = trajectory(means, split, method, start=False)
            if not path:
                continue
            chosen, matched, note = _choose(path, base_utility, utility_ratio)
            entry = {key: _value(chosen, source) for key, source, _ in (*_COLUMNS, *optional)}
            entry.update(matched=matched, note=note)
            if seeded:
                per_seed = _seed_rows(rows, split, method, _step(chosen))
                entry["seeds"] = len(per_seed)
                entry["intervals"] = {
                    key: found
                    for key, source, _ in (*_COLUMNS, *optional)
                    if key not in ("method", "split", "step")
                    and (found := seed_interval(per_seed, source)) is not None
                }
            board.append(entry)
    return sorted(board, key=_rank)


def reference_entries(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """The reference models (finetuned, retain, base) of every split as leaderboard entries:
    the same columns, step 0, never flagged; what the ranked methods are read against."""
    optional = [c for c in _OPTIONAL_COLUMNS if has_key(rows, c[1])]
    return [
        {
            **{key: _value(row, source) for key, source, _ in (*_COLUMNS, *optional)},
            "matched": True,
            "note": "",
        }
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


def is_seeded(rows: Sequence[Row]) -> bool:
    """Whether the rows come from a study with `study.seeds` (every method row carries `seed`)."""
    return any("seed" in r for r in rows)


def _seed_rows(rows: Sequence[Row], split: str, method: str, step: int) -> list[Row]:
    return [r for r in rows if r["split"] == split and r["method"] == method and _step(r) == step]


def seed_interval(rows: Sequence[Row], key: str) -> dict[str, float | int] | None:
    """Mean and 95% bootstrap interval of `key` over `rows` (one per seed); forget quality on
    the log10 scale. None when no row has a value."""
    from forgetbench.report.intervals import bootstrap_interval, log10_quality

    if key == "forget_quality":
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
        groups.setdefault((str(row["split"]), str(row["method"]), _step(row)), []).append(row)
    merged = []
    for group in groups.values():
        if len(group) == 1 and "seed" not in group[0]:
            merged.append(dict(group[0]))
            continue
        row = {k: v for k, v in group[0].items() if k != "seed"}
        for key in row:
            if key in _NOT_SCORES or as_number(row[key]) is None:
                continue
            found = seed_interval(group, key)
            mean = None if found is None else float(found["mean"])
            row[key] = 10**mean if key == "forget_quality" and mean is not None else mean
        merged.append(row)
    return merged


def seed_summary(rows: Sequence[Row], board: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """results.json's `seed_intervals`: for each leaderboard entry, at its chosen step, every
    numeric score's mean and 95% bootstrap interval over seeds (forget quality as
    `log10_forget_quality`)."""
    summary = []
    for entry in board:
        per_seed = _seed_rows(rows, entry["split"], entry["method"], entry["step"])
        keys = [k for k in dict.fromkeys(k for r in per_seed for k in r) if k not in _NOT_SCORES]
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


def board_cell(entry: Mapping[str, Any], key: str) -> str:
    """A leaderboard cell: the value, and with seeds its 95% interval in brackets (forget
    quality's interval back from the log10 scale it was computed on)."""
    text = format_cell(entry[key])
    found = entry.get("intervals", {}).get(key)
    if found is None or found["n"] < 2:
        return text
    low, high = found["low"], found["high"]
    if key == "forget_quality":
        low, high = 10**low, 10**high
    return f"{text} [{format_cell(low)}, {format_cell(high)}]"


def lume_mmlu_notes(rows: Sequence[Row]) -> list[str]:
    """One sentence per row whose LUME utility is an MMLU accuracy below SemEval-2025 Task 4's bar
    (`lume/mmlu_below_threshold`), naming the model (method, split, step when the row has them)."""
    from forgetbench.metrics.lume import MMLU_THRESHOLD

    notes = []
    for row in rows:
        if row.get("lume/mmlu_below_threshold") is not True:
            continue
        mmlu = number(row, "lume/utility")
        source = {"mmlu_lm_eval": "measured by lm-eval", "given": "given"}.get(
            str(row.get("lume/utility_source")), str(row.get("lume/utility_source"))
        )
        who = "the model"
        if row.get("method") is not None:
            who = f"{row['method']} on {row.get('split')}"
            who += f", step {_step(row)}" if _step(row) else ""
        notes.append(
            f"LUME: MMLU {format_cell(mmlu)} ({source}) of {who} is below {MMLU_THRESHOLD:g}, "
            "SemEval-2025 Task 4's utility bar: the challenge left such 7B submissions off its "
            "awards leaderboard, whatever their final score"
        )
    return notes


def leaderboard_columns(board: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(key, title) of the columns present in `board`, in display order."""
    keys = set(board[0]) if board else set()
    return [(key, title) for key, _, title in (*_COLUMNS, *_OPTIONAL_COLUMNS) if key in keys]


def format_cell(value: Any) -> str:
    """How a leaderboard cell is written (the terminal and the HTML page agree)."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3g}" if 0 < abs(value) < 1e-3 else f"{value:.4f}"
    return str(value)


# Column titles when the full ones do not fit the terminal; a key line under the table spells
# out the abbreviations.
_SHORT_TITLES = {
    "forget_quality": "FQ",
    "model_utility": "MU",
    "forget_rougeL": "F-RL",
    "retain_rougeL": "R-RL",
    "lume_final": "LUME",
}
_SHORT_KEY = "FQ = forget quality, MU = model utility, F-RL / R-RL = forget / retain ROUGE-L"


def print_leaderboard(board: Sequence[Mapping[str, Any]], console: Console | None = None) -> None:
    """The leaderboard as a rich table; flagged rows (utility not matched) carry a '*'.

    Nothing is ever cut (rich's default ellipsis turned 'grad_ascent' into 'grad_…' in a log and
    at 80 columns): written to a file or a pipe, the table takes the width it needs; in a
    terminal too narrow for it, it falls back to short titles and one table per split, then to
    one block per method whose 'title value' pairs wrap between pairs."""
    if console is None:
        console = Console()
        if not console.is_terminal:
            # A log file has no width: give the table what it needs (rich would assume 80).
            console = Console(width=max(_needed(console, _board_table(board)), 80))
    full = _board_table(board)
    if _needed(console, full) <= console.width:
        console.print(full)
    else:
        console.print(_title(board))
        narrow = [(s, _board_table(board, split=s)) for s in splits(board)]
        if all(_needed(console, table) <= console.width for _, table in narrow):
            for split, table in narrow:
                table.title = split
                console.print(table)
        else:
            _print_blocks(board, console)
        shown = {key for key, _ in leaderboard_columns(board)}
        console.print(_SHORT_KEY + (", LUME = LUME final" if "lume_final" in shown else ""))
    notes = sorted({e["note"] for e in board if e["note"]})
    for note in notes:
        console.print(f"* {note}")


def _title(board: Sequence[Mapping[str, Any]]) -> str:
    title = f"Leaderboard at matched utility (>= {UTILITY_RATIO:g} x finetuned)"
    if any("seeds" in e for e in board):
        title += ": mean over seeds [95% bootstrap CI]"
    return title


def _board_table(board: Sequence[Mapping[str, Any]], *, split: str | None = None) -> Table:
    """The whole leaderboard with full titles, or (`split` given) that split's rows with short
    titles and no borders, for a narrow terminal."""
    columns = leaderboard_columns(board)
    if split is None:
        table = Table(title=_title(board))
    else:
        columns = [(k, _SHORT_TITLES.get(k, t)) for k, t in columns if k != "split"]
        table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False)
    for key, column in columns:
        # fold, never ellipsis: a cell too long for its column wraps onto a second line whole.
        justify = "left" if key in ("method", "split") else "right"
        table.add_column(column, justify=justify, overflow="fold")
    for entry in board:
        if split is not None and entry["split"] != split:
            continue
        cells = [board_cell(entry, key) for key, _ in columns]
        if not entry["matched"]:
            cells[0] += " *"
        table.add_row(*cells)
    return table


def _needed(console: Console, table: Table) -> int:
    """The width `table` takes unwrapped."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update(width=10_000), table).maximum


def _print_blocks(board: Sequence[Mapping[str, Any]], console: Console) -> None:
    """One block per entry: method, split and step, then short 'title value' pairs, which hold
    no space inside a title, so a narrow terminal wraps between pairs (or inside an interval)."""
    columns = [(k, _SHORT_TITLES.get(k, t)) for k, t in leaderboard_columns(board)]
    for entry in board:
        flag = " *" if not entry["matched"] else ""
        console.print(f"{entry['method']}{flag} ({entry['split']}, step {entry['step']})")
        pairs = [
            f"{title} {board_cell(entry, key)}"
            for key, title in columns
            if key not in ("method", "split", "step")
        ]
        console.print("  " + "  ".join(pairs), highlight=False)


def choose(
    path: Sequence[Row], base_utility: float | None, ratio: float = UTILITY_RATIO
) -> tuple[Row, bool, str]:
    """The leaderboard's matched-utility rule over `path` (any rows, e.g. every step of every
    sweep trial): (chosen row, whether it keeps `ratio` x `base_utility`, note when not)."""
    return _choose(path, base_utility, ratio)


def _choose(path: Sequence[Row], base_utility: float | None, ratio: float) -> tuple[Row, bool, str]:
    def by_quality(row: Row) -> tuple[float, int]:
        return _or_low(number(row, "forget_quality")), -_step(row)

    if base_utility is None:
        return max(path, key=by_quality), False, "no finetuned utility on this split to match"
    bar = ratio * base_utility
    eligible = [r for r in path if (u := number(r, "model_utility")) is not None and u >= bar]
    if eligible:
        return max(eligible, key=by_quality), True, ""
    best = max(path, key=lambda r: (_or_low(number(r, "model_utility")), -_step(r)))
    return best, False, f"no step keeps {ratio:g} x the finetuned utility; highest-utility step"


def _value(row: Row, key: str) -> Any:
    if key in ("method", "split"):
        return str(row[key])
    if key == "step":
        return _step(row)
    return number(row, key)


def _rank(entry: Mapping[str, Any]) -> tuple[float, str, str]:
    return (-_or_low(entry["forget_quality"]), entry["split"], entry["method"])


def _or_low(value: float | None) -> float:
    return -math.inf if value is None else value


def _step(row: Row) -> int:
    step = row.get("step")
    return int(step) if isinstance(step, int | float) and not isinstance(step, bool) else 0
