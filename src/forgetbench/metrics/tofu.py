"""TOFU metrics (Maini et al., 2024), exactly as the TOFU evaluation code computes them.

Inputs are per-token mean NLLs over answer tokens, `loss(a|q) = -log P(a|q) / |a|`, so
`exp(-loss)` is the length-normalised probability `P(a|q)^(1/|a|)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np
from scipy.stats import ks_2samp

from forgetbench.metrics.aggregation import AGGREGATIONS, harmonic_mean
from forgetbench.metrics.info import register_metric

TruthRatioForm = Literal["tofu_code", "paper", "prob_mean"]
TRUTH_RATIO_FORMS: tuple[str, ...] = ("tofu_code", "paper", "prob_mean")


@register_metric(
    "probability",
    direction="closer_to_retain",
    version=2,
    aggregation="mean",
    definition=(
        "mean exp(-loss(a|q)) with loss the mean NLL per answer token; on Real Authors / World "
        "Facts mean p(a)/(p(a)+sum p(perturbed)) (TOFU)."
    ),
)
def normalized_probability(loss: np.ndarray) -> np.ndarray:
    """(N,) -> (N,): `P(a|q)^(1/|a|)` per question."""
    return np.exp(-np.asarray(loss, dtype=np.float64))


def multiple_choice_probability(gt_loss: np.ndarray, perturbed_loss: np.ndarray) -> np.ndarray:
    """(N,), (N, K) -> (N,): `p(a) / (p(a) + sum_j p(pert_j))` with length-normalised p.

    TOFU scores Real Authors / World Facts this way because their answers are short entities
    whose raw probability says little without the alternatives.
    """
    true_p = normalized_probability(gt_loss)
    false_p = normalized_probability(perturbed_loss).sum(axis=-1)
    return true_p / (true_p + false_p)


def truth_ratio(
    paraphrased_loss: np.ndarray, perturbed_loss: np.ndarray, *, form: TruthRatioForm = "tofu_code"
) -> np.ndarray:
    """(N,), (N, K) -> (N,) per-question truth ratio R, oriented paraphrase over perturbed.

    `tofu_code` (default, what TOFU's `aggregate_eval_stat.py` computes and what the published
    figures use): `R = exp(mean_j loss(pert_j) - loss(para))`, the normalised paraphrase
    probability over the *geometric* mean of the normalised perturbed probabilities.
    `paper`: the paper's Eq. for R_truth uses the *arithmetic* mean of the perturbed
    probabilities and writes it perturbed-over-paraphrase; we return its inverse,
    `P(para)^(1/n) / mean_j P(pert_j)^(1/n_j)`, so both forms share one orientation and the
    same reporting transforms below apply.
    `prob_mean`: open-unlearning's "extent of knowledge" form (its `truth_ratio` metric with
    `aggregator: prob_mean`, used in its meta-evaluation): `c / (c + w)` with `c` the normalised
    paraphrase probability and `w` the geometric mean of the normalised perturbed ones, i.e.
    `R / (1 + R)` of the `tofu_code` R: in (0, 1), 1/2 when both are equally likely. A monotone
    function of `tofu_code`, so forget quality (a rank test) is the same p-value. It is reported
    as a plain mean on every set (`truth_ratio_score`).
    """
    para = np.asarray(paraphrased_loss, dtype=np.float64)
    pert = np.asarray(perturbed_loss, dtype=np.float64)
    if pert.ndim != 2 or pert.shape[0] != para.shape[0]:
        raise ValueError(f"perturbed_loss must be (N, K) with N={para.shape[0]}, got {pert.shape}")
    if form == "tofu_code":
        return np.exp(pert.mean(axis=-1) - para)
    if form == "paper":
        return np.exp(-para) / np.exp(-pert).mean(axis=-1)
    if form == "prob_mean":
        correct, wrong = np.exp(-para), np.exp(-pert.mean(axis=-1))
        return correct / (correct + wrong)
    raise ValueError(f"unknown truth ratio form {form!r}; use one of {TRUTH_RATIO_FORMS}")


@register_metric(
    "truth_ratio",
    direction="closer_to_retain",
    version=2,
    aggregation="mean",
    definition=(
        "R = exp(mean_j loss(pert_j) - loss(para)); forget set mean(min(R, 1/R)), other sets "
        "mean(max(0, 1 - 1/R)) (TOFU code)."
    ),
)
def truth_ratio_score(ratio: np.ndarray, *, form: TruthRatioForm, forget: bool) -> float:
    """The reported truth-ratio sub-score of one set: TOFU's transforms for the ratio forms
    (`forget_truth_ratio_score` on the forget set, `retained_truth_ratio_score` elsewhere), the
    plain mean for `prob_mean` (open-unlearning's aggregator of that name)."""
    if form == "prob_mean":
        return float(np.mean(np.asarray(ratio, dtype=np.float64)))
    return forget_truth_ratio_score(ratio) if forget else retained_truth_ratio_score(ratio)


def forget_truth_ratio_score(ratio: np.ndarray) -> float:
    """Forget set: `mean(min(R, 1/R))` — 1 when paraphrase and perturbed answers are equally likely,
    which is what a model that never saw the facts does."""
    ratio = np.asarray(ratio, dtype=np.float64)
    return float(np.mean(np.minimum(ratio, 1.0 / ratio)))


def retained_truth_ratio_score(ratio: np.ndarray) -> float:
    """Retain, Real Authors, World Facts: `mean(max(0, 1 - 1/R))` — high when the truth is preferred."""
    ratio = np.asarray(ratio, dtype=np.float64)
    return float(np.mean(np.maximum(0.0, 1.0 - 1.0 / ratio)))


@register_metric(
    "model_utility",
    direction="higher",
    version=2,
    aggregation="harmonic_mean",
    definition="harmonic mean of the 9 retain/real-authors/world-facts sub-scores.",
)
def model_utility(scores: Mapping[str, float]) -> float:
    """Harmonic mean of the nine {probability, rougeL, truth_ratio} x {retain, real_authors,
    world_facts} sub-scores. A zero anywhere makes utility zero, by design of the harmonic mean."""
    if len(scores) != 9:
        raise ValueError(
            f"model utility takes exactly 9 sub-scores, got {len(scores)}: {sorted(scores)}"
        )
    values = np.asarray(list(scores.values()), dtype=np.float64)
    if np.any(values < 0):
        raise ValueError(f"model utility sub-scores must be >= 0, got {dict(scores)}")
    return harmonic_mean(values)


def ks_test(candidate: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """Two-sample Kolmogorov-Smirnov test (scipy defaults: two-sided, exact/asymptotic auto).
    Returns (statistic, p-value)."""
    result = ks_2samp(
        np.asarray(candidate, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    )
    return float(result.statistic), float(result.pvalue)


@register_metric(
    "retain_ks_pvalue",
    direction="higher",
    version=2,
    aggregation="ks_pvalue",
    definition=(
        "p-value of the same KS test on the retain-set truth ratios (TOFU appendix E sanity check)."
    ),
)
@register_metric(
    "forget_quality",
    direction="higher",
    version=2,
    aggregation="ks_pvalue",
    definition=(
        "p-value of the two-sample KS test between forget-set truth ratios of the model and of a "
        "retain model."
    ),
)
@AGGREGATIONS.register("ks_pvalue")
def forget_quality(
    candidate_forget_ratio: np.ndarray, retain_model_forget_ratio: np.ndarray
) -> float:
    """TOFU forget quality: the KS p-value between the forget-set truth ratios of the evaluated
    model and of a model never trained on the forget set. High = indistinguishable."""
    return ks_test(candidate_forget_ratio, retain_model_forget_ratio)[1]


# The leaderboard's held-out forget quality (docs/report.md#which-step): the step is chosen on
# the selection half of the forget questions and reported on the other half, so the number shown
# is not the maximum of several noisy p-values over the same questions.
HALF_RESAMPLES = 1000
HALF_SEED = 0


def halves(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(selection, held-out) question indices: the even-numbered and the odd-numbered questions.
    TOFU lists each author's questions together, so both halves ask about every author."""
    order = np.arange(n)
    return order[0::2], order[1::2]


@register_metric(
    "forget_quality_held_out",
    direction="higher",
    version=1,
    aggregation="ks_pvalue",
    definition=(
        "forget quality on the odd-numbered forget questions (the step is chosen on the even-"
        "numbered ones), with its 95% bootstrap interval over those questions."
    ),
)
def held_out_quality(
    candidate: np.ndarray, reference: np.ndarray, *, resamples: int = HALF_RESAMPLES
) -> dict[str, float]:
    """Forget quality on each half of the same questions (`candidate[i]` and `reference[i]`: one
    question's truth ratio under the evaluated and the retain model): `selection` and `held_out`,
    and the held-out one's 95% percentile-bootstrap interval over its questions (`held_out_low`,
    `held_out_high`: the questions resampled with replacement, both models' ratios together;
    numpy `default_rng(HALF_SEED)`), which shows how far a KS p-value over so few questions moves
    with the questions asked."""
    candidate, reference = np.asarray(candidate, float), np.asarray(reference, float)
    if candidate.shape != reference.shape or candidate.size < 4:
        raise ValueError("held-out forget quality needs the same >= 4 questions on both sides")
    select, held = halves(candidate.size)
    rng = np.random.default_rng(HALF_SEED)
    picks = rng.integers(0, held.size, size=(resamples, held.size))
    # scipy's two-sided exact p-value depends on the statistic and the two sizes only, and with
    # equal sizes n the statistic is a multiple of 1/n: one KS test per distinct statistic.
    found: dict[int, float] = {}
    boot = []
    for pick in picks:
        x, y = candidate[held][pick], reference[held][pick]
        key = _ks_count(x, y)
        if key not in found:
            found[key] = ks_test(x, y)[1]
        boot.append(found[key])
    low, high = np.percentile(boot, [2.5, 97.5])
    return {
        "selection": ks_test(candidate[select], reference[select])[1],
        "held_out": ks_test(candidate[held], reference[held])[1],
        "held_out_low": float(low),
        "held_out_high": float(high),
    }


def _ks_count(x: np.ndarray, y: np.ndarray) -> int:
    """The KS statistic of two samples of the same size n, times n (an integer), as scipy
    computes the statistic (the largest gap between the two empirical CDFs)."""
    xs, ys = np.sort(x), np.sort(y)
    points = np.concatenate([xs, ys])
    gap = np.searchsorted(xs, points, side="right") - np.searchsorted(ys, points, side="right")
    return int(np.max(np.abs(gap)))
