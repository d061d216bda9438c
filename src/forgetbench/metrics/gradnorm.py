"""The gradient-norm membership attack, as open-unlearning runs it (`evals/metrics/mia/
gradnorm.py`, which cites arXiv 2402.17012 for the attack on LLM pre-training data).

Why: a text the model was trained on sits near a minimum of its loss, so the gradient of that
loss with respect to the weights is small; an unseen text pulls harder."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from forgetbench.metrics.info import register_metric


@register_metric(
    "mia/gradnorm",
    direction="closer_to_retain",
    version=1,
    aggregation="roc_auc",
    definition=(
        "AUC of the gradient-norm attack: minus the mean over parameter tensors of the p-norm "
        "(p = 2) of the gradient of the item's mean token NLL (open-unlearning's mia_gradnorm)."
    ),
)
def gradnorm_score(grad_norms: Sequence[np.ndarray]) -> np.ndarray:
    """Per item, minus the mean of `grad_norms[i]`: the p-norm of the gradient of each parameter
    tensor that has one (`forgetbench.eval.outputs.gradient_norms`). open-unlearning scores the
    mean itself (higher = non-member) and labels the holdout set 1 in its AUC; negated, higher =
    member, the convention of every attack here (`forgetbench.metrics.mia`), and the AUC is the
    same. Returns (N,)."""
    if len(grad_norms) == 0:
        raise ValueError("grad_norms is empty: the attack needs at least one item")
    scores = []
    for i, norms in enumerate(grad_norms):
        array = np.asarray(norms, dtype=np.float64)
        if array.ndim != 1 or array.size == 0:
            raise ValueError(f"grad_norms[{i}] must be a non-empty 1-D array, got {array.shape}")
        if not np.all(np.isfinite(array)) or np.any(array < 0):
            raise ValueError(f"grad_norms[{i}] must be finite and non-negative: {array.tolist()}")
        scores.append(-float(array.mean()))
    return np.array(scores)
