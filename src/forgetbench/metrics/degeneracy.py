"""Degenerate generations: text that repeats itself instead of saying something. Over-unlearnt
models answer `iaiaiaia...` or `Ulla Ulla Ulla ...`; a model that never saw the forget set still
answers in sentences. The measure is a repeated n-gram one, on characters so that it sees a word
repeated (`Ulla Ulla`) and a syllable repeated inside one long word (`iaiaia`) alike:

    distinct 3-grams = |set of character 3-grams| / |character 3-grams|

An English sentence of 40-200 characters repeats few of its 3-grams (about 0.8-0.95 distinct);
`Ulla Ulla Ulla Ulla Ulla Ulla` has 5 distinct of 27 (0.19), `iaiaiaiaia` 2 of 8. A generation is
degenerate when it is empty (the model says nothing at all) or when it has at least
`MIN_CHARS` characters and fewer than `DISTINCT_BAR` of its 3-grams are distinct. Shorter texts
(a name, a date) are never called degenerate: they have too few 3-grams to repeat."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from forgetbench.metrics.info import register_metric

N = 3
MIN_CHARS = 12
DISTINCT_BAR = 0.5


def distinct_ngrams(text: str, n: int = N) -> float | None:
    """The share of `text`'s character n-grams that are distinct (whitespace runs read as one
    space), None when it has none."""
    flat = " ".join(text.split())
    grams = [flat[i : i + n] for i in range(len(flat) - n + 1)]
    return len(set(grams)) / len(grams) if grams else None


def is_degenerate(text: str) -> bool:
    flat = " ".join(text.split())
    if not flat:
        return True
    if len(flat) < MIN_CHARS:
        return False
    share = distinct_ngrams(flat)
    return share is not None and share < DISTINCT_BAR


@register_metric(
    "degenerate",
    direction="closer_to_retain",
    version=1,
    aggregation="mean",
    definition=(
        "share of greedy generations that are empty, or of at least 12 characters with fewer "
        "than half of their character 3-grams distinct (repetition instead of an answer)."
    ),
)
def degenerate_items(generations: Sequence[str]) -> np.ndarray:
    """Per generation: 1.0 when degenerate, else 0.0."""
    return np.array([float(is_degenerate(g)) for g in generations])
