"""`forgetbench eval` on the tiny study: TOFU-layout logs that `compare` reads back."""

import json

import numpy as np
import pytest

from forgetbench.cli import main
from forgetbench.data.logs import read_eval_log
from forgetbench.eval.summary import compare

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def logs(tiny_study, tmp_path_factory):
    _, data, _, finetuned, retain = tiny_study
    out = tmp_path_factory.mktemp("eval")
    results = {}
    for name, model in (("retain", retain.model_dir), ("finetuned", finetuned.model_dir)):
        argv = [
            "eval",
            "--model",
            str(model),
            "--data",
            str(data),
            "--split",
            "forget10",
            "--out",
            str(out / name),
            "eval.max_new_tokens=48",
            "eval.lume_max_new_tokens=48",
            "--json",
        ]
        if name == "finetuned":
            argv += ["--retain-log", str(out / "retain")]
        else:  # the retain model's scores read below: TOFU's, formats, MIA and memorisation
            argv += ["eval.lume=false", "eval.probes=false"]
        assert main(argv) == 0
        results[name] = out / name
    return results


def test_logs_have_tofus_layout_and_consistent_numbers(logs):
    log = read_eval_log(logs["finetuned"])
    forget = log.sets["forget"]
    assert len(forget) == 20 and forget.perturbed_loss.shape == (20, 5)
    assert log.sets["real_authors"].perturbed_loss.shape[1] == 3
    gt_loss, tokens = forget.column("gt_loss"), forget.column("num_token_gt")
    np.testing.assert_allclose(forget.gt_loss, gt_loss / tokens, rtol=1e-6)
    # stored like TOFU's: perturbed over paraphrase
    ratio = np.exp(forget.paraphrased_loss - forget.perturbed_loss.mean(axis=1))
    np.testing.assert_allclose(forget.column("truth_ratio"), ratio, rtol=1e-6)
    first = forget.fields["generated_text"][0]
    assert first[0].startswith("Question: ") and first[2] == forget.ground_truths()[0]


def test_finetuned_is_told_apart_from_the_retain_model(logs, capsys):
    summary = json.loads((logs["finetuned"] / "summary.json").read_text())
    scores = summary["scores"]
    assert scores["forget_quality"] < 0.05
    assert scores["retain_ks_pvalue"] > 0.3
    assert scores["forget/rougeL"] >= 0.9
    retain_scores = compare(read_eval_log(logs["retain"]), read_eval_log(logs["retain"]))
    assert retain_scores["forget_quality"] == pytest.approx(1.0)
    assert retain_scores["forget/probability"] < scores["forget/probability"]
    # round trip: compare on the written logs gives the numbers eval reported
    again = compare(read_eval_log(logs["retain"]), read_eval_log(logs["finetuned"]))
    for key in ("model_utility", "forget_quality", "retain_ks_pvalue", "forget/truth_ratio"):
        assert again[key] == pytest.approx(scores[key], rel=1e-12)
    assert set(summary["metric_versions"]) >= {"truth_ratio", "forget_quality"}


def test_every_metric_family_is_reported_and_separates_the_two_models(logs):
    finetuned = json.loads((logs["finetuned"] / "summary.json").read_text())["scores"]
    retain = json.loads((logs["retain"] / "summary.json").read_text())["scores"]
    formats = ("mcqa", "cloze", "analogy_qa", "analogy_mcqa", "odd_one_out", "comprehension_qa",
               "comprehension_mcqa")  # fmt: skip
    for name in formats:
        for side in ("forget", "retain"):
            assert 0.0 <= finetuned[f"formats/{name}/{side}"] <= 1.0
    for attack in ("loss", "zlib", "min_k", "min_k_plus_plus"):
        assert 0.0 <= finetuned[f"mia/{attack}"] <= 1.0
    # The finetuned model was trained on the forget authors and never on the holdout ones.
    assert finetuned["mia/loss"] > 0.8 and finetuned["mia/loss"] > retain["mia/loss"]
    assert finetuned["exact_memorisation"] > retain["exact_memorisation"]
    assert finetuned["extraction_strength"] > retain["extraction_strength"]
    assert finetuned["formats/cloze/forget"] > retain["formats/cloze/forget"]
    assert "privleak" in finetuned and "privleak" not in retain
    for kind in ("regurgitation", "knowledge"):
        for task in ("Task1", "Task2"):
            for split in ("forget", "retain"):
                assert 0.0 <= finetuned[f"lume/{kind}/{task}/{split}"] <= 1.0
    assert {"lume/task_aggregate", "lume/mia_score", "lume/final"} <= set(finetuned)
    # Without MMLU the miniature's background MC accuracy is the utility, as before; no 0.371 flag.
    assert finetuned["lume/utility"] == finetuned["utility/mc_accuracy"]
    assert finetuned["lume/utility_source"] == "mini_background_mc"
    assert finetuned["lume/mmlu_below_threshold"] is None
    assert finetuned["lume/final"] == pytest.approx(
        (finetuned["lume/task_aggregate"] + finetuned["lume/mia_score"] + finetuned["lume/utility"])
        / 3
    )
    extra = json.loads((logs["finetuned"] / "extra_log.json").read_text())
    assert len(extra["formats"]["mcqa/forget"]) == 60  # one entry per question of the file
    assert sum(item["member"] for item in extra["mia"]) == 20


def test_eval_never_overwrites_a_finished_log(logs, capsys):
    before = (logs["retain"] / "summary.json").read_bytes()
    code = main(["eval", "--model", "x", "--data", "y", "--out", str(logs["retain"])])
    assert code == 2 and "already exists" in capsys.readouterr().err
    assert (logs["retain"] / "summary.json").read_bytes() == before
