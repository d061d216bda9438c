"""The validity gates (forgetbench.validity): a study whose finetuned model cannot be told apart
from the retain model, never learnt the forget set or has no utility must say so, and rank nothing.
Hand-made rows, plus the golden tiny study's own rows, which must pass every gate."""

from __future__ import annotations

import json

import pytest

from forgetbench.report.validity import verdict
from forgetbench.rows import tie_ranks
from forgetbench.validity import check_gaps, check_validity, failed_checks, ranks
from golden_results import golden_files


def _row(method: str, **scores: float) -> dict:
    return {"split": "forget10", "method": method, "step": 0, **scores}


# The newcomer's study: a GPT-2-style model that learnt nothing (forget quality of the finetuned
# model 0.91, utility 0 because its Real Authors ROUGE-L is 0).
NEWCOMER = [
    _row(
        "retain",
        forget_quality=1.0,
        model_utility=0.0,
        **{"forget/rougeL": 0.05, "forget/probability": 0.001},
    ),  # fmt: skip
    _row(
        "finetuned",
        forget_quality=0.91,
        model_utility=0.0,
        **{
            "forget/rougeL": 0.06,
            "forget/probability": 0.0012,
            "real_authors/rougeL": 0.0,
            "retain/rougeL": 0.1,
        },
    ),  # fmt: skip
    {"split": "forget10", "method": "npo", "step": 5, "forget_quality": 1.0, "model_utility": 0.0},
]


def _statuses(validity: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in validity["splits"]["forget10"]["checks"]}


def test_a_model_that_learnt_nothing_fails_every_gate_with_its_numbers():
    validity = check_validity(NEWCOMER)
    assert not validity["valid"] and not ranks(validity)
    assert _statuses(validity) == {"distinguishable": "fail", "learnt": "fail", "utility": "fail"}
    assert failed_checks(validity) == [
        "forget10/distinguishable",
        "forget10/learnt",
        "forget10/utility",
    ]
    checks = {c["name"]: c for c in validity["splits"]["forget10"]["checks"]}
    assert "forget quality is 0.91, not below 0.05" in checks["distinguishable"]["finding"]
    assert checks["learnt"]["finding"] == (
        "forget10: the finetuned model answers the forget set no better than the retain model "
        "(rougeL 0.060 vs 0.050, probability 0.001 vs 0.001; it must be 0.1 above on one)"
    )
    assert "never learnt the forget set" in checks["learnt"]["meaning"]
    assert "docs/your-model.md" in checks["learnt"]["todo"]
    # Which of the nine utility inputs is the zero that makes the harmonic mean zero.
    assert checks["utility"]["finding"] == (
        "forget10: the finetuned model's model utility is 0 (real_authors/rougeL is 0)"
    )
    assert verdict(validity).startswith("This study cannot rank methods")


def test_each_gate_on_its_own_bar():
    learnt = {"forget/rougeL": 0.9, "forget/probability": 0.8}
    retain = _row("retain", forget_quality=1.0, **{"forget/rougeL": 0.4,
                  "forget/probability": 0.05})  # fmt: skip
    good = _row("finetuned", forget_quality=1e-4, model_utility=0.5, **learnt)
    assert check_validity([retain, good])["valid"]
    # At the bar: 0.05 is not below 0.05.
    at_bar = {**good, "forget_quality": 0.05}
    assert _statuses(check_validity([retain, at_bar]))["distinguishable"] == "fail"
    # Learnt by probability alone (ROUGE-L 0.05 above) still learnt; both below the margin not.
    by_probability = {**good, "forget/rougeL": 0.45}
    assert _statuses(check_validity([retain, by_probability]))["learnt"] == "pass"
    neither = {**good, "forget/rougeL": 0.45, "forget/probability": 0.14}
    assert _statuses(check_validity([retain, neither]))["learnt"] == "fail"


