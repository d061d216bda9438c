"""Every metric names a registered aggregation, and `aggregate` applies it: hand-computed numbers."""

import pytest

from forgetbench.errors import UnknownNameError
from forgetbench.metrics import AGGREGATIONS, METRICS, aggregate
from forgetbench.metrics.aggregation import harmonic_mean, mean


def test_every_metric_names_a_registered_aggregation():
    assert set(AGGREGATIONS.names()) == {
        "mean",
        "mean_x100",
        "harmonic_mean",
        "roc_auc",
        "ks_pvalue",
        "tpr_at_fpr",
    }
    for info in METRICS.values():
        assert info.aggregation in AGGREGATIONS, info.name


def test_one_sample_aggregations():
    assert mean([1.0, 2.0, 4.0]) == pytest.approx(7 / 3)
    # 3 / (1/1 + 1/2 + 1/4) = 3 / 1.75
    assert harmonic_mean([1.0, 2.0, 4.0]) == pytest.approx(3 / 1.75)
    assert harmonic_mean([0.5, 0.0, 0.9]) == 0.0  # a lost score is not averaged away
    assert aggregate("format_mc_success", [1.0, 0.0, 0.0, 1.0]) == 0.5
    assert aggregate("model_utility", [0.5, 0.5]) == pytest.approx(0.5)


def test_two_sample_aggregations_dispatch_by_metric():
    # Members 3, 2 against non-members 1, 2: three wins and one tie in four pairs.
    assert aggregate("mia/min_k", [3.0, 2.0], [1.0, 2.0]) == pytest.approx(0.875)
    # Identical samples: the KS test cannot tell them apart.
    assert aggregate("forget_quality", [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == pytest.approx(1.0)


def test_an_unknown_aggregation_is_named():
    with pytest.raises(UnknownNameError, match="aggregation"):
        AGGREGATIONS.get("meen")
