"""From before/after numbers to what an attack brought back."""

from __future__ import annotations

from collections.abc import Sequence

# Below this gap between the finetuned and the unlearned model's score, the model forgot (almost)
# nothing on that metric, and a ratio to the gap would be noise divided by noise.
MIN_GAP = 1e-3


def knowledge_recovered(
    after: float | None, unlearned: float | None, finetuned: float | None
) -> float | None:
    """(after - unlearned) / (finetuned - unlearned): 0 when the attack changed nothing, 1 when it
    gave back the finetuned model's score; negative when it pushed further away, above 1 past it.
    None when a number is missing or the unlearned model is within `MIN_GAP` of the finetuned one
    (nothing was forgotten to recover)."""
    if after is None or unlearned is None or finetuned is None:
        return None
    gap = finetuned - unlearned
    if abs(gap) < MIN_GAP:
        return None
    return (after - unlearned) / gap


def steps_to_reach(
    curve: Sequence[tuple[int, float]], target: float | None, *, fraction: float
) -> int | None:
    """The first step (of `(step, score)` pairs in step order) whose score reaches `fraction` x
    `target`; None when none does within the budget (or there is no target)."""
    if target is None:
        return None
    for step, score in curve:
        if score >= fraction * target:
            return step
    return None