def test_without_a_retain_model_the_gates_are_unknown_not_passed():
    finetuned = _row("finetuned", model_utility=0.5, **{"forget/rougeL": 0.9})
    validity = check_validity([finetuned, {**finetuned, "method": "npo", "step": 5}])
    assert _statuses(validity) == {
        "distinguishable": "unknown",
        "learnt": "unknown",
        "utility": "pass",
    }
    # Unknown is said, but does not withhold the ranking: nothing failed.
    assert not validity["valid"] and ranks(validity)
    assert "could not be checked" in verdict(validity)


@pytest.mark.parametrize("path", golden_files(), ids=lambda p: p.name)
def test_the_built_in_tiny_study_passes_every_gate(path):
    rows = list(json.loads(path.read_text())["rows"].values())
    validity = check_validity(rows)
    assert validity["valid"], failed_checks(validity)
    assert verdict(validity).startswith("Validity gates: all pass")


def test_a_document_benchmarks_gaps_and_utility_floor():
    gaps, floors = [("muse/verbmem_f", 10.0, "VerbMem")], [("muse/knowmem_r", 10.0, "KnowMem")]
    rows = [_row("retain", **{"muse/verbmem_f": 25.5, "muse/knowmem_r": 7.1}),
            _row("finetuned", **{"muse/verbmem_f": 59.2, "muse/knowmem_r": 1.25})]  # fmt: skip
    validity = check_gaps(rows, gaps, floors)
    # 59.2 - 25.5 >= 10 learnt; 1.25 < 10: the utility criteria would judge noise.
    assert _statuses(validity) == {"learnt": "pass", "utility": "fail"}
    assert failed_checks(validity) == ["forget10/utility"] and not validity["valid"]
    utility = validity["splits"]["forget10"]["checks"][1]
    assert utility["numbers"] == {"key": "muse/knowmem_r", "finetuned": 1.25, "floor": 10.0}
    assert "1.25, below 10" in utility["finding"] and "—" in utility["meaning"]
    rows[1]["muse/knowmem_r"] = 10.0  # at the floor: judged
    assert _statuses(check_gaps(rows, gaps, floors)) == {"learnt": "pass", "utility": "pass"}
    del rows[1]["muse/knowmem_r"]
    assert _statuses(check_gaps(rows, gaps, floors))["utility"] == "unknown"
    assert _statuses(check_gaps(rows, gaps)) == {"learnt": "pass"}  # no floor, no check


def test_two_failed_gaps_of_one_split_are_one_failed_check():
    gaps = [("muse/verbmem_f", 10.0, "VerbMem"), ("muse/mia/min_k", 0.1, "Min-K% AUC")]
    rows = [_row("retain", **{"muse/verbmem_f": 25.0, "muse/mia/min_k": 0.5}),
            _row("finetuned", **{"muse/verbmem_f": 30.0, "muse/mia/min_k": 0.55})]  # fmt: skip
    validity = check_gaps(rows, gaps)
    checks = validity["splits"]["forget10"]["checks"]
    assert [(c["name"], c["status"]) for c in checks] == [("learnt", "fail"), ("learnt", "fail")]
    assert validity["failed"] == failed_checks(validity) == ["forget10/learnt"]


def test_ties_on_forget_quality_share_a_rank():
    board = [
        {"split": "forget10", "method": m, "forget_quality": q}
        for m, q in (("a", 0.004), ("b", 0.004), ("c", 0.0011), ("d", None))
    ] + [{"split": "forget05", "method": "a", "forget_quality": 0.1}]
    assert tie_ranks(board) == ["1=", "1=", "3", "—", "1"]


def _lume(method: str, step: int, task: float, final: float, **more: float) -> dict:
    return {**_row(method, **more), "step": step, "lume/task_aggregate": task, "lume/final": final}


