"""The matched-utility leaderboard on hand-made rows."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from forgetbench.report.tables import print_leaderboard
from forgetbench.rows import leaderboard, trajectory


def _row(
    method: str, step: int, utility: float | None, quality: float | None, split: str = "forget10"
) -> dict:
    return {
        "split": split,
        "method": method,
        "step": step,
        "model_utility": utility,
        "forget_quality": quality,
    }


def _rows() -> list[dict]:
    # Finetuned utility 0.5, so the bar is 0.45.
    return [
        _row("finetuned", 0, 0.50, 1e-9),
        _row("retain", 0, 0.49, 1.0),
        # a: step 30 forgets best but drops under the bar; step 20 sits exactly on it and wins.
        _row("a", 10, 0.50, 1e-5),
        _row("a", 20, 0.45, 1e-2),
        _row("a", 30, 0.30, 0.5),
        # b: never keeps 90% of the utility -> its highest-utility step, flagged.
        _row("b", 10, 0.40, 0.9),
        _row("b", 20, 0.44, 0.1),
        # c: a missing forget quality never wins; equal forget quality -> the earlier step.
        _row("c", 10, 0.48, None),
        _row("c", 20, 0.47, 1e-3),
        _row("c", 30, 0.46, 1e-3),
    ]


def test_matched_utility_picks_the_best_forget_quality_above_the_bar():
    board = {e["method"]: e for e in leaderboard(_rows())}
    assert set(board) == {"a", "b", "c"}  # reference models are not ranked
    assert (board["a"]["step"], board["a"]["matched"], board["a"]["note"]) == (20, True, "")
    assert board["a"]["forget_quality"] == pytest.approx(1e-2)
    assert board["c"]["step"] == 20 and board["c"]["matched"]


def test_no_step_above_the_bar_takes_the_highest_utility_and_is_flagged():
    entry = next(e for e in leaderboard(_rows()) if e["method"] == "b")
    assert (entry["step"], entry["model_utility"], entry["matched"]) == (20, 0.44, False)
    assert "0.9" in entry["note"]


def test_sorted_by_forget_quality_descending_missing_last():
    rows = [*_rows(), _row("d", 10, 0.5, None)]
    assert [e["method"] for e in leaderboard(rows)] == ["b", "a", "c", "d"]


def test_the_bar_is_per_split():
    rows = [
        _row("finetuned", 0, 0.9, None, split="forget01"),
        _row("a", 10, 0.5, 0.3, split="forget01"),  # fine on forget10's bar, not on forget01's
        _row("finetuned", 0, 0.5, None),
        _row("a", 10, 0.5, 0.3),
    ]
    board = {e["split"]: e for e in leaderboard(rows)}
    assert not board["forget01"]["matched"] and board["forget10"]["matched"]


def test_without_a_finetuned_row_the_rule_cannot_apply():
    (entry,) = leaderboard([_row("a", 10, 0.1, 0.2), _row("a", 20, 0.05, 0.4)])
    assert entry["step"] == 20 and not entry["matched"] and "finetuned" in entry["note"]


def test_columns_and_optional_privleak():
    rows = _rows()
    entry = leaderboard(rows)[0]
    assert list(entry)[:7] == [
        "method",
        "split",
        "step",
        "forget_quality",
        "model_utility",
        "forget_rougeL",
        "retain_rougeL",
    ]
    assert "privleak" not in entry and entry["forget_rougeL"] is None
    rows[6]["privleak"] = -12.5
    rows[6]["forget/rougeL"] = 0.25
    entry = leaderboard(rows)[0]
    assert (entry["privleak"], entry["forget_rougeL"]) == (-12.5, 0.25)


def test_trajectory_starts_at_the_finetuned_model():
    steps = [r["step"] for r in trajectory(_rows(), "forget10", "a")]
    assert steps == [0, 10, 20, 30]
    assert trajectory(_rows(), "forget10", "a")[0]["model_utility"] == 0.50
    assert [r["step"] for r in trajectory(_rows(), "forget10", "a", start=False)] == [10, 20, 30]


def test_print_leaderboard_marks_flagged_rows():
    out = io.StringIO()
    print_leaderboard(leaderboard(_rows()), Console(file=out, width=200))
    text = out.getvalue()
    assert "b *" in text and "a *" not in text and "forget quality" in text


def test_lume_mmlu_notes_name_only_flagged_models():
    from forgetbench.report.tables import lume_mmlu_notes

    rows = [
        {"split": "forget10", "method": "npo", "step": 20, "lume/utility": 0.35,
         "lume/utility_source": "given", "lume/mmlu_below_threshold": True},
        {"split": "forget10", "method": "idk", "step": 20, "lume/utility": 0.40,
         "lume/utility_source": "given", "lume/mmlu_below_threshold": False},
        {"split": "forget10", "method": "finetuned", "step": 0, "lume/utility": 0.2,
         "lume/utility_source": "mini_background_mc", "lume/mmlu_below_threshold": None},
    ]  # fmt: skip
    (note,) = lume_mmlu_notes(rows)
    assert note.startswith("LUME: MMLU 0.3500 (given) of npo on forget10, step 20 is below 0.371")
    scores = {"lume/utility": 0.2, "lume/utility_source": "mmlu_lm_eval"}
    (note,) = lume_mmlu_notes([{**scores, "lume/mmlu_below_threshold": True}])  # one `eval`
    assert "MMLU 0.2000 (measured by lm-eval) of the model is below 0.371" in note


def _study_board(splits: tuple[str, ...] = ("forget10",)) -> list[dict]:
    """A leaderboard the size of the built-in study's: fifteen methods, PrivLeak and LUME final."""
    from forgetbench.methods import METHODS

    rows = []
    for split in splits:
        rows.append({**_row("finetuned", 0, 0.931, 5.57e-05, split), "privleak": -100.0})
        for i, method in enumerate(METHODS.names()):
            quality = 10.0 ** -(i % 5) * 0.1745
            rows.append({**_row(method, 25, 0.80 + 0.01 * i, quality, split),
                         "forget/rougeL": 0.033, "retain/rougeL": 0.7461, "privleak": 268.1159,
                         "lume/final": 0.5556 if i % 2 else None})  # fmt: skip
    return leaderboard(rows)


