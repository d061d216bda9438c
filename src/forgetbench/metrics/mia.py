"""Membership-inference attacks (MIA) as pure functions of per-token log-probabilities.

Convention: every attack returns one **membership score per item, higher = more likely a
member** (seen in training). The reference implementations disagree on sign — open-unlearning's
attacks return loss-like scores (higher = non-member) and then label the *holdout* set 1 in the
AUC; the LUME / SemEval-2025 scorer negates the NLL and labels *members* 1. Both give the same
AUC, and so does ours: `attack_auc` labels members 1 and takes member-high scores, so an AUC of
1 means the model still tells its training items apart, 0.5 means it cannot, and our numbers
drop straight into `privleak` and the LUME MIA score.

Inputs are ragged: `token_logps[i]` is a 1-D array `log p(x_t | x_<t)` over the scored tokens
of item i (the answer or the whole text, as the caller chose), in text order.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import logsumexp

from forgetbench.metrics.aggregation import AGGREGATIONS
from forgetbench.metrics.info import register_metric

ATTACKS: dict[str, str] = {
    "loss": "mean token log-prob, i.e. -loss (Yeom et al., 2018)",
    "zlib": "mean token log-prob divided by the zlib-compressed length of the text "
    "(Carlini et al., 2021)",
    "min_k": "mean of the lowest k-fraction of token log-probs (Shi et al., 2024, Min-K% Prob)",
    "min_k_plus_plus": "mean of the lowest k-fraction of vocabulary-standardised token "
    "log-probs (Zhang et al., 2024, Min-K%++)",
}
"""The single-model attacks, by the name used in result keys (`mia/<name>`). The reference-model
attack (`reference_score`) is not listed: it needs a second model's log-probs."""


def _items(arrays: Sequence[np.ndarray], name: str) -> list[np.ndarray]:
    """Validate ragged per-item arrays: each 1-D, non-empty and finite."""
    if len(arrays) == 0:
        raise ValueError(f"{name} is empty: an attack needs at least one item")
    items = []
    for i, a in enumerate(arrays):
        a = np.asarray(a, dtype=np.float64)
        if a.ndim != 1 or a.size == 0:
            raise ValueError(f"{name}[{i}] must be a non-empty 1-D array, got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name}[{i}] has non-finite values: {a.tolist()}")
        items.append(a)
    return items


def _check_k(k: float) -> None:
    if not 0.0 < k <= 1.0:
        raise ValueError(f"k must be in (0, 1], got {k}")


def _lowest_fraction_mean(values: np.ndarray, k: float) -> float:
    """Mean of the `max(1, int(k * n))` smallest values.

    Floor, as the Min-K% reference code (`int(len(probs) * ratio)`) and open-unlearning do, so
    our scores match theirs; the floor of one token is open-unlearning's guard so that a short
    answer (k * n < 1) still has a score rather than the mean of nothing.
    """
    count = max(1, int(k * values.size))
    return float(np.mean(np.sort(values)[:count]))


@register_metric(
    "mia/loss",
    direction="closer_to_retain",
    version=2,
    aggregation="roc_auc",
    definition=(
        "AUC of the LOSS attack (mean token log-prob) separating forget members from holdout non-"
        "members; members labelled 1."
    ),
)
def loss_score(token_logps: Sequence[np.ndarray]) -> np.ndarray:
    """LOSS attack (Yeom et al., 2018, "Privacy Risk in Machine Learning"): per item the mean
    token log-prob, i.e. -loss. Training lowers the loss of what was trained on, so members score
    higher. Returns (N,)."""
    return np.array([a.mean() for a in _items(token_logps, "token_logps")])


@register_metric(
    "mia/zlib",
    direction="closer_to_retain",
    version=2,
    aggregation="roc_auc",
    definition=(
        "AUC of the zlib attack: mean token log-prob / zlib-compressed length of the text in "
        "bytes (Carlini et al., 2021)."
    ),
)
def zlib_score(token_logps: Sequence[np.ndarray], texts: Sequence[str]) -> np.ndarray:
    """zlib attack (Carlini et al., 2021, "Extracting Training Data from Large Language Models",
    Sec. 5.1): the mean token log-prob divided by the zlib-compressed length of the text in bytes
    (UTF-8, `zlib.compress` default level).

    Why: a low loss on a text that is simple anyway (repetitive, easy to compress) is weak
    evidence of membership; dividing by the compressed length calibrates the loss by the text's
    own entropy. We use the *mean* NLL (log perplexity), as Carlini et al. (perplexity over zlib
    entropy), the Min-K% paper's code and open-unlearning do, not the summed NLL; we negate it so
    that higher = member (open-unlearning returns `loss / zlib_len`, higher = non-member).
    Returns (N,).
    """
    items = _items(token_logps, "token_logps")
    if len(texts) != len(items):
        raise ValueError(f"{len(texts)} texts for {len(items)} token_logps items")
    sizes = np.array([len(zlib.compress(t.encode("utf-8"))) for t in texts], dtype=np.float64)
    return np.array([a.mean() for a in items]) / sizes


