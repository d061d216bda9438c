"""The robustness half of the meta-evaluation: the table on hand-made attacked models, worked out
by hand, and the attacks' models on the real tiny models."""

from __future__ import annotations

import pytest
import torch

from forgetbench.config import load_config
from forgetbench.study.inputs import Study
from forgetbench.study.meta_robustness import (
    UTILITY_KEPT,
    attacked_job,
    quantised_copy,
    robustness_methods,
    robustness_rows,
)
from forgetbench.train.mini import TEMPLATE

# Pools on forget/rougeL: positives 0.9 and 0.8, negatives 0.2 and 0.3 -> the best cut is the
# midpoint 0.55 (both sides right), so a model reading below 0.55 "forgot".
POOLS = [
    ("positive", {"forget/rougeL": 0.9}),
    ("positive", {"forget/rougeL": 0.8}),
    ("negative", {"forget/rougeL": 0.2}),
    ("negative", {"forget/rougeL": 0.3}),
]
ROW = {"metric": "forget/rougeL", "direction": "higher", "faithfulness": 1.0}
# The retain model relearns 0.2 -> 0.5: a move of 0.3.
RETAIN = {"method": "retain", "before": {"forget/rougeL": 0.2}, "relearned": {"forget/rougeL": 0.5}}


def _attacked(method, before, relearned, quantised, utility=0.8):
    return {
        "method": method,
        "before": {"forget/rougeL": before, "model_utility": utility},
        "relearned": {"forget/rougeL": relearned},
        "quantised": {"forget/rougeL": quantised},
    }


def test_robustness_is_the_harmonic_mean_of_r_and_q_averaged_over_forgetful_models():
    attacked = [
        # Moves 0.6 on relearning (retain: 0.3) -> R = 0.5; quantised 0.1 -> 0.4: Q = 0.25.
        _attacked("a", 0.1, 0.7, 0.4),
        # Moves 0.2 -> R = min(0.3 / 0.2, 1) = 1; quantising loses knowledge -> Q = 1.
        _attacked("b", 0.2, 0.4, 0.1),
        # Still reads as knowing (0.7 >= 0.55): not attacked for this metric.
        _attacked("c", 0.7, 0.9, 0.9),
        # Broken: utility 0.3 < 0.8 x 0.8 (the finetuned model's 0.8), left out of every metric.
        _attacked("d", 0.0, 0.9, 0.9, utility=0.3),
    ]
    (row,) = robustness_rows([ROW], POOLS, attacked, RETAIN, finetuned_utility=0.8)
    assert row["forgot_threshold"] == pytest.approx(0.55)
    assert row["attacked"] == ["a", "b"]
    assert row["utility_dropped"] == 1
    assert row["relearning"] == pytest.approx((0.5 + 1.0) / 2)
    assert row["quantisation"] == pytest.approx((0.25 + 1.0) / 2)
    # HM(0.75, 0.625) = 2 * 0.75 * 0.625 / 1.375.
    assert row["robustness"] == pytest.approx(2 * 0.75 * 0.625 / 1.375, abs=1e-6)
    assert row["robustness_note"] is None
    assert UTILITY_KEPT == 0.8


def test_a_metric_no_attacked_model_forgot_by_has_no_robustness_and_says_why():
    attacked = [_attacked("c", 0.7, 0.9, 0.9)]
    (row,) = robustness_rows([ROW], POOLS, attacked, RETAIN, finetuned_utility=None)
    assert row["robustness"] is None and row["attacked"] == []
    assert row["robustness_note"] == "no attacked model reads as having forgotten by this metric"


def test_a_lower_metric_forgets_above_its_threshold():
    # forget/truth_ratio (TOFU form): positives 0.2, 0.3, negatives 0.8, 0.9 -> cut 0.55; a model
    # at 0.7 forgot. Relearning 0.7 -> 0.3 moves 0.4 toward knowing, retain 0.9 -> 0.7 moves 0.2:
    # R = 0.5. Quantised 0.7 -> 0.35: Q = 0.35 / 0.7 = 0.5.
    pools = [(p, {"forget/truth_ratio": v}) for p, v in
             [("positive", 0.2), ("positive", 0.3), ("negative", 0.8), ("negative", 0.9)]]  # fmt: skip
    row = {"metric": "forget/truth_ratio", "direction": "lower", "faithfulness": 1.0}
    attacked = [{"method": "a", "before": {"forget/truth_ratio": 0.7},
                 "relearned": {"forget/truth_ratio": 0.3},
                 "quantised": {"forget/truth_ratio": 0.35}}]  # fmt: skip
    retain = {"before": {"forget/truth_ratio": 0.9}, "relearned": {"forget/truth_ratio": 0.7}}
    (out,) = robustness_rows([row], pools, attacked, retain, finetuned_utility=None)
    assert (out["relearning"], out["quantisation"]) == (pytest.approx(0.5), pytest.approx(0.5))
    assert out["robustness"] == pytest.approx(0.5)


def test_the_attacked_methods_are_the_configs_own_when_it_names_them():
    assert robustness_methods(load_config(overrides=["scale=tiny"])) == ("grad_diff", "npo", "idk")
    assert len(robustness_methods(load_config(overrides=["scale=small"]))) == 8
    named = load_config(overrides=["scale=tiny", "study.methods=[npo,rmu]"])
    assert robustness_methods(named) == ("npo", "rmu")


@pytest.fixture(scope="module")
def setup(tiny_study):
    run, data, base, finetuned, retain = tiny_study
    study = Study(data, finetuned.model_dir, base.model_dir, {"forget10": retain.model_dir},
                  TEMPLATE, 256, lambda name: None, benchmark="mini", finetune_lr=2e-3)  # fmt: skip
    config = load_config(
        overrides=[
            "eval.max_new_tokens=24",
            "eval.batch_size=64",
            "eval.formats=false",
            "eval.lume=false",
        ]  # fmt: skip
    )
    return study, config


def test_a_quantised_copy_holds_nf4_weights_and_is_made_once(setup, tmp_path):
    from forgetbench.attacks.quantize import quantise_model
    from forgetbench.modeling.loading import load_model

    study, _ = setup
    path = quantised_copy(study.finetuned, "nf4", run_dir=tmp_path)
    copy, _ = load_model(path)
    expected, _ = load_model(study.finetuned)
    layers = quantise_model(expected, "nf4")
    weights = dict(copy.named_parameters())
    assert layers and all(
        torch.equal(weights[f"{name}.weight"], module.weight)
        for name, module in expected.named_modules()
        if name in layers
    )
    # The copy differs from the original, but for the output head, left as it was.
    original, _ = load_model(study.finetuned)
    before = dict(original.named_parameters())
    assert not torch.equal(weights[f"{layers[0]}.weight"], before[f"{layers[0]}.weight"])
    head = copy.get_output_embeddings().weight
    assert torch.equal(head, original.get_output_embeddings().weight)
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert quantised_copy(study.finetuned, "nf4", run_dir=tmp_path) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp


def test_relearning_the_retain_model_teaches_it_the_forget_set(setup, tmp_path):
    study, config = setup
    result = attacked_job(study, config, tmp_path, "forget10", None)
    assert result["method"] == "retain" and "quantised" not in result
    before, after = result["before"], result["relearned"]
    # One epoch on the 20 forget questions: the retain model, which never saw them, learns them.
    assert after["forget/probability"] > before["forget/probability"] + 0.05
    assert result["log"] == "meta_eval/forget10/robustness/retain"
