"""The leaderboard as the terminal and the HTML page show it: cells, columns, notes and the rich
table. The arithmetic behind the rows (which step a method is judged at, seed means, intervals)
lives in `forgetbench.rows`, which the study shares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from forgetbench.lume_gate import NOISE, lume_noise
from forgetbench.metrics.lume import MMLU_THRESHOLD
from forgetbench.rows import (
    COLUMNS,
    OPTIONAL_COLUMNS,
    SETTINGS,
    UTILITY_RATIO,
    Row,
    as_number,
    number,
    splits,
    step_of,
)


def board_cell(entry: Mapping[str, Any], key: str) -> str:
    """A leaderboard cell: the value, and with seeds its 95% interval in brackets (forget
    quality's interval back from the log10 scale it was computed on)."""
    text = format_privleak(entry[key]) if key == "privleak" else format_cell(entry[key])
    found = entry.get("intervals", {}).get(key)
    if found is None or found["n"] < 2:
        spread = entry.get("forget_quality_range") if key == "forget_quality" else None
        if spread and entry[key] is not None:
            return f"{text} [{format_cell(spread[0])}, {format_cell(spread[1])}]"
        return text
    low, high = found["low"], found["high"]
    if key == "forget_quality":
        low, high = 10**low, 10**high
    return f"{text} [{format_cell(low)}, {format_cell(high)}]"


def lume_mmlu_notes(rows: Sequence[Row]) -> list[str]:
    """One sentence per row whose LUME utility is an MMLU accuracy below SemEval-2025 Task 4's bar
    (`lume/mmlu_below_threshold`), naming the model (method, split, step when the row has them)."""
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
            who += f", step {step_of(row)}" if step_of(row) else ""
        notes.append(
            f"LUME: MMLU {format_cell(mmlu)} ({source}) of {who} is below {MMLU_THRESHOLD:g}, "
            "SemEval-2025 Task 4's utility bar: the challenge left such 7B submissions off its "
            "awards leaderboard, whatever their final score"
        )
    return notes


def leaderboard_columns(board: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(key, title) of the columns present in `board`, in display order."""
    keys = set(board[0]) if board else set()
    return [(key, title) for key, _, title in (*COLUMNS, *OPTIONAL_COLUMNS) if key in keys]


def without_noise(
    entries: Sequence[Mapping[str, Any]], validity: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """Leaderboard entries without their LUME final score where the validity block found it noise
    (`forgetbench.lume_gate`): a column of noise would read as a ranking."""
    if not any(c["status"] == NOISE for c in lume_noise(validity)):
        return [dict(e) for e in entries]
    return [{k: v for k, v in e.items() if k != "lume_final"} for e in entries]


def format_privleak(value: Any) -> str:
    """PrivLeak is a percentage in [-100, inf): one decimal and its sign, which is its reading
    (MUSE: negative = the forget set still looks seen, positive = over-unlearned)."""
    found = as_number(value)
    return "—" if found is None else f"{found:+.1f}"


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


def board_caption(board: Sequence[Mapping[str, Any]]) -> str:
    """How the leaderboard's step and forget quality were chosen, in one sentence."""
    if any(e.get("selection") == "halves" for e in board):
        return (
            "Each method's step is chosen on the even-numbered forget questions; its forget "
            "quality is the KS p-value on the odd-numbered ones, never used to choose it "
            "[95% bootstrap interval over those questions]."
        )
    return (
        "Each method's step is chosen on the forget quality it shows (these rows have no "
        "held-out half): the best of several noisy p-values over the same questions."
    )


def over_unlearning_notes(board: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per over-unlearnt leaderboard entry: which tests it fails, with the numbers."""
    return [
        f"! {e['method']} ({e['split']}, step {e['step']}) over-unlearnt: "
        + "; ".join(test["text"] for test in e["over_unlearning"])
        for e in board
        if e.get("over_unlearning")
    ]


def method_cell(entry: Mapping[str, Any]) -> str:
    """The method's name, '*' when utility is not matched, '!' when over-unlearnt."""
    marks = ("" if entry["matched"] else " *") + (" !" if entry.get("over_unlearning") else "")
    return f"{entry['method']}{marks}"


def print_leaderboard(
    board: Sequence[Mapping[str, Any]],
    console: Console | None = None,
    *,
    references: Sequence[Mapping[str, Any]] = (),
) -> None:
    """The leaderboard as a rich table, the reference models (`references`: finetuned, retain,
    base) first and dimmed; flagged rows (utility not matched) carry a '*', over-unlearnt ones a
    '!' with the numbers under the table.

    Nothing is ever cut (rich's default ellipsis turned 'grad_ascent' into 'grad_…' in a log and
    at 80 columns): written to a file or a pipe, the table takes the width it needs; in a
    terminal too narrow for it, it falls back to short titles and one table per split, then to
    one block per method whose 'title value' pairs wrap between pairs."""
    shown_board = [*references, *board]
    if console is None:
        console = Console()
        if not console.is_terminal:
            # A log file has no width: give the table what it needs (rich would assume 80).
            console = Console(width=max(_needed(console, _board_table(shown_board, board)), 80))
    full = _board_table(shown_board, board)
    if _needed(console, full) <= console.width:
        console.print(full)
    else:
        console.print(_title(board))
        narrow = [(s, _board_table(shown_board, board, split=s)) for s in splits(shown_board)]
        if all(_needed(console, table) <= console.width for _, table in narrow):
            for split, table in narrow:
                table.title = split
                console.print(table)
        else:
            _print_blocks(shown_board, console)
        shown = {key for key, _ in leaderboard_columns(board)}
        console.print(_SHORT_KEY + (", LUME = LUME final" if "lume_final" in shown else ""))
    if board:
        console.print(board_caption(board), highlight=False)
    if references:
        console.print("Dimmed: the reference models (finetuned, retain, base), not ranked.")
    notes = sorted({e["note"] for e in board if e["note"]})
    for note in notes:
        console.print(f"* {note}")
    for line in over_unlearning_notes(board):
        console.print(line, highlight=False)
    for line in tie_notes(board):
        console.print(line, highlight=False)


def tie_notes(board: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per group of methods tied on forget quality within a split: their order in the
    table (by name) ranks nothing."""
    groups: dict[tuple[str, float], list[str]] = {}
    for entry in board:
        quality = entry.get("forget_quality")
        if isinstance(quality, float | int):
            groups.setdefault((entry["split"], quality), []).append(str(entry["method"]))
    return [
        f"tied on {split} at forget quality {format_cell(quality)}: {', '.join(names)}"
        for (split, quality), names in groups.items()
        if len(names) > 1
    ]


def _title(board: Sequence[Mapping[str, Any]]) -> str:
    title = f"Leaderboard at matched utility (>= {UTILITY_RATIO:g} x finetuned)"
    if any("seeds" in e for e in board):
        title += ": mean over seeds [95% bootstrap CI]"
    return title


def _board_table(
    board: Sequence[Mapping[str, Any]],
    ranked: Sequence[Mapping[str, Any]] = (),
    *,
    split: str | None = None,
) -> Table:
    """The whole leaderboard with full titles, or (`split` given) that split's rows with short
    titles and no borders, for a narrow terminal. Entries not in `ranked` (the reference
    models) are dimmed."""
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
        cells[0] = method_cell(entry)
        table.add_row(*cells, style=None if not ranked or entry in ranked else "dim")
    return table


def _needed(console: Console, table: Table) -> int:
    """The width `table` takes unwrapped."""
    return Measurement.get(console, console.options.update(width=10_000), table).maximum


def _print_blocks(board: Sequence[Mapping[str, Any]], console: Console) -> None:
    """One block per entry: method, split and step, then short 'title value' pairs, which hold
    no space inside a title, so a narrow terminal wraps between pairs (or inside an interval)."""
    columns = [(k, _SHORT_TITLES.get(k, t)) for k, t in leaderboard_columns(board)]
    for entry in board:
        console.print(f"{method_cell(entry)} ({entry['split']}, step {entry['step']})")
        pairs = [
            f"{title} {board_cell(entry, key)}"
            for key, title in columns
            if key not in ("method", "split", "step")
        ]
        console.print("  " + "  ".join(pairs), highlight=False)


# The settings columns of the Configuration section, in order; a method's own options follow in
# one cell ("method options"), since each method has its own.
_SETTINGS_TITLES = {
    "finetune_lr": "finetune lr",
    "finetune_epochs": "finetune epochs",
    "finetune_batch_size": "finetune batch",
    "unlearn_preset": "unlearn preset",
    "unlearn_lr": "unlearn lr",
    "unlearn_epochs": "unlearn epochs",
    "unlearn_batch_size": "unlearn batch",
    "unlearn_lora": "LoRA",
    "plugin_digest": "plugin file (sha256)",
}


def settings_table(rows: Sequence[Row]) -> tuple[list[str], list[list[str]]]:
    """(head, body): the settings each model was trained with (its rows' `settings/` keys), one
    line per split and model: the reference models' finetuning, each method's unlearning run
    with every option in force. Empty when no row records them."""
    lines: dict[tuple[str, str], Row] = {}
    for row in rows:
        if any(key.startswith(SETTINGS) for key in row):
            lines.setdefault((str(row["split"]), str(row["method"])), row)
    if not lines:
        return [], []
    present = {key.removeprefix(SETTINGS) for row in lines.values() for key in row}
    shown = [key for key in _SETTINGS_TITLES if key in present]
    options = any(key.startswith(f"{SETTINGS}method.") for row in lines.values() for key in row)
    head = ["split", "model", *(_SETTINGS_TITLES[key] for key in shown)]
    head += ["method options"] if options else []
    body = []
    for (split, method), row in lines.items():
        cells = [split, method]
        for key in shown:
            value = row.get(f"{SETTINGS}{key}")
            cells.append("—" if value is None else str(value))
        if options:
            cells.append(", ".join(
                f"{key.removeprefix(f'{SETTINGS}method.')}={value}"
                for key, value in row.items() if key.startswith(f"{SETTINGS}method.")
            ) or "—")  # fmt: skip
        body.append(cells)
    return head, body
