"""results.json through its model: every value round-trips unchanged, the study writes through it,
and a bad file is one sentence naming the file and the field."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from forgetbench.errors import DataError
from forgetbench.results import Results, load_results
from forgetbench.study.written import write_results
from golden_results import golden_files

# A row as the study writes it: fixed fields, metric columns of every kind, the log folder last.
ROW = {
    "split": "forget10",
    "method": "npo",
    "step": 5,
    "epoch": 0.5,
    "forget/rougeL": 0.25,
    "forget/questions": 20,
    "forget_quality": math.nan,
    "lume/utility_source": "mini_background_mc",
    "lume/mmlu_below_threshold": None,
    "retain_ks_pvalue": 1,
    "log": "logs/forget10/npo/step-5",
}


def _folder(tmp_path: Path, results: object) -> Path:
    (tmp_path / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("golden", golden_files(), ids=lambda p: p.name)
def test_the_golden_results_round_trip_unchanged(golden):
    # The golden copy keys rows and examples by what they are (tests/golden_results.py); a
    # results.json lists them.
    results = json.loads(golden.read_text(encoding="utf-8"))
    results["rows"] = list(results["rows"].values())
    results["examples"] = list(results["examples"].values())
    dumped = Results.model_validate(results).dump()
    assert json.dumps(dumped, sort_keys=True) == json.dumps(results, sort_keys=True)


def test_a_row_keeps_its_key_order_and_value_types():
    (row,) = Results.model_validate({"rows": [ROW]}).dump()["rows"]
    assert list(row) == list(ROW)  # results.csv's columns follow this order
    assert type(row["forget/questions"]) is int and type(row["retain_ks_pvalue"]) is int
    assert math.isnan(row["forget_quality"])
    assert {k: v for k, v in row.items() if k != "forget_quality"} == {
        k: v for k, v in ROW.items() if k != "forget_quality"
    }


def test_unknown_keys_are_kept(tmp_path: Path):
    results = {"rows": [{**ROW, "future/thing": "text"}], "x": {"nested": [1]}}
    results["rows"][0]["forget_quality"] = 0.5
    assert load_results(_folder(tmp_path, results)).dump() == results


def test_the_study_writes_through_the_model(tmp_path: Path):
    results = {"seed": 0, "timings": {"total": 1.5}, "rows": [ROW, {**ROW, "step": 10}]}
    write_results(tmp_path, results)
    written = (tmp_path / "results.json").read_text(encoding="utf-8")
    assert written == json.dumps(results, indent=2, ensure_ascii=False) + "\n"
    with (tmp_path / "results.csv").open(encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    # The row's keys in order, with the leaderboard's mark just before the log folder.
    assert table[0] == [*list(ROW)[:-1], "leaderboard", "log"] and len(table) == 3


def _board_row(method: str, step: int, utility: float, quality: float, **extra) -> dict:
    return {"split": "forget10", "method": method, "step": step, "model_utility": utility,
            "forget_quality": quality, **extra, "log": f"logs/forget10/{method}/step-{step}"}  # fmt: skip


def test_results_csv_marks_the_leaderboards_step_so_it_can_be_rebuilt(tmp_path: Path):
    from forgetbench.rows import leaderboard

    # Finetuned utility 0.5, bar 0.45: npo's step 10 forgets best above the bar (step 15 is
    # below it); idk never reaches the bar, so its highest-utility step 5 is chosen, flagged.
    rows = [
        _board_row("finetuned", 0, 0.5, 1e-6),
        _board_row("retain", 0, 0.49, 1.0),
        _board_row("npo", 5, 0.5, 1e-4),
        _board_row("npo", 10, 0.46, 1e-2),
        _board_row("npo", 15, 0.30, 0.5),
        _board_row("idk", 5, 0.44, 1e-5),
        _board_row("idk", 10, 0.40, 1e-3),
    ]
    write_results(tmp_path, {"rows": rows})
    with (tmp_path / "results.csv").open(encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    marks = {(r["method"], int(r["step"])): r["leaderboard"] for r in table}
    assert marks == {("finetuned", 0): "", ("retain", 0): "", ("npo", 5): "False",
                     ("npo", 10): "True", ("npo", 15): "False", ("idk", 5): "True",
                     ("idk", 10): "False"}  # fmt: skip
    # The leaderboard from the CSV alone: the marked rows, best forget quality first.
    rebuilt = sorted(
        (r for r in table if r["leaderboard"] == "True"), key=lambda r: -float(r["forget_quality"])
    )
    board = leaderboard(rows)
    assert [(r["method"], int(r["step"])) for r in rebuilt] == [
        (e["method"], e["step"]) for e in board
    ]
    assert [e["step"] for e in board] == [10, 5]


def test_identical_splits_point_at_logs_under_their_own_names(tmp_path: Path):
    from forgetbench.study.tofu import _logs_under_own_names

    (tmp_path / "logs" / "forget10" / "npo" / "step-5").mkdir(parents=True)
    (tmp_path / "logs" / "forget10" / "npo" / "step-5" / "summary.json").write_text("{}")
    # forget01 and forget05 were computed as forget10; forget05 already has a real folder (an
    # older study): its rows keep the computed split's folder, which exists.
    (tmp_path / "logs" / "forget05").mkdir()
    rows = [
        {"split": s, "method": "npo", "step": 5, "log": "logs/forget10/npo/step-5"}
        for s in ("forget01", "forget05", "forget10")
    ]
    same = {"forget01": "forget10", "forget05": "forget10"}
    done = _logs_under_own_names(tmp_path, same, rows)
    assert [r["log"] for r in done] == [
        "logs/forget01/npo/step-5",
        "logs/forget10/npo/step-5",
        "logs/forget10/npo/step-5",
    ]
    assert all((tmp_path / r["log"] / "summary.json").is_file() for r in done)
    assert (tmp_path / "logs" / "forget01").readlink() == Path("forget10")  # relative: movable
    # Run again into the same folder: the link is replaced, not nested.
    assert _logs_under_own_names(tmp_path, same, rows) == done


def test_the_study_refuses_to_write_a_row_the_report_could_not_read(tmp_path: Path):
    with pytest.raises(ValidationError):
        write_results(tmp_path, {"rows": [{**ROW, "forget/rougeL": "0.25"}]})
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        ([], "results.json: the top level is [], expected a JSON object"),
        ({"seed": 0}, "results.json has no 'rows'"),
        ({"rows": []}, "results.json: 'rows' is [], expected a non-empty list"),
        ({"rows": [{"split": "forget10"}]}, "results.json: rows[0] has no 'method'"),
        (
            {"rows": [ROW, {**ROW, "forget/rougeL": "high"}]},
            "results.json: rows[1]['forget/rougeL'] is 'high', expected a number or null",
        ),
        ({"rows": [{**ROW, "step": 2.5}]}, "rows[0]['step'] is 2.5, expected an integer"),
        ({"rows": [{**ROW, "epoch": True}]}, "rows[0]['epoch'] is True, expected a number"),
        ({"rows": [{**ROW, "method": ""}]}, "rows[0]['method'] is '', expected a non-empty name"),
        ({"rows": [{**ROW, "extra": [1, 2]}]}, "rows[0]['extra'] is [1, 2], expected a number, a"),
        ({"rows": [ROW], "examples": [1]}, "examples[0] is 1, expected a JSON object"),
        (
            {"rows": [ROW], "examples": [{"split": "f", "method": "npo", "question": 3}]},
            "examples[0]['question'] is 3, expected a string",
        ),
        ({"rows": [ROW], "timings": {"eval": "slow"}}, "timings['eval'] is 'slow', expected a"),
        ({"rows": [ROW], "metric_versions": []}, "'metric_versions' is [], expected a JSON"),
        ({"rows": [ROW], "seed": "0"}, "'seed' is '0', expected an integer"),
    ],
)
def test_a_bad_file_is_one_sentence_naming_the_field(tmp_path: Path, results, expected):
    folder = _folder(tmp_path, results)
    with pytest.raises(DataError) as caught:
        load_results(folder)
    message = caught.value.message
    assert message.startswith(str(folder / "results.json")) and "\n" not in message
    assert expected in message
    assert "forgetbench run" in caught.value.hint


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("lume/mmlu_below_threshold", "yes", "expected a bool or null"),
        ("lume/mmlu_below_threshold", 1, "expected a bool or null"),
        ("lume/utility_source", 3, "expected a str or null"),
        ("lume/utility", "mmlu", "expected a number or null"),
    ],
)
def test_lume_utility_keys_are_checked(tmp_path: Path, key: str, value: object, expected: str):
    results = {"rows": [{"split": "f", "method": "npo", key: value}]}
    with pytest.raises(DataError, match=re.escape(f"rows[0]['{key}'] is {value!r}, {expected}")):
        load_results(_folder(tmp_path, results))


def test_invalid_json_names_the_line(tmp_path: Path):
    (tmp_path / "results.json").write_text('{"rows": [\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"results.json line 2 column 1: invalid JSON"):
        load_results(tmp_path)


def test_a_huge_value_is_cut_short_in_the_message(tmp_path: Path):
    results = {"rows": [{**ROW, "split": ["x" * 10_000] * 1000}]}
    with pytest.raises(DataError) as caught:
        load_results(_folder(tmp_path, results))
    shown = re.search(r"rows\[0\]\['split'\] is (.*), expected a string", caught.value.message)
    assert shown and shown[1].startswith("['xxx") and len(shown[1]) < 150
