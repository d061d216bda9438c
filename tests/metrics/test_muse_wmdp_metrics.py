"""MUSE's ROUGE-L F1 scores, the gradient-norm attack and WMDP accuracy, by hand."""

import numpy as np
import pytest

from forgetbench.metrics import METRICS, aggregate
from forgetbench.metrics.gradnorm import gradnorm_score
from forgetbench.metrics.mia_roc import attack_auc
from forgetbench.metrics.muse import cut_at_stop_strings, knowmem, verbmem
from forgetbench.metrics.wmdp import choice_accuracy


def test_verbmem_is_rouge_l_f1_without_stemming():
    # LCS of "the cat sat" and "the cat ran away" is 2 tokens: P = 2/3, R = 2/4, F1 = 4/7.
    # "running" and "ran" stay apart: MUSE's scorer does not stem (TOFU's does).
    values = verbmem(["the cat sat", "running"], ["the cat ran away", "ran"])
    assert values == pytest.approx([4 / 7, 0.0])
    assert aggregate("muse/verbmem_f", values) == pytest.approx(100 * 2 / 7)


def test_knowmem_cuts_at_the_first_stop_string():
    assert cut_at_stop_strings("Paris\nQuestion: next?") == "Paris"
    assert cut_at_stop_strings("Paris, France\n\nQuestion:") == "Paris, France"
    assert cut_at_stop_strings("Question: Paris") == ""
    values = knowmem(["Paris, France\n\nQuestion: Where?", "in Lima"], ["Paris", "Lima"])
    # "paris france" against "paris": P = 1/2, R = 1, F1 = 2/3; "in lima" against "lima": 2/3.
    assert values == pytest.approx([2 / 3, 2 / 3])
    assert METRICS["muse/knowmem_r"].direction == "higher"


def test_gradnorm_score_is_minus_the_mean_norm_and_low_norms_are_members():
    scores = gradnorm_score([np.array([1.0, 3.0]), np.array([0.5]), np.array([4.0, 4.0, 1.0])])
    assert scores == pytest.approx([-2.0, -0.5, -3.0])
    # Members (smaller gradients) outscore non-members in 2 of 2 pairs: AUC 1.
    assert attack_auc(scores[[1, 0]], scores[[2]]) == 1.0
    with pytest.raises(ValueError, match="non-negative"):
        gradnorm_score([np.array([-1.0])])


def test_wmdp_accuracy_takes_the_argmax_with_ties_to_the_first_choice():
    logprobs = [[-1.0, -0.5, -2.0, -3.0], [-1.0, -1.0, -2.0, -2.0], [-4.0, -3.0, -2.0, -1.0]]
    assert choice_accuracy(logprobs, [1, 1, 3]).tolist() == [1.0, 0.0, 1.0]
    assert aggregate("wmdp/accuracy", choice_accuracy(logprobs, [1, 0, 0])) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="labels\\[0\\] = 4 is not one of the 4 choices"):
        choice_accuracy(logprobs[:1], [4])