def _printed(board: list[dict], **console) -> list[str]:
    out = io.StringIO()
    print_leaderboard(board, Console(file=out, color_system=None, **console))
    return out.getvalue().splitlines()


def test_the_leaderboard_fits_80_columns_without_cutting_a_name():
    from forgetbench.methods import METHODS

    board = _study_board()
    lines = _printed(board, width=80, force_terminal=True)
    text = "\n".join(lines)
    assert max(len(line) for line in lines) <= 80
    assert "…" not in text
    # Every method whole, on one line with its numbers (a flagged one with its '*', and with
    # PrivLeak +268 its '!' of over-unlearning).
    for method in METHODS.names():
        assert re.search(rf"^{method}( \*)?( !)? +25 ", text, flags=re.M), method
    assert "FQ = forget quality" in text and "LUME = LUME final" in text
    # Two splits at 80 columns: one table per split, the split as its title.
    lines = _printed(_study_board(("forget05", "forget10")), width=80, force_terminal=True)
    assert [line.strip() for line in lines if line.strip().startswith("forget")][:2] == [
        "forget05",
        "forget10",
    ]


def test_a_very_narrow_terminal_gets_one_block_per_method():
    board = _study_board()
    lines = _printed(board, width=40, force_terminal=True)
    assert max(len(line) for line in lines) <= 40 and "…" not in "\n".join(lines)
    head = next(i for i, line in enumerate(lines) if line.startswith("grad_ascent"))
    assert lines[head].startswith("grad_ascent") and "(forget10, step 25)" in lines[head]
    assert "FQ " in lines[head + 1]


def test_the_leaderboard_in_a_log_file_is_full_width(capsys):
    # Piped or redirected (pytest captures stdout: not a terminal), nothing is cut or abbreviated.
    board = _study_board()
    print_leaderboard(board)
    text = capsys.readouterr().out
    assert "…" not in text
    for title in ("forget quality", "model utility", "forget ROUGE-L", "retain ROUGE-L"):
        assert title in text
    assert "grad_ascent" in text and "FQ =" not in text
    assert max(len(line) for line in text.splitlines()) > 80  # wider than rich's default
