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

import numpy as np

from forgetbench.metrics.aggregation import AGGREGATIONS

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


def loss_score(token_logps: Sequence[np.ndarray]) -> np.ndarray:
    """LOSS attack (Yeom et al., 2018, "Privacy Risk in Machine Learning"): per item the mean
    token log-prob, i.e. -loss. Training lowers the loss of what was trained on, so members score
    higher. Returns (N,)."""
    return np.array([a.mean() for a in _items(token_logps, "token_logps")])


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
