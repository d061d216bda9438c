"""The leaderboard's step rule (chosen on one half of the forget questions, reported on the
other) and its over-unlearning tests, on hand-made rows; and how the terminal shows them."""

from __future__ import annotations

import io

from rich.console import Console

from forgetbench.report.tables import print_leaderboard
from forgetbench.rows import leaderboard, leaderboard_record, reference_entries


def _row(method: str, step: int, full: float, select: float, held: float, **more) -> dict:
    return {
        "split": "forget10", "method": method, "step": step, "model_utility": 0.5,
        "forget_quality": full, "forget_quality/selection": select,
        "forget_quality/held_out": held, "forget_quality/held_out_low": held / 10,
        "forget_quality/held_out_high": min(1.0, held * 5), "forget/rougeL": 0.40,
        "forget/degenerate": 0.0, "privleak": 2.0, **more,
    }  # fmt: skip


def _rows() -> list[dict]:
    return [
        _row("finetuned", 0, 1e-6, 1e-4, 1e-3),
        _row("retain", 0, 1.0, 1.0, 1.0, **{"forget/rougeL": 0.42}),
        # Step 10 has the best forget quality on every question and on the held-out half, but
        # the selection half prefers step 20: the step shown is 20, at its held-out 0.05.
        _row("a", 10, 0.6, 0.1, 0.7),
        _row("a", 20, 0.2, 0.3, 0.05),
        # b forgets "best" by breaking: ROUGE-L far below the retain model's, PrivLeak +314,
        # nine generations in ten degenerate.
        _row(
            "b",
            10,
            0.08,
            0.5,
            0.4,
            **{"forget/rougeL": 0.008, "privleak": 314.0, "forget/degenerate": 0.9},
        ),  # fmt: skip
    ]


def test_the_step_is_chosen_on_one_half_and_reported_on_the_other():
    board = {e["method"]: e for e in leaderboard(_rows())}
    # On the old rule (every question chooses and reports) a would show step 10 at 0.6.
    assert board["a"]["step"] == 20 and board["a"]["forget_quality"] == 0.05
    assert board["a"]["forget_quality_range"] == [0.005, 0.25]
    assert board["a"]["selection"] == "halves"
    assert [e["method"] for e in leaderboard(_rows())] == ["b", "a"]  # ranked by the held-out
    references = {e["method"]: e for e in reference_entries(_rows())}
    assert references["finetuned"]["forget_quality"] == 1e-3  # the same measure as the methods


def test_rows_without_halves_are_chosen_on_every_question_and_say_so():
    old = [{k: v for k, v in r.items() if not k.startswith("forget_quality/")} for r in _rows()]
    board = {e["method"]: e for e in leaderboard(old)}
    assert board["a"]["step"] == 10 and board["a"]["forget_quality"] == 0.6
    assert board["a"]["selection"] == "all" and board["a"]["forget_quality_range"] is None
    assert leaderboard_record(old)["selection"] == "all"


def test_over_unlearning_is_flagged_with_its_numbers():
    board = {e["method"]: e for e in leaderboard(_rows())}
    assert board["a"]["over_unlearning"] == []
    tests = {t["test"]: t for t in board["b"]["over_unlearning"]}
    assert set(tests) == {"forget_rougeL", "privleak", "degenerate"}
    assert (tests["forget_rougeL"]["value"], tests["forget_rougeL"]["retain"]) == (0.008, 0.42)
    assert tests["forget_rougeL"]["bar"] == 0.21
    assert "forget ROUGE-L 0.008 < 0.5 x the retain model's 0.420" in tests["forget_rougeL"]["text"]
    assert "PrivLeak +314.0 > +50" in tests["privleak"]["text"]
    assert "90% of forget-set generations degenerate" in tests["degenerate"]["text"]
    # Just inside every bar: not flagged.
    rows = _rows()
    rows[-1].update({"forget/rougeL": 0.21, "privleak": 50.0, "forget/degenerate": 0.49})
    assert next(e for e in leaderboard(rows) if e["method"] == "b")["over_unlearning"] == []
    record = leaderboard_record(_rows())
    assert record["over_unlearning_bars"] == {
        "forget_rougeL_ratio": 0.5, "privleak": 50.0, "degenerate": 0.5,
    }  # fmt: skip
    assert "chosen on half of the forget questions" in record["rule"]
    assert [e["method"] for e in record["references"]] == ["finetuned", "retain"]


def test_the_terminal_shows_the_references_the_rule_and_the_flags():
    out = io.StringIO()
    rows = _rows()
    print_leaderboard(
        leaderboard(rows), Console(file=out, width=200), references=reference_entries(rows)
    )
    text = out.getvalue()
    assert "finetuned" in text and "retain" in text  # the references' rows
    assert "b !" in text and "a !" not in text
    assert "! b (forget10, step 10) over-unlearnt: forget ROUGE-L 0.008" in text
    assert "PrivLeak +314.0 > +50" in text
    assert "0.0500 [0.0050, 0.2500]" in text  # a's held-out forget quality and its interval
    assert "chosen on the even-numbered forget questions" in text


def test_the_report_shows_the_rule_the_flags_and_every_setting():
    from forgetbench.report.html import render_html
    from forgetbench.results import Results

    recipe = {"settings/finetune_lr": 0.002, "settings/finetune_epochs": 30}
    rows = [{**r, **recipe} for r in _rows()]
    for row in rows[2:]:
        row.update({"settings/unlearn_preset": "mini", "settings/unlearn_lr": 0.001,
                    "settings/method.beta": 0.1, "settings/plugin_digest": "0123abcd"})  # fmt: skip
    page = render_html(Results.model_validate({"rows": rows, "config": {"unlearn": {"lr": None}}}))
    assert "chosen on the even-numbered forget questions" in page
    assert "over-unlearnt: forget ROUGE-L 0.008 &lt; 0.5 x the retain model&#39;s 0.420" in page
    settings = page[page.index("Settings in force") :]
    assert "<th>unlearn lr</th>" in settings and "<th>plugin file (sha256)</th>" in settings
    assert '<td class="num">0.001</td>' in settings and "beta=0.1" in settings
    assert '<td class="num">0.002</td>' in settings  # the finetuning recipe, on every model