@register_metric(
    "mia/min_k",
    direction="closer_to_retain",
    version=2,
    aggregation="roc_auc",
    definition=(
        "AUC of Min-K% Prob: mean of the lowest max(1, int(k*n)) token log-probs, k = 0.4 (Shi et"
        " al., 2024)."
    ),
)
def min_k_score(token_logps: Sequence[np.ndarray], *, k: float = 0.4) -> np.ndarray:
    """Min-K% Prob (Shi et al., 2024, "Detecting Pretraining Data from Large Language Models"):
    the mean of the lowest k-fraction of token log-probs.

    Why: an unseen text usually contains a few outlier tokens with very low probability, while a
    member has fewer; averaging only the worst tokens focuses on them instead of diluting them in
    the full mean. Tokens used: `max(1, int(k * n))` (floor, as the reference code; at least one
    so short answers are scored). Returns (N,).
    """
    _check_k(k)
    return np.array([_lowest_fraction_mean(a, k) for a in _items(token_logps, "token_logps")])


@register_metric(
    "mia/min_k_plus_plus",
    direction="closer_to_retain",
    version=2,
    aggregation="roc_auc",
    definition=(
        "AUC of Min-K%++: lowest-k mean of (log p(x_t) - mu_t) / sigma_t over the vocabulary "
        "distribution (Zhang et al., 2024)."
    ),
)
def min_k_plus_plus_score(
    token_logps: Sequence[np.ndarray],
    token_mean: Sequence[np.ndarray],
    token_std: Sequence[np.ndarray],
    *,
    k: float = 0.4,
    min_std: float = 1e-3,
) -> np.ndarray:
    """Min-K%++ (Zhang et al., 2024, "Min-K%++: Improved Baseline for Detecting Pre-Training
    Data from Large Language Models"): per token the standardised log-prob
    `(log p(x_t) - mu_t) / sigma_t`, with `mu_t = E_{z ~ p(.|x_<t)}[log p(z|x_<t)]` and `sigma_t`
    the standard deviation of `log p(z|x_<t)` under the same distribution; then the mean of the
    lowest k-fraction (`max(1, int(k * n))` tokens, as `min_k_score`).

    Why: training makes a member's tokens local maxima of the likelihood, so they sit high
    relative to the model's whole next-token distribution, not merely high in absolute terms;
    standardising by the distribution's mean and spread removes how peaked each position is.

    `token_mean[i]`, `token_std[i]` are aligned with `token_logps[i]`. A `sigma_t` below
    `min_std` is raised to it: a near one-hot distribution has sigma ~ 0 and would blow the
    score up; open-unlearning clamps the variance at 1e-6, i.e. sigma at 1e-3, our default.
    Returns (N,).
    """
    _check_k(k)
    if min_std <= 0:
        raise ValueError(f"min_std must be > 0, got {min_std}")
    logps = _items(token_logps, "token_logps")
    means = _items(token_mean, "token_mean")
    stds = _items(token_std, "token_std")
    if not len(logps) == len(means) == len(stds):
        raise ValueError(
            f"token_logps, token_mean and token_std have {len(logps)}, {len(means)} and "
            f"{len(stds)} items; they must be aligned"
        )
    scores = []
    for i, (lp, mu, sigma) in enumerate(zip(logps, means, stds, strict=True)):
        if not lp.shape == mu.shape == sigma.shape:
            raise ValueError(
                f"item {i}: token_logps, token_mean, token_std have shapes {lp.shape}, "
                f"{mu.shape}, {sigma.shape}; they must be aligned per token"
            )
        if np.any(sigma < 0):
            raise ValueError(f"token_std[{i}] has negative values: {sigma.tolist()}")
        scores.append(_lowest_fraction_mean((lp - mu) / np.maximum(sigma, min_std), k))
    return np.array(scores)