def test_lume_final_is_noise_where_its_tasks_see_nothing_or_the_finetuned_model_wins():
    from forgetbench.lume_gate import lume_noise

    # The tiny miniature's numbers: every task aggregate 0, the finetuned model above the retain.
    tiny = [_lume("finetuned", 0, 0.0, 0.5926), _lume("retain", 0, 0.0, 0.5185185),
            _lume("npo", 10, 0.0, 0.4444)]  # fmt: skip
    validity = check_validity(tiny)
    gate = validity["lume_final"]["forget10"]
    assert gate["status"] == "noise" and lume_noise(validity) == [gate]
    assert gate["finding"] == (
        "forget10: LUME final is noise here: its tasks do not tell the two models apart (< 0.05) "
        "and the finetuned model scores at or above the retain model, its target; final 0.593 "
        "vs 0.519, task aggregate 0.000 vs 0.000 (finetuned vs retain)"
    )
    assert gate["numbers"]["finetuned_final"] == 0.5926
    # It withholds no ranking: forget quality still ranks (the three gates are not LUME's).
    assert ranks(validity) and "lume_final" not in str(failed_checks(validity))
    # Tasks that tell the models apart, the retain model above: judged, not noise.
    judged = check_validity([_lume("finetuned", 0, 0.1, 0.4), _lume("retain", 0, 0.3, 0.6)])
    assert judged["lume_final"]["forget10"]["status"] == "pass"
    assert lume_noise(judged) == []
    # Each reason on its own makes it noise.
    winner = check_validity([_lume("finetuned", 0, 0.1, 0.7), _lume("retain", 0, 0.3, 0.6)])
    assert winner["lume_final"]["forget10"]["status"] == "noise"
    flat = check_validity([_lume("finetuned", 0, 0.3, 0.4), _lume("retain", 0, 0.32, 0.6)])
    assert "do not tell the two models apart" in flat["lume_final"]["forget10"]["finding"]
    # Without a retain model it is unknown; without LUME scores there is no verdict at all.
    alone = check_validity([_lume("finetuned", 0, 0.0, 0.5)])
    assert alone["lume_final"]["forget10"]["status"] == "unknown"
    assert "lume_final" not in check_validity(NEWCOMER)


def test_a_noisy_lume_final_leaves_the_leaderboard_and_is_said_in_the_gates(tmp_path):
    from rich.console import Console

    from forgetbench.report.html import render_html
    from forgetbench.report.tables import print_leaderboard, without_noise
    from forgetbench.report.validity import print_validity
    from forgetbench.results import Results
    from forgetbench.rows import leaderboard, reference_entries

    learnt = {"forget/rougeL": 0.9, "forget/probability": 0.8, "model_utility": 0.5}
    rows = [
        _lume("finetuned", 0, 0.0, 0.5926, forget_quality=1e-4, **learnt),
        _lume("retain", 0, 0.0, 0.5185185, forget_quality=1.0, model_utility=0.5,
              **{"forget/rougeL": 0.4, "forget/probability": 0.05}),
        _lume("npo", 10, 0.0, 0.4444, forget_quality=0.2, model_utility=0.48),
    ]  # fmt: skip
    validity = check_validity(rows)
    console = Console(record=True, width=300)
    print_validity(validity, console=console)
    print_leaderboard(without_noise(leaderboard(rows), validity), console,
                      references=without_noise(reference_entries(rows), validity))  # fmt: skip
    text = console.export_text()
    assert "LUME NOISE: forget10: LUME final is noise here" in text
    assert "LUME" not in text.split("LUME NOISE")[1].split("\n", 2)[2]  # no LUME column
    assert "0.4444" not in text and "0.2000" in text
    page = render_html(Results.model_validate({"rows": rows, "validity": validity}))
    assert "<b>LUME NOISE</b>: forget10: LUME final is noise here" in page
    assert "<th>LUME final</th>" not in page and "0.4444" not in page
    # Judged LUME keeps its column.
    judged = [{**r, "lume/task_aggregate": t} for r, t in zip(rows, (0.1, 0.3, 0.2), strict=True)]
    judged[1]["lume/final"] = 0.7
    page = render_html(Results.model_validate({"rows": judged, "validity": check_validity(judged)}))
    assert "<th>LUME final</th>" in page and "0.4444" in page
