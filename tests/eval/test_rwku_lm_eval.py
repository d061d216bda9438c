"""eval.rwku_utility=lm_eval: `forgetbench eval --benchmark rwku` scores utility with lm-eval's
mmlu, bbh, truthfulqa_mc2 and triviaqa tasks (one lm-eval run, before any target is scored)
instead of RWKU's per-target samples. Offline, as tests/eval/test_lmeval.py: local task files under those names (lm-eval's own
read the Hub), on a tiny Llama with the toy tokenizer; lm-eval missing, or a task's data not to
be had offline, is one sentence before any target is scored."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from forgetbench.benchmarks.mini.released import write_released
from forgetbench.cli import main
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.loading import save_model
from lm_eval_tasks import local_source, multiple_choice_task, write_questions
from toy import toy_tokenizer

HAVE_LM_EVAL = importlib.util.find_spec("lm_eval") is not None
GENERATE = """task: {name}
{source}
test_split: test
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{choices[answer]}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 4
metric_list:
  - metric: exact_match
"""
GENERATED = ("bbh", "triviaqa")  # the others multiple choice
TASKS = ("mmlu", "bbh", "truthfulqa_mc2", "triviaqa")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(model folder, RWKU folder, local tasks, the same with mmlu read from the Hub)."""
    root = tmp_path_factory.mktemp("rwku-lmeval")
    tokenizer = toy_tokenizer()
    model = save_model(build_tiny_model(tokenizer, seed=0), tokenizer, root / "model")
    data = root / "Target"
    write_released(data, "rwku", scale="tiny")
    local = local_source(write_questions(root / "facts.jsonl"))
    folders = {}
    for kind in ("local", "hub"):
        folder = folders[kind] = root / kind
        folder.mkdir()
        for name in TASKS:
            hub = kind == "hub" and name == "mmlu"  # an id nobody has cached, as cais/mmlu offline
            source = "dataset_path: forgetbench-tests/no-such-mmlu" if hub else local
            text = (
                GENERATE.format(name=name, source=source)
                if name in GENERATED
                else multiple_choice_task(name, source)
            )
            (folder / f"{name}.yaml").write_text(text)
    return model, data, folders["local"], folders["hub"]


def _argv(world, out, *extra):
    model, data, tasks, _ = world
    return ["eval", "--benchmark", "rwku", "--model", str(model), "--data", str(data), "--out",
            str(out), "eval.max_length=256", f"eval.lm_eval_include_path={tasks}",
            "eval.rwku_utility=lm_eval", "rwku.targets=[1]", "--no-progress", *extra]  # fmt: skip


def _refused(argv, capsys, names: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("error: "), err
    assert names in lines[0] and code == 2, (code, lines[0])


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_LM_EVAL, reason="lm-eval is not installed (the dev extra has it)")
def test_rwku_utility_through_lm_eval_in_one_run(world, tmp_path, monkeypatch, capsys):
    import lm_eval

    runs = []
    evaluate = lm_eval.simple_evaluate
    monkeypatch.setattr(lm_eval, "simple_evaluate", lambda **kw: runs.append(kw) or evaluate(**kw))
    out = tmp_path / "out"
    assert main(_argv(world, out, "--json")) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(runs) == 1 and runs[0]["tasks"] == ["mmlu", "bbh", "truthfulqa_mc2", "triviaqa"]
    (target,) = summary["splits"]
    scores = summary["scores"][target]
    utility = {k: v for k, v in scores.items() if k.startswith("lm_eval/")}
    assert set(utility) == {"lm_eval/mmlu/acc", "lm_eval/bbh/exact_match",
                            "lm_eval/truthfulqa_mc2/acc", "lm_eval/triviaqa/exact_match"}  # fmt: skip
    # Five questions each: every score a multiple of 1/5.
    assert all(round(v * 5, 6) == round(v * 5) for v in utility.values())
    # RWKU's own samples of those sets are not scored; the probes and MIA still are.
    assert not {"rwku/mmlu", "rwku/bbh", "rwku/truthful_mc1", "rwku/triviaqa_f1"} & set(scores)
    assert isinstance(scores["rwku/forget_qa"], float) and "rwku/mia_fm/loss" in scores
    assert json.loads((out / target / "summary.json").read_text())["scores"] == scores


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_LM_EVAL, reason="lm-eval is not installed (the dev extra has it)")
def test_lm_eval_data_offline_stops_before_any_target(world, tmp_path, capsys):
    out = tmp_path / "out"
    argv = _argv(world, out)
    argv[argv.index(f"eval.lm_eval_include_path={world[2]}")] = (
        f"eval.lm_eval_include_path={world[3]}"
    )
    _refused(argv, capsys, "lm-eval could not fetch a task's data")
    assert not out.exists() or not any(out.iterdir())


def test_lm_eval_missing_or_the_option_elsewhere_is_one_sentence(
    world, tmp_path, monkeypatch, capsys
):
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # `import lm_eval` now raises ImportError
    _refused(_argv(world, tmp_path / "out"), capsys, "pip install 'forgetbench[lmeval]'")
    assert not (tmp_path / "out").exists()
    _refused(["eval", "--benchmark", "muse", "--model", "m", "--data", "d", "--out", "o",
              "eval.rwku_utility=lm_eval"], capsys, "does not use eval.rwku_utility")  # fmt: skip
    _refused(["run", "--benchmark", "rwku", "eval.rwku_utility=lm_eval"], capsys,
             "does not use eval.rwku_utility")  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_LM_EVAL, reason="lm-eval is not installed (the dev extra has it)")
def test_lm_eval_tasks_run_beside_a_document_benchmarks_own_scores(world, tmp_path, capsys):
    # WMDP's papers report MMLU beside WMDP accuracy: eval.lm_eval_tasks on `forgetbench eval
    # --benchmark wmdp` measures it (it was accepted and never run).
    model, _, tasks, _ = world
    data = tmp_path / "wmdp"
    write_released(data, "wmdp", scale="tiny")
    out = tmp_path / "out"
    argv = ["eval", "--benchmark", "wmdp", "--model", str(model), "--data", str(data), "--out",
            str(out), "eval.max_length=256", "eval.lm_eval_tasks=[mmlu]",
            f"eval.lm_eval_include_path={tasks}", "--no-progress", "--json"]  # fmt: skip
    assert main(argv) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["scores"]
    assert round(scores["lm_eval/mmlu/acc"] * 5, 6) == round(scores["lm_eval/mmlu/acc"] * 5)
    assert isinstance(scores["wmdp/all"], float)
    assert json.loads((out / "summary.json").read_text())["scores"] == scores
