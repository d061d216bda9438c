"""LUME's final score with MMLU as utility: which utility enters it (lm-eval's MMLU, a given MMLU,
the miniature's background accuracy), the SemEval-2025 bar of 0.371, and `forgetbench eval` on a
real-LUME subset with a measured `mmlu/acc` (a local task named mmlu: no network)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from forgetbench.cli import main
from forgetbench.config import load_config
from forgetbench.config_sections import EvalConfig
from forgetbench.data.lume import load_lume
from forgetbench.errors import ConfigError
from forgetbench.eval.runner import evaluation_key
from forgetbench.eval.tasks.lume import check_utility_options, lume_final_scores
from forgetbench.metrics.lume import MMLU_THRESHOLD
from lm_eval_tasks import local_source, multiple_choice_task, write_questions

HAVE_LM_EVAL = importlib.util.find_spec("lm_eval") is not None
LUME = {"lume/task_aggregate": 0.5, "lume/mia_score": 0.8}


def test_measured_mmlu_below_the_bar():
    # (0.5 + 0.8 + 0.35) / 3 = 1.65 / 3 = 0.55; 0.35 < 0.371.
    out = lume_final_scores({**LUME, "lm_eval/mmlu/acc": 0.35, "utility/mc_accuracy": 0.9})
    assert out["lume/final"] == pytest.approx(0.55)
    assert out["lume/utility"] == 0.35 and out["lume/utility_source"] == "mmlu_lm_eval"
    assert out["lume/mmlu_below_threshold"] is True


def test_given_mmlu_above_the_bar():
    # (0.5 + 0.8 + 0.40) / 3 = 1.7 / 3 = 0.5667.
    out = lume_final_scores(LUME, given_mmlu=0.40)
    assert out["lume/final"] == pytest.approx(1.7 / 3)
    assert out["lume/utility_source"] == "given" and out["lume/mmlu_below_threshold"] is False


def test_the_bar_itself_is_not_below_it():
    assert MMLU_THRESHOLD == 0.371
    assert lume_final_scores(LUME, given_mmlu=0.371)["lume/mmlu_below_threshold"] is False
    assert lume_final_scores(LUME, given_mmlu=0.3709)["lume/mmlu_below_threshold"] is True


def test_miniature_without_mmlu_keeps_its_background_accuracy_and_no_flag():
    # (0.5 + 0.8 + 0.9) / 3 = 0.7333: the miniature's behaviour before MMLU could enter.
    out = lume_final_scores({**LUME, "utility/mc_accuracy": 0.9})
    assert out["lume/final"] == pytest.approx(2.2 / 3)
    assert out["lume/utility_source"] == "mini_background_mc"
    assert out["lume/mmlu_below_threshold"] is None  # 0.371 is a bar for MMLU only


def test_without_mia_score_no_final_but_the_flag_stands():
    # The shared LUME release has no member/nonmember documents: no MIA score, so no final score.
    out = lume_final_scores({"lume/task_aggregate": 0.5, "lume/mia_score": None}, given_mmlu=0.2)
    assert out["lume/final"] is None and out["lume/mmlu_below_threshold"] is True


def test_no_utility_and_no_lume():
    out = lume_final_scores(LUME)
    assert out["lume/final"] is None and out["lume/utility_source"] is None
    assert out["lume/mmlu_below_threshold"] is None
    assert lume_final_scores({"lm_eval/mmlu/acc": 0.3}) == {}  # a TOFU evaluation: nothing to add


def test_mmlu_measured_and_given_is_a_config_error():
    with pytest.raises(ConfigError, match="both measured by lm-eval"):
        lume_final_scores({**LUME, "lm_eval/mmlu/acc": 0.35}, given_mmlu=0.4)
    config = load_config(overrides=["eval.lume_mmlu=0.4", "eval.lm_eval_tasks=[mmlu]"])
    with pytest.raises(ConfigError, match="keep one"):
        check_utility_options(config.eval)
    check_utility_options(load_config(overrides=["eval.lume_mmlu=0.4"]).eval)


@pytest.mark.parametrize("value", ["1.5", "-0.1", "high"])
def test_lume_mmlu_must_be_an_accuracy(value):
    with pytest.raises(ConfigError, match="eval.lume_mmlu"):
        load_config(overrides=[f"eval.lume_mmlu={value}"])


def test_a_given_mmlu_is_part_of_the_cache_key(tmp_path):
    # Unset, it is left out of the key, so evaluations cached before the option existed stay valid.
    def key(mmlu: float | None) -> str:
        return evaluation_key(tmp_path, tmp_path, "forget10", EvalConfig(lume_mmlu=mmlu), "mini")

    assert len({key(None), key(0.3), key(0.4)}) == 3


def test_run_refuses_one_models_mmlu(capsys):
    assert main(["run", "--scale", "tiny", "eval.lume_mmlu=0.4"]) != 0
    assert "eval.lume_mmlu is one model's MMLU accuracy" in capsys.readouterr().err


@pytest.mark.slow
def test_eval_combines_a_measured_mmlu_and_warns(shared_data, tmp_path, capsys):
    if not HAVE_LM_EVAL:
        pytest.skip("lm-eval is not installed (pip install 'forgetbench[lmeval]')")
    from forgetbench.modeling.builtin import build_tiny_model, train_tokenizer
    from forgetbench.modeling.loading import save_model

    # A real-LUME subset: two prompts per task and kind of each split, plus SemEval's MIA layout
    # (member / nonmember documents) so the MIA score, and with it the final score, exists.
    lume = tmp_path / "lume"
    lume.mkdir()
    texts = []
    for split in ("forget", "retain"):
        rows, seen = [], {}
        for r in load_lume(shared_data / "lume", split):
            if seen.setdefault((r.task, r.kind), 0) < 2:
                seen[(r.task, r.kind)] += 1
                rows.append(r)
        (lume / f"{split}.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "id": r.id,
                        "input": r.prefix[-300:],
                        "output": r.completion[:200],
                        "task": f"Task{r.task}",
                    }
                )
                + "\n"
                for r in rows
            )  # fmt: skip
        )
        documents = [f"{r.prefix[-300:]} {r.completion[:200]}" for r in rows]
        texts += documents
        name = "member" if split == "forget" else "nonmember"
        (lume / f"{name}.jsonl").write_text(
            "".join(
                json.dumps({"id": str(i), "document": d}) + "\n" for i, d in enumerate(documents)
            )
        )
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    # A local multiple-choice task named `mmlu`, so lm-eval reports `mmlu/acc` offline. Its four
    # choices are the same text: every choice has the same log-likelihood and lm-eval's argmax
    # takes the first, so a question counts as right exactly when its answer is 0. One of five:
    # acc 0.2.
    questions = [(f"Fact {i}?", ["Oslo"] * 4, int(i > 0)) for i in range(5)]
    data = write_questions(tasks / "mmlu.jsonl", questions)
    (tasks / "mmlu.yaml").write_text(multiple_choice_task("mmlu", local_source(data)))
    tokenizer = train_tokenizer(texts + ["Question: Fact 0?\nAnswer: Oslo"], vocab_size=400)
    model = save_model(build_tiny_model(tokenizer, seed=0), tokenizer, tmp_path / "model")

    out = tmp_path / "eval"
    argv = ["eval", "--benchmark", "lume", "--model", str(model), "--data", str(lume)]
    argv += ["--out", str(out), "eval.lume_max_new_tokens=2", "eval.batch_size=1", "--json"]
    argv += ["eval.lm_eval_tasks=[mmlu]", f"eval.lm_eval_include_path={tasks}"]
    assert main(argv) == 0
    scores = json.loads((out / "summary.json").read_text())["scores"]
    assert scores["lm_eval/mmlu/acc"] == pytest.approx(0.2)
    assert scores["lume/utility"] == scores["lm_eval/mmlu/acc"]
    assert scores["lume/utility_source"] == "mmlu_lm_eval"
    assert scores["lume/mia_score"] is not None
    expected = (scores["lume/task_aggregate"] + scores["lume/mia_score"] + 0.2) / 3
    assert scores["lume/final"] == pytest.approx(expected)
    assert scores["lume/mmlu_below_threshold"] is True
    err = capsys.readouterr().err
    assert "warning: LUME: MMLU 0.2000 (measured by lm-eval) of the model is below 0.371" in err

    # The same model with its MMLU given instead: 0.40 is above the bar, no warning.
    argv = [a for a in argv if not a.startswith("eval.lm_eval")] + ["eval.lume_mmlu=0.40"]
    argv[argv.index(str(out))] = str(tmp_path / "given")
    assert main(argv) == 0
    given = json.loads((tmp_path / "given" / "summary.json").read_text())["scores"]
    assert given["lume/task_aggregate"] == scores["lume/task_aggregate"]
    assert given["lume/utility_source"] == "given" and given["lume/mmlu_below_threshold"] is False
    assert given["lume/final"] == pytest.approx(
        (scores["lume/task_aggregate"] + scores["lume/mia_score"] + 0.40) / 3
    )
    assert "warning" not in capsys.readouterr().err