@register_metric(
    "mia/reference",
    direction="closer_to_retain",
    version=1,
    aggregation="roc_auc",
    definition=(
        "AUC of the reference attack: the model's mean answer-token log-prob minus a reference "
        "(retain) model's, per item."
    ),
)
def reference_score(
    token_logps: Sequence[np.ndarray], reference_token_logps: Sequence[np.ndarray]
) -> np.ndarray:
    """Reference-model attack (Carlini et al., 2021; Mireshghallah et al., 2022): target mean
    token log-prob minus a reference model's mean token log-prob on the same text.

    Why: some texts are easy for any model; subtracting what a model that never saw the item
    assigns it isolates what training added. The two models may tokenise differently, so the
    item arrays need not have equal lengths — only the per-item means are compared. Returns (N,).
    """
    target = _items(token_logps, "token_logps")
    reference = _items(reference_token_logps, "reference_token_logps")
    if len(target) != len(reference):
        raise ValueError(f"{len(target)} target items for {len(reference)} reference items")
    return np.array([t.mean() - r.mean() for t, r in zip(target, reference, strict=True)])


@AGGREGATIONS.register("roc_auc")
def attack_auc(member_scores: np.ndarray, nonmember_scores: np.ndarray) -> float:
    """ROC AUC of separating members (label 1) from non-members (label 0) by a member-high score
    (`sklearn.metrics.roc_auc_score`): the probability that a random member outscores a random
    non-member, ties counting one half. 0.5 = no leakage, 1 = members fully identifiable."""
    # Lazy: sklearn costs ~0.35 s and the package imports this module for its registrations, also
    # where nothing is scored (the report); only computing an AUC needs it.
    from sklearn.metrics import roc_auc_score

    members = np.asarray(member_scores, dtype=np.float64).ravel()
    nonmembers = np.asarray(nonmember_scores, dtype=np.float64).ravel()
    for name, values in (("member_scores", members), ("nonmember_scores", nonmembers)):
        if values.size == 0:
            raise ValueError(f"{name} is empty: the AUC needs members and non-members")
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{name} has non-finite values: {values[~np.isfinite(values)]}")
    labels = np.concatenate([np.ones(members.size), np.zeros(nonmembers.size)])
    return float(roc_auc_score(labels, np.concatenate([members, nonmembers])))


@register_metric(
    "muse/privleak",
    direction="closer_to_retain",
    version=1,
    aggregation="roc_auc",
    definition=(
        "MUSE PrivLeak: privleak of the Min-K% (k = 0.4) AUC of MUSE's privleak forget set "
        "against its holdout set, relative to a retain model's AUC, x100."
    ),
)
@register_metric(
    "privleak",
    direction="closer_to_retain",
    version=2,
    aggregation="roc_auc",
    definition=(
        "((1 - AUC) - (1 - AUC_retain)) / (1 - AUC_retain) * 100 for an MIA AUC (MUSE); ~0 is "
        "best, negative = still leaks."
    ),
)
def privleak(auc: float, retain_auc: float) -> float:
    """PrivLeak (Shi et al., 2024, MUSE; open-unlearning's `privleak`):
    `((1 - AUC) - (1 - AUC_retain)) / (1 - AUC_retain) * 100`.

    The relative gap, in percent, between the unlearned model's MIA AUC and a retain model's on
    the same forget-vs-holdout data. ~0 is best (as leaky as a model that never saw the forget
    set); strongly negative = still leaks membership (under-unlearning); positive = forget items
    now look *less* familiar than unseen ones (over-unlearning, itself a signal). MUSE reports
    AUC as 1 - ours, hence the complements. open-unlearning adds 1e-10 to the denominator; we
    raise instead when `retain_auc == 1`, where the ratio is undefined.
    """
    for name, value in (("auc", auc), ("retain_auc", retain_auc)):
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    if retain_auc == 1.0:
        raise ValueError(
            "retain_auc == 1: privleak divides by 1 - retain_auc, which is 0 here; a retain "
            "model that perfectly separates forget from holdout items makes the ratio undefined"
        )
    return ((1.0 - auc) - (1.0 - retain_auc)) / (1.0 - retain_auc) * 100.0


# --- TPR at a low FPR ------------------------------------------------------------------------

