"""The meta-evaluation's pools and table: the plan each scale trains, the per-model training
options, and the whole command on stand-in models (the real pools train for minutes)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from forgetbench.cli import main
from forgetbench.config import RunConfig
from forgetbench.config_sections import TrainConfig
from forgetbench.results import load_meta_eval
from forgetbench.study import meta_eval
from forgetbench.study.meta_eval import faithfulness_table, pool_models
from forgetbench.study.miniature import Miniature, Variant
from forgetbench.study.pool import InlinePool
from forgetbench.train.mini import mini_finetune_config


def test_tiny_pools_are_four_and_four_around_the_recipe():
    models = pool_models("tiny", forget_split="forget10", seed=0, epochs=25, lr=2e-3)
    positive = [m.variant for m in models if m.pool == "positive"]
    negative = [m.variant for m in models if m.pool == "negative"]
    assert positive == [
        Variant("full", 0, 25, 2e-3),  # the study's own finetuned model
        Variant("full", 1, 25, 2e-3),
        Variant("full", 2, 15, 2e-3),  # 0.6 x 25 epochs
        Variant("full", 3, 25, 1e-3),  # half the learning rate
    ]
    # The same plan on the retain split of forget10: the pools differ only by the forget set.
    assert [(v.seed, v.epochs, v.lr) for v in negative] == [
        (v.seed, v.epochs, v.lr) for v in positive
    ]
    assert {v.split for v in negative} == {"retain90"}
    assert len({m.label for m in models}) == 8


def test_small_pools_are_eight_and_eight_of_distinct_models():
    models = pool_models("small", forget_split="forget01", seed=3, epochs=8, lr=2e-3)
    assert sum(m.pool == "positive" for m in models) == 8
    assert sum(m.pool == "negative" for m in models) == 8
    assert len({m.variant for m in models}) == 16
    assert {m.variant.split for m in models if m.pool == "negative"} == {"retain99"}
    assert min(m.variant.seed for m in models) == 3  # offsets from the study's seed
    assert sorted({m.variant.epochs for m in models}) == [5, 6, 8]  # 0.6 x 8 = 4.8 -> 5


def test_a_variants_epochs_and_lr_reach_the_finetuning_loop_over_the_users_options(tmp_path):
    user = TrainConfig.model_validate({"weight_decay": 0.0})
    mini = Miniature(tmp_path, "tiny", seed=0, train=user, progress=False)
    options = mini._options(progress=False, variant=Variant("full", 4, 15, 1e-3))
    assert options["seed"] == 4
    loop, _ = mini_finetune_config("tiny", seed=options["seed"], train=options["train"])
    assert (loop.epochs, loop.lr, loop.weight_decay, loop.seed) == (15, 1e-3, 0.0, 4)
    # No variant: the user's options as they were, at the study's seed.
    plain = mini._options(progress=False)
    assert plain["train"] is user and plain["seed"] == 0
    assert mini.recipe() == (25, 2e-3)


def test_the_table_judges_forget_set_metrics_in_their_declared_direction():
    scored = [
        ("positive", {"forget/rougeL": 0.9, "forget/truth_ratio": 0.2, "mia/loss": 0.7,
                      "retain/rougeL": 0.8, "forget_quality": 0.01}),
        ("positive", {"forget/rougeL": 0.8, "forget/truth_ratio": 0.3, "mia/loss": 0.6,
                      "retain/rougeL": 0.8, "forget_quality": 0.02}),
        ("negative", {"forget/rougeL": 0.2, "forget/truth_ratio": 0.9, "mia/loss": 0.7,
                      "retain/rougeL": 0.8, "forget_quality": 1.0}),
        ("negative", {"forget/rougeL": 0.3, "forget/truth_ratio": float("nan"), "mia/loss": 0.6,
                      "retain/rougeL": 0.8, "forget_quality": 0.9}),
    ]  # fmt: skip
    table = {row["metric"]: row for row in faithfulness_table(scored, truth_ratio_form="tofu_code")}
    assert set(table) == {"forget/rougeL", "forget/truth_ratio", "mia/loss"}
    assert table["forget/rougeL"]["faithfulness"] == 1.0
    # Lower = knows: 0.2 and 0.3 both below the one finite negative, 0.9; NaN is left out.
    row = table["forget/truth_ratio"]
    assert (row["faithfulness"], row["positives"], row["negatives"]) == (1.0, 2, 1)
    # Same values in both pools: pairs (0.7,0.7) 1/2, (0.7,0.6) 1, (0.6,0.7) 0, (0.6,0.6) 1/2.
    assert table["mia/loss"]["faithfulness"] == 0.5
    assert table["mia/loss"]["robustness"] is None
    assert list(table)[-1] == "mia/loss"  # best first


class _FakeMini:
    """Stands in for `Miniature`: models are folder names, nothing trains."""

    def __init__(self, out: Path) -> None:
        self.out, self.timings, self.trained = out, {}, {}

    def recipe(self):
        return 25, 2e-3

    def models(self, stages, pool):
        self.trained = dict(stages)
        return {label: SimpleNamespace(model_dir=self.out / label) for label in stages}

    def study(self, finetuned, retain):
        return SimpleNamespace(finetuned=finetuned, retain=retain, finetune_lr=2e-3)


def test_meta_eval_writes_a_valid_file_from_every_pool_models_scores(tmp_path, monkeypatch):
    fake = _FakeMini(tmp_path)
    monkeypatch.setattr(meta_eval, "miniature", lambda config, out, progress: fake)
    evaluated = []

    def evaluate(model_dir, study, config, split, folder):
        evaluated.append((Path(model_dir).name, split))
        # A positive model's ROUGE-L rises with its seed; every retain model scores 0.1.
        positive = Path(model_dir).name.startswith("positive")
        seed = int(Path(model_dir).name.split("-seed")[1].split("-")[0])
        return {"forget/rougeL": 0.5 + seed / 10 if positive else 0.1, "model_utility": 0.8}, 0.5

    monkeypatch.setattr(meta_eval, "_evaluate_job", evaluate)
    attacked = []

    def attack(study, config, out, split, method):
        attacked.append(method)
        # Every unlearned model reads 0.2, relearns to 0.5 (the retain model: 0.1 -> 0.4, the
        # same move: R = 1) and quantises to 0.4 (Q = 0.5): robustness 2/3.
        if method is None:
            return {
                "method": "retain",
                "log": "r",
                "seconds": 1.0,
                "before": {"forget/rougeL": 0.1},
                "relearned": {"forget/rougeL": 0.4},
            }
        return {"method": method, "log": method, "seconds": 1.0,
                "before": {"forget/rougeL": 0.2, "model_utility": 0.8},
                "relearned": {"forget/rougeL": 0.5}, "quantised": {"forget/rougeL": 0.4}}  # fmt: skip

    monkeypatch.setattr(meta_eval, "attacked_job", attack)
    config = RunConfig(scale="tiny")
    result = meta_eval.meta_evaluate(
        config, out=tmp_path, forget_split="forget05", pool=InlinePool()
    )
    assert len(fake.trained) == 8 and len(evaluated) == 8
    assert {split for _, split in evaluated} == {"forget05"}
    assert {v.split for v in fake.trained.values()} == {"full", "retain95"}
    assert [m["metric"] for m in result["metrics"]] == ["forget/rougeL"]
    assert result["metrics"][0]["faithfulness"] == 1.0
    assert result["metrics"][0]["positive_mean"] == pytest.approx((0.5 + 0.6 + 0.7 + 0.8) / 4)
    assert attacked == ["grad_diff", "npo", "idk", None]
    assert result["metrics"][0]["robustness"] == pytest.approx(2 / 3, abs=1e-6)
    assert result["robustness"]["methods"] == ["grad_diff", "npo", "idk"]
    assert [a["method"] for a in result["robustness"]["attacked"]] == [
        "grad_diff", "npo", "idk", "retain"
    ]  # fmt: skip
    meta = load_meta_eval(tmp_path)
    assert meta is not None and meta.pool_sizes() == {"positive": 4, "negative": 4}
    assert json.loads((tmp_path / "meta_eval.json").read_text())["split"] == "forget05"


def test_meta_eval_refuses_a_split_that_is_not_a_forget_split(tmp_path, capsys):
    code = main(["meta-eval", "--scale", "tiny", "--split", "retain90", "--out", str(tmp_path)])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "error: forgetbench meta-eval --split retain90 is not a forget split — use one of "
        "forget01, forget05, forget10"
    )


def test_meta_eval_refuses_a_model_of_ones_own(tmp_path, capsys):
    code = main(["meta-eval", "--model", "gpt2", "--out", str(tmp_path)])
    assert code == 2
    assert "does not use --model: meta-eval trains its own pools" in capsys.readouterr().err


def test_a_broken_meta_eval_file_is_one_sentence(tmp_path):
    from forgetbench.errors import DataError

    (tmp_path / "meta_eval.json").write_text('{"split": "forget10", "metrics": []}')
    with pytest.raises(DataError, match="'metrics' is \\[\\], expected a non-empty list"):
        load_meta_eval(tmp_path)


def test_a_study_of_ones_own_model_refuses_meta_eval_before_any_work(tmp_path):
    from forgetbench.errors import ConfigError
    from forgetbench.study.run import run_study

    config = RunConfig.model_validate(
        {
            "study": {"meta_eval": True},
            "model": {"name": "gpt2"},
            "benchmark": {"path": "locuslab/TOFU"},
        }
    )
    with pytest.raises(ConfigError, match="study.meta_eval trains pools of the built-in"):
        run_study(config, out=tmp_path, progress=False)
    assert list(tmp_path.iterdir()) == []
