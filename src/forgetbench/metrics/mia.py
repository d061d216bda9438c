"""Membership-inference attacks (MIA) on one model, or one against a reference model, as pure
functions of per-token log-probabilities. The attacks with shadow models are
`metrics/mia_shadow.py`'s; the AUC, TPR at low FPR and PrivLeak that score them all,
`metrics/mia_roc.py`'s.

Convention: every attack returns one **membership score per item, higher = more likely a
member** (seen in training). The reference implementations disagree on sign — open-unlearning's
attacks return loss-like scores (higher = non-member) and then label the *holdout* set 1 in the
AUC; the LUME / SemEval-2025 scorer negates the NLL and labels *members* 1. Both give the same
AUC, and so does ours: `mia_roc.attack_auc` labels members 1 and takes member-high scores, so
an AUC of 1 means the model still tells its training items apart, 0.5 means it cannot, and our
numbers drop straight into `privleak` and the LUME MIA score.

Inputs are ragged: `token_logps[i]` is a 1-D array `log p(x_t | x_<t)` over the scored tokens
of item i (the answer or the whole text, as the caller chose), in text order.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

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
