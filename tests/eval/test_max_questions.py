"""`eval.max_questions`: TOFU's `ds_size`, the first N questions of each evaluation set."""

import json
from pathlib import Path

import pytest

from forgetbench.config import RunConfig, load_config
from forgetbench.config_sections import EvalConfig
from forgetbench.data.logs import EvalLog, SetLog
from forgetbench.data.tofu import first_questions, tofu_eval_sets
from forgetbench.errors import ConfigError, DataError
from forgetbench.eval import runner
from forgetbench.eval.runner import evaluate_model, evaluation_key
from forgetbench.records import QARecord
from forgetbench.study.inputs import Study
from forgetbench.study.tofu import load_retain_logs


def _record(i: int) -> QARecord:
    return QARecord(question=f"Question number {i}?", answer=f"Answer {i}.", split="forget10")


def test_the_first_n_records_in_order():
    records = [_record(i) for i in range(5)]
    assert [r.answer for r in first_questions(records, 3)] == [
        "Answer 0.",
        "Answer 1.",
        "Answer 2.",
    ]
    assert first_questions(records, None) == records
    assert first_questions(records, 300) == records  # min(ds_size, len), as TOFU
    with pytest.raises(ConfigError, match="eval.max_questions must be at least 1, got 0"):
        first_questions(records, 0)


def _write_tofu(folder: Path, sizes: dict[str, int]) -> Path:
    """TOFU-layout files: `sizes` questions per eval split, 5 perturbed answers (3 for the
    multiple-choice sets)."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in sizes.items():
        mc = split in ("real_authors_perturbed", "world_facts_perturbed")
        rows = []
        for i in range(n):
            row = {
                "question": f"{split} question {i}?",
                "answer": f"{split} answer {i}.",
                "perturbed_answer": [f"wrong {j}." for j in range(3 if mc else 5)],
            }
            if not mc:
                row["paraphrased_answer"] = f"{split} paraphrase {i}."
            rows.append(json.dumps(row))
        (folder / f"{split}.json").write_text("\n".join(rows) + "\n")
    return folder


SIZES = {
    "forget10_perturbed": 6,
    "retain_perturbed": 5,
    "real_authors_perturbed": 2,
    "world_facts_perturbed": 4,
}


def test_every_tofu_eval_set_is_cut_like_tofus_ds_size(tmp_path):
    data = _write_tofu(tmp_path / "tofu", SIZES)
    sets = tofu_eval_sets(data, "forget10", max_questions=3)
    assert {name: len(records) for name, records in sets.items()} == {
        "forget": 3,
        "retain": 3,
        "real_authors": 2,  # shorter than N: whole, as TOFU's 100 Real Authors under ds_size 300
        "world_facts": 3,
    }
    assert [r.question for r in sets["forget"]] == [
        f"forget10_perturbed question {i}?" for i in range(3)
    ]
    assert len(tofu_eval_sets(data, "forget10")["forget"]) == 6


def test_evaluate_model_scores_only_the_first_n(tmp_path, monkeypatch):
    data = _write_tofu(tmp_path / "tofu", SIZES)
    seen = {}

    def fake_run_task(task, backend):
        assert task.name == "tofu"  # the first task run
        seen.update({name: len(records) for name, records in task.subsets.items()})
        raise RuntimeError("stop here")

    monkeypatch.setattr(runner, "run_task", fake_run_task)
    with pytest.raises(RuntimeError, match="stop here"):
        evaluate_model(
            None, None, None, data=data, split="forget10", benchmark="tofu",
            eval_config=EvalConfig(max_questions=4), max_length=64,
        )  # fmt: skip
    assert seen == {"forget": 4, "retain": 4, "real_authors": 2, "world_facts": 4}


def test_it_is_part_of_the_evaluation_cache_key(tmp_path):
    def key(options: EvalConfig) -> str:
        return evaluation_key(tmp_path / "model", tmp_path / "data", "forget10", options, "tofu")

    keys = {key(EvalConfig(max_questions=n)) for n in (None, 3, 300)}
    assert len(keys) == 3
    assert key(EvalConfig()) == key(EvalConfig(max_questions=None))


def test_a_metric_version_bump_changes_the_evaluation_cache_key(tmp_path, monkeypatch):
    import dataclasses

    from forgetbench.metrics.info import METRICS

    def key() -> str:
        return evaluation_key(
            tmp_path / "model", tmp_path / "data", "forget10", EvalConfig(), "tofu"
        )

    before = key()
    bumped = dataclasses.replace(METRICS["forget_quality"], version=99)
    monkeypatch.setitem(METRICS, "forget_quality", bumped)
    assert key() != before


def test_the_config_checks_it():
    assert load_config(overrides=["eval.max_questions=300"]).eval.max_questions == 300
    assert RunConfig().eval.max_questions is None
    with pytest.raises(ConfigError, match="eval.max_questions"):
        load_config(overrides=["eval.max_questions=0"])


def _retain_log(sets: dict[str, list[int]]) -> EvalLog:
    """A retain model's log holding, per set, the given question numbers (Llama-2 prompts)."""
    split = {"forget": "forget10_perturbed", "retain": "retain_perturbed"}
    logs = {}
    for name, rows in sets.items():
        texts = [
            [f"[INST] {split[name]} question {i}? [/INST]", "", f"{split[name]} answer {i}."]
            for i in rows
        ]
        fields = {
            "avg_gt_loss": [1.0] * len(rows),
            "avg_paraphrased_loss": [1.0] * len(rows),
            "average_perturb_loss": [[1.0] * 5] * len(rows),
            "rougeL_recall": [0.5] * len(rows),
            "generated_text": texts,
        }
        logs[name] = SetLog(name, tuple(str(i) for i in range(len(rows))), fields)
    return EvalLog("retain-log", logs)


def test_a_study_checks_its_retain_logs_before_any_work(tmp_path):
    from forgetbench.data.logs import write_eval_log

    data = _write_tofu(tmp_path / "tofu", SIZES)
    log = write_eval_log(
        tmp_path / "retain90" / "eval_log_aggregated.json",
        _retain_log({"forget": [0, 1, 2, 3], "retain": [0, 1, 2, 3]}),
    )
    study = Study(data, tmp_path / "finetuned", None, {}, None, 64, None)

    def config(*overrides: str) -> RunConfig:
        return load_config(overrides=["study.splits=[forget10]", *overrides])

    loaded = load_retain_logs(config(f"study.retain_logs.forget10={log}"), study)
    assert len(loaded["forget10"].sets["forget"]) == 4
    # Cut to 3 questions, the evaluation would lack the reference's 4th: refused now, not after
    # the study has trained and evaluated everything.
    with pytest.raises(DataError) as refused:
        load_retain_logs(config(f"study.retain_logs.forget10={log}", "eval.max_questions=3"), study)
    message = str(refused.value)
    assert "lacks (question 3: '[INST] forget10_perturbed question 3? [/INST]')" in message
    assert "the forget10 evaluation (eval.max_questions=3)" in message
    assert "\n" not in message
    with pytest.raises(ConfigError, match="did you mean 'forget10'"):
        load_retain_logs(config(f"study.retain_logs.forget1O={log}"), study)