LOW_FPRS: dict[str, float] = {"tpr@1%fpr": 0.01, "tpr@0.1%fpr": 0.001}
"""The low false-positive rates reported for every attack, by result-key suffix
(`mia/<attack>/tpr@1%fpr`). Carlini et al. (2022) argue an attack matters when it identifies some
members confidently, which the AUC averages away."""


def min_nonmembers(fpr: float) -> int:
    """Fewest non-members at which TPR at `fpr` is measured rather than made up: `ceil(1 / fpr)`,
    so that at least one non-member may score above the threshold (n * fpr >= 1). With fewer, the
    lowest non-zero FPR the data can show is 1/n > fpr, and any value at `fpr` would be an
    interpolation between (0, TPR(0)) and (1/n, TPR(1/n)) with nothing measured in between."""
    if not 0.0 < fpr < 1.0:
        raise ValueError(f"fpr must be in (0, 1), got {fpr}")
    # The tolerance keeps 1 / 0.01 = 100.00000000000001 at 100.
    return math.ceil(1.0 / fpr - 1e-9)


@register_metric(
    "mia/tpr@0.1%fpr",
    direction="closer_to_retain",
    version=1,
    aggregation="tpr_at_fpr",
    definition=(
        "TPR of an MIA attack at 0.1% FPR, as at 1%; None with fewer than 1000 non-members."
    ),
)
@register_metric(
    "mia/tpr@1%fpr",
    direction="closer_to_retain",
    version=1,
    aggregation="tpr_at_fpr",
    definition=(
        "TPR of an MIA attack at 1% FPR, linear interpolation on the ROC curve; None (not "
        "resolvable) with fewer than 100 non-members."
    ),
)
@AGGREGATIONS.register("tpr_at_fpr")
def tpr_at_fpr(member_scores: np.ndarray, nonmember_scores: np.ndarray, fpr: float) -> float | None:
    """TPR at false-positive rate `fpr` from the ROC curve, members labelled 1, higher score =
    member; None when there are fewer than `min_nonmembers(fpr)` non-members ("not resolvable").

    The ROC: one point per distinct score threshold (`sklearn.metrics.roc_curve` with
    `drop_intermediate=False`, starting at (0, 0)). Between two consecutive points the curve is
    the straight line, which a randomised threshold achieves: the ties at a score are flagged
    with the probability that moves along the segment. TPR at `fpr` is the curve's highest TPR
    at that FPR, i.e. at a point that lies on a vertical run of the curve (several members tied
    above the next non-member) the top of the run, else the linear interpolation between the last
    point with FPR <= fpr and the next one."""
    from sklearn.metrics import roc_curve  # lazy, as in attack_auc

    members = np.asarray(member_scores, dtype=np.float64).ravel()
    nonmembers = np.asarray(nonmember_scores, dtype=np.float64).ravel()
    for name, values in (("member_scores", members), ("nonmember_scores", nonmembers)):
        if values.size == 0:
            raise ValueError(f"{name} is empty: a ROC curve needs members and non-members")
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{name} has non-finite values: {values[~np.isfinite(values)]}")
    if nonmembers.size < min_nonmembers(fpr):
        return None
    labels = np.concatenate([np.ones(members.size), np.zeros(nonmembers.size)])
    fprs, tprs, _ = roc_curve(
        labels, np.concatenate([members, nonmembers]), drop_intermediate=False
    )
    # FPRs are non-decreasing; the last point at or below `fpr` is the top of any vertical run.
    last = int(np.searchsorted(fprs, fpr, side="right")) - 1
    if fprs[last] == fpr or last == len(fprs) - 1:
        return float(tprs[last])
    f0, f1, t0, t1 = fprs[last], fprs[last + 1], tprs[last], tprs[last + 1]
    return float(t0 + (t1 - t0) * (fpr - f0) / (f1 - f0))


def attack_summary(
    prefix: str, member_scores: Sequence[float], nonmember_scores: Sequence[float]
) -> dict[str, Any]:
    """`{prefix}` (AUC) and `{prefix}/tpr@...fpr` for each of `LOW_FPRS`, from one attack's
    per-item scores."""
    members = np.asarray(member_scores, dtype=np.float64)
    nonmembers = np.asarray(nonmember_scores, dtype=np.float64)
    out: dict[str, Any] = {prefix: attack_auc(members, nonmembers)}
    for suffix, fpr in LOW_FPRS.items():
        out[f"{prefix}/{suffix}"] = tpr_at_fpr(members, nonmembers, fpr)
    return out


# --- Attacks with shadow models --------------------------------------------------------------


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
