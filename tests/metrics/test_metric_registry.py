"""Each metric is registered once, on the function that computes it (`register_metric`), and the
registry and the metric modules agree both ways: every registered metric points at a function of a
metric module that exists, and every public function of a metric module is a metric, an
aggregation or one of the named helpers below."""

import importlib
import inspect
import json
from pathlib import Path

import pytest

from forgetbench.metrics import AGGREGATIONS, METRICS, register_metric
from forgetbench.metrics.info import DIRECTIONS

GOLDEN = sorted((Path(__file__).parents[1] / "golden").glob("tiny_study_results.*.json"))
# The modules whose functions compute reported metrics. meta.py scores the metrics themselves
# (meta_eval.json), never a results row, so it registers nothing.
METRIC_MODULES = (
    "tofu",
    "rouge",
    "mia",
    "mia_roc",
    "mia_shadow",
    "memorisation",
    "lume",
    "formats",
    "muse",
    "gradnorm",
    "wmdp",
    "rwku",
    "degeneracy",
)
# Public functions of the metric modules that compute no reported metric themselves: the per-item
# pieces and transforms a registered metric is built from, and checks. A new public function either
# registers the metric it computes or is named here, so no metric goes unregistered by accident.
HELPERS = {
    "tofu": {
        "multiple_choice_probability",  # probability on Real Authors / World Facts
        "truth_ratio",  # per-item R, transformed by truth_ratio_score
        "forget_truth_ratio_score",
        "retained_truth_ratio_score",
        "ks_test",  # (statistic, p-value); forget_quality is its p-value
        "halves",  # which forget questions choose the leaderboard's step, which report it
    },
    "rouge": set(),
    "mia": set(),
    "mia_roc": {"attack_auc", "min_nonmembers", "attack_summary"},
    "mia_shadow": set(),
    "memorisation": set(),
    "lume": {"mmlu_below_threshold"},
    "formats": {"mc_choice"},
    "muse": {"cut_at_stop_strings", "privleak_scores"},  # PrivLeak against a retain model
    "gradnorm": set(),
    "wmdp": set(),
    # the answer RWKU scores, its level and attack means, and fluency's per-text pieces
    "rwku": {"rwku_prediction", "probe_scores", "ngram_entropy", "word_tokens", "bbh_prediction"},
    "degeneracy": {"distinct_ngrams", "is_degenerate"},  # one text's measure and verdict
}
# Registered after the golden files were written: metrics of new row keys, no number of theirs
# (none since the files were rewritten with the leaderboard's degeneracy and held-out keys).
ADDED_SINCE_GOLDEN = {
    # RWKU's utility scores (its study's rows)
    "rwku/mmlu", "rwku/bbh", "rwku/truthful_mc1", "rwku/truthful_mc2", "rwku/triviaqa_em",
    "rwku/triviaqa_f1",
}  # fmt: skip


def _function(qualified: str):
    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_every_metric_of_the_results_rows_is_registered_with_a_direction():
    # The golden tiny study is the whole pipeline: the metrics its rows were scored with are the
    # ones a results.json can carry, and each must still be registered, with the same version
    # (a new version would be a change of numbers, which the golden check would also catch).
    assert GOLDEN, "no golden results in tests/golden"
    versions = json.loads(GOLDEN[0].read_text())["metric_versions"]
    assert len(versions) == 46
    registered = {name: m.version for name, m in METRICS.items()}
    assert {k: v for k, v in registered.items() if k not in ADDED_SINCE_GOLDEN} == versions
    assert set(registered) >= ADDED_SINCE_GOLDEN
    for m in METRICS.values():
        assert m.direction in DIRECTIONS, m.name
        assert m.aggregation in AGGREGATIONS, m.name
        assert m.definition.strip(), m.name


def test_every_registered_metric_names_the_function_that_computes_it():
    for m in METRICS.values():
        module = m.computed_by.rsplit(".", 1)[0]
        assert module in {f"forgetbench.metrics.{name}" for name in METRIC_MODULES}, m.name
        assert callable(_function(m.computed_by)), m.name
    # Spot checks that the records sit on the right functions.
    assert METRICS["model_utility"].computed_by == "forgetbench.metrics.tofu.model_utility"
    assert METRICS["mia/tpr@0.1%fpr"].computed_by == "forgetbench.metrics.mia_roc.tpr_at_fpr"
    assert METRICS["lume_final"].computed_by == "forgetbench.metrics.lume.final_score"


@pytest.mark.parametrize("name", METRIC_MODULES)
def test_every_public_function_of_a_metric_module_is_registered(name):
    module = importlib.import_module(f"forgetbench.metrics.{name}")
    public = {
        fn
        for fn, obj in inspect.getmembers(module, inspect.isfunction)
        if obj.__module__ == module.__name__ and not fn.startswith("_")
    }
    registered = {
        m.computed_by.rsplit(".", 1)[1]
        for m in METRICS.values()
        if m.computed_by.startswith(f"{module.__name__}.")
    }
    aggregations = {
        AGGREGATIONS.get(a).__name__
        for a in AGGREGATIONS.names()
        if AGGREGATIONS.get(a).__module__ == module.__name__
    }
    unaccounted = public - registered - aggregations - HELPERS[name]
    assert not unaccounted, (
        f"register the metric these compute, or name them in HELPERS: {unaccounted}"
    )
    assert not HELPERS[name] & registered, "a registered metric function is no helper"
    assert HELPERS[name] <= public, f"HELPERS names gone functions: {HELPERS[name] - public}"


def test_a_metric_registered_twice_or_without_a_direction_is_refused():
    def again(values):
        return values

    with pytest.raises(
        ValueError, match="'probability' is already registered by .*normalized_probability"
    ):
        register_metric(
            "probability", direction="higher", version=1, aggregation="mean", definition="x"
        )(again)
    with pytest.raises(ValueError, match="direction must be one of"):
        register_metric("new", direction="up", version=1, aggregation="mean", definition="x")  # type: ignore[arg-type]
    assert "new" not in METRICS
    assert METRICS["probability"].computed_by.endswith("tofu.normalized_probability")
