"""Membership attacks with shadow models (Carlini et al., 2022): online LiRA with a fixed
variance (`lira_score`) and RMIA (`rmia_score`), from the target model's statistic per candidate
and the shadow models' on the same candidates, each shadow trained on a seeded half of them.
Scores are higher = member, as `metrics/mia.py`'s single-model attacks."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import logsumexp

from forgetbench.metrics.info import register_metric


def _shadow_inputs(
    target: Sequence[float], shadow_scores: np.ndarray, shadow_members: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    target_ = np.asarray(target, dtype=np.float64).ravel()
    scores = np.asarray(shadow_scores, dtype=np.float64)
    members = np.asarray(shadow_members, dtype=bool)
    if scores.ndim != 2 or scores.shape[1] != target_.size or scores.shape != members.shape:
        raise ValueError(
            f"shadow_scores {scores.shape} and shadow_members {members.shape} must both be "
            f"(shadows, {target_.size}): one row per shadow model, one column per candidate"
        )
    for name, values in (("target", target_), ("shadow_scores", scores)):
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{name} has non-finite values")
    return target_, scores, members


@register_metric(
    "mia/lira",
    direction="closer_to_retain",
    version=2,
    aggregation="roc_auc",
    definition=(
        "AUC of online LiRA with fixed variance over the shadow models' mean answer-token log-"
        "probs (Carlini et al., 2022)."
    ),
)
def lira_score(
    target: Sequence[float],
    shadow_scores: np.ndarray,
    shadow_members: np.ndarray,
    *,
    min_std: float = 1e-3,
) -> np.ndarray:
    """Online LiRA with a fixed variance (Carlini et al., 2022, "Membership Inference Attacks From
    First Principles", Alg. 1 and Sec. VI-B's "fixed variance" for few shadow models).

    Per candidate x: the target model's statistic s(x) (here the mean answer-token log-prob, the
    LOSS score: already an unbounded, roughly Gaussian quantity, as the logit-scaled confidence
    is for the paper's classifiers), the shadows that trained on x give mu_in(x), the others
    mu_out(x); the score is the log-likelihood ratio
    `log N(s; mu_in, sigma_in^2) - log N(s; mu_out, sigma_out^2)`, higher = member. sigma_in and
    sigma_out are each pooled over all candidates (the standard deviation of s_i(x) - mu(x) over
    every IN, resp. OUT, pair), floored at `min_std`: with a handful of shadows a per-example
    variance is mostly noise, which is why the paper fixes it.

    `shadow_scores[i, j]`: shadow i's statistic on candidate j; `shadow_members[i, j]`: whether
    shadow i trained on candidate j. Every candidate needs at least one IN and one OUT shadow.
    Returns (N,)."""
    target_, scores, members = _shadow_inputs(target, shadow_scores, shadow_members)
    ins, outs = members.sum(axis=0), (~members).sum(axis=0)
    if np.any(ins == 0) or np.any(outs == 0):
        raise ValueError(
            "online LiRA needs every candidate in at least one shadow's training data and out of "
            "at least one other's"
        )
    mu_in = np.where(members, scores, 0.0).sum(axis=0) / ins
    mu_out = np.where(~members, scores, 0.0).sum(axis=0) / outs
    sigma_in = max(float(np.sqrt(np.mean((scores - mu_in)[members] ** 2))), min_std)
    sigma_out = max(float(np.sqrt(np.mean((scores - mu_out)[~members] ** 2))), min_std)

    def log_normal(x: np.ndarray, mu: np.ndarray, sigma: float) -> np.ndarray:
        return -0.5 * ((x - mu) / sigma) ** 2 - math.log(sigma)

    return log_normal(target_, mu_in, sigma_in) - log_normal(target_, mu_out, sigma_out)


@register_metric(
    "mia/rmia",
    direction="closer_to_retain",
    version=2,
    aggregation="roc_auc",
    definition=(
        "AUC of online RMIA over the shadow models, population = the other candidates, gamma = "
        "eval.mia_rmia_gamma (Zarifzadeh et al., 2024)."
    ),
)
def rmia_score(
    target: Sequence[float], shadow_scores: np.ndarray, *, gamma: float = 1.0
) -> np.ndarray:
    """RMIA (Zarifzadeh et al., 2024, "Low-Cost High-Power Membership Inference Attacks", Eq. 4),
    online: the reference models are all the shadows, which trained on a random half of the
    candidates each, so for every x about half are IN and half OUT and their average estimates
    Pr(x) over models trained with or without it (the paper's online Pr(x); no offline scaling
    `a` is needed).

    With statistics s = mean answer-token log-prob, Pr(x|theta) = exp(s(x)) (the geometric-mean
    token probability, which keeps a long answer's product from underflowing) and
    `ratio(x) = Pr(x|theta) / mean_i Pr(x|theta_i)`. The score of x is the fraction of the
    population z with `ratio(x) / ratio(z) >= gamma`. Population: every other candidate (the
    forget and holdout items but x). It uses no membership label of the target, only the pool
    the shadows were drawn from: half of it are the target's members, which the paper's
    population data are not; `ratio(z)` of a member is high, so this costs power but not
    validity. gamma = 1 (our default): x must look more member-like than z relative to the
    reference models. Returns (N,)."""
    if gamma <= 0:
        raise ValueError(f"gamma must be > 0, got {gamma}")
    target_, scores, _ = _shadow_inputs(target, shadow_scores, np.zeros(shadow_scores.shape))

    # log ratio(x) = s(x) - log mean_i exp(s_i(x))
    log_ratio = target_ - (logsumexp(scores, axis=0) - math.log(scores.shape[0]))
    pairwise = log_ratio[:, None] - log_ratio[None, :] >= math.log(gamma)
    np.fill_diagonal(pairwise, False)
    others = max(target_.size - 1, 1)
    return pairwise.sum(axis=1) / others
