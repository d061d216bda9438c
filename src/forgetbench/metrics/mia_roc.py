"""How well a membership score separates members from non-members: the ROC AUC (`attack_auc`,
members labelled 1), the TPR at a low false-positive rate (`tpr_at_fpr`, with the fewest
non-members that resolve it), one attack's whole summary (`attack_summary`), and MUSE's PrivLeak,
an AUC relative to a retain model's (`privleak`). The scores come from `metrics/mia.py`'s
attacks and `metrics/mia_shadow.py`'s, higher = member."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from forgetbench.metrics.aggregation import AGGREGATIONS
from forgetbench.metrics.info import register_metric


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
