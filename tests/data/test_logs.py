import json
import math

import pytest

from forgetbench.data.logs import SET_FILES, read_eval_log, write_eval_log
from forgetbench.errors import DataError

LOG = "ft_epoch5_lr1e-05_llama2-7b_full_wd0"


def test_reads_the_published_tofu_log(tofu_logs):
    log = read_eval_log(tofu_logs / LOG / "eval_log_aggregated.json")
    assert {name: len(s) for name, s in log.sets.items()} == {
        "forget": 300,
        "retain": 300,
        "real_authors": 100,
        "world_facts": 117,
    }
    assert log.sets["forget"].perturbed_loss.shape == (300, 5)
    assert log.sets["world_facts"].perturbed_loss.shape == (117, 3)
    assert log.sets["forget"].ground_truths()[0] == "The author's full name is Hsiao Yun-Hwa."


def test_round_trip_keeps_every_field(tofu_logs, tmp_path):
    log = read_eval_log(tofu_logs / LOG)
    out = write_eval_log(tmp_path / "eval_log_aggregated.json", log)
    original = json.loads((tofu_logs / LOG / "eval_log_aggregated.json").read_text())
    assert json.loads(out.read_text()) == original
    assert (
        read_eval_log(tmp_path).sets["retain"].gt_loss.tolist()
        == log.sets["retain"].gt_loss.tolist()
    )


def test_reads_a_folder_of_separate_set_files(tofu_logs, tmp_path):
    original = json.loads((tofu_logs / LOG / "eval_log_aggregated.json").read_text())
    (tmp_path / "eval_log_forget.json").write_text(json.dumps(original["eval_log_forget.json"]))
    log = read_eval_log(tmp_path)
    assert list(log.sets) == ["forget"]
    single = read_eval_log(tmp_path / "eval_log_forget.json")
    assert len(single.sets["forget"]) == 300


def _minimal(**overrides):
    table = {
        "avg_gt_loss": {"0": 0.5, "1": 0.25},
        "avg_paraphrased_loss": {"0": 1.0, "1": 1.0},
        "average_perturb_loss": {"0": [2.0, 2.0], "1": [2.0, 3.0]},
        "rougeL_recall": {"0": 1.0, "1": 0.0},
    }
    table.update(overrides)
    return {SET_FILES["forget"]: table}


@pytest.mark.parametrize(
    ("mutation", "message"),
    [
        ({"avg_paraphrased_loss": None}, "missing field 'avg_paraphrased_loss'"),
        (
            {"avg_gt_loss": {"0": "x", "1": 0.1}},
            "'avg_gt_loss' question 0: expected a number, got str",
        ),
        ({"avg_gt_loss": {"0": math.nan, "1": 0.1}}, "'avg_gt_loss' question 0: value is nan"),
        ({"rougeL_recall": {"0": 1.0}}, "'rougeL_recall': its question indices differ"),
        (
            {"average_perturb_loss": {"0": [1.0], "1": [1.0, 2.0]}},
            "different numbers of perturbed answers",
        ),
        ({"average_perturb_loss": {"0": 1.0, "1": [1.0]}}, "question 0: expected a non-empty list"),
        # Numbers out of their range shift a printed score instead of failing (issue 30).
        (
            {"rougeL_recall": {"0": 1.0, "1": -5}},
            "'rougeL_recall' question 1: value is -5, not a recall in [0, 1]",
        ),
        (
            {"rouge1_recall": {"0": 1.5, "1": 0.5}},
            "'rouge1_recall' question 0: value is 1.5, not a recall in [0, 1]",
        ),
        (
            {"avg_gt_loss": {"0": 0.5, "1": -0.25}},
            "'avg_gt_loss' question 1: value is -0.25, not a mean loss >= 0 (a probability <= 1)",
        ),
        (
            {"average_perturb_loss": {"0": [2.0, -1.0], "1": [2.0, 3.0]}},
            "'average_perturb_loss' question 0: value is -1.0, not a mean loss >= 0",
        ),
        (
            {"truth_ratio": {"0": -0.5, "1": 0.5}},
            "'truth_ratio' question 0: value is -0.5, not a truth ratio >= 0",
        ),
        ({"rouge1_recall": {"0": math.inf, "1": 0.5}}, "'rouge1_recall' question 0: value is inf"),
    ],
)
def test_malformed_logs_name_file_field_and_question(tmp_path, mutation, message):
    data = _minimal(**{k: v for k, v in mutation.items() if v is not None})
    for key in [k for k, v in mutation.items() if v is None]:
        del data[SET_FILES["forget"]][key]
    path = tmp_path / "log.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError) as info:
        read_eval_log(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_truncated_and_empty_and_foreign_logs(tmp_path):
    text = json.dumps(_minimal())
    truncated = tmp_path / "truncated.json"
    truncated.write_text(text[: len(text) // 2])
    with pytest.raises(DataError, match=r"truncated.json line 1 column \d+: invalid JSON"):
        read_eval_log(truncated)
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(DataError, match="is empty"):
        read_eval_log(empty)
    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"accuracy": 0.5}')
    with pytest.raises(DataError, match="none of the TOFU evaluation sections"):
        read_eval_log(foreign)
    with pytest.raises(DataError, match="does not exist"):
        read_eval_log(tmp_path / "missing.json")
    with pytest.raises(DataError, match="no evaluation log in"):
        read_eval_log(tmp_path / "..")


def test_compare_refuses_a_candidate_with_an_impossible_recall_in_one_line(tmp_path, capsys):
    """A candidate log with rougeL_recall = -5 was accepted and shifted the printed Forget
    ROUGE-L; it is one line naming the file, the field and the question, exit 2."""
    from forgetbench.cli import main

    reference = tmp_path / "reference.json"
    reference.write_text(json.dumps(_minimal()))
    candidate = tmp_path / "candidate.json"
    candidate.write_text(json.dumps(_minimal(rougeL_recall={"0": 1.0, "1": -5})))
    code = main(["compare", "--reference", str(reference), "--candidate", str(candidate)])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{candidate} [eval_log_forget.json] 'rougeL_recall' question 1: value is -5" in err
    assert out == ""


def test_every_published_tofu_log_is_within_range(shared_data):
    # The range checks refuse no real log: all 16 published TOFU models' aggregated logs.
    folders = sorted((shared_data / "tofu" / "reference-eval-logs").iterdir())
    assert len(folders) == 16
    for folder in folders:
        assert len(read_eval_log(folder).sets) == 4
