"""Metrics for the data-transformation formats (Joshi et al., 2024, "Towards Robust Evaluation
of Unlearning in LLMs via Data Transformations"): the same facts asked as multiple choice
(MCQA, analogy-MCQA, odd-one-out, comprehension-MCQA), as cloze, and as QA. QA-style formats
are scored with ROUGE-L recall (`forgetbench.metrics.rouge`); the other two are here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from forgetbench.metrics.info import register_metric

LETTERS = "ABCD"


def _choice(i: int, logprobs: Mapping[str, float]) -> int:
    letters = "".join(sorted(logprobs))
    if len(letters) < 2 or not LETTERS.startswith(letters):
        raise ValueError(
            f"letter_logprobs[{i}] must offer the first 2-4 of {LETTERS!r} (options are lettered "
            f"in order), got letters {sorted(logprobs)}"
        )
    values = [float(logprobs[letter]) for letter in letters]
    if any(math.isnan(v) for v in values):
        raise ValueError(f"letter_logprobs[{i}] has NaN log-probs: {dict(logprobs)}")
    # Strict '>' scanning in letter order: a tie goes to the earliest letter, whatever the
    # mapping's iteration order, so repeated runs pick the same option.
    best = 0
    for j, value in enumerate(values):
        if value > values[best]:
            best = j
    return best


def mc_choice(letter_logprobs: Sequence[Mapping[str, float]]) -> np.ndarray:
    """Per question, the 0-based index (into "ABCD") of the offered letter with the highest
    next-token log-prob after the prompt. (N,) int64.

    Each mapping holds exactly the letters offered for that question — "A", "B" for a
    two-option question, up to "A".."D" — so a letter that was not offered can never be chosen
    even if the model prefers it: the formats paper scores the model's pick among the option
    letters, and an unoffered letter is no answer at all. Ties go to the first letter in
    alphabetical order (deterministic; with float log-probs they are rare).
    """
    return np.array(
        [_choice(i, lp) for i, lp in enumerate(letter_logprobs)], dtype=np.int64
    ).reshape(-1)


@register_metric(
    "format_mc_success",
    direction="closer_to_retain",
    version=2,
    aggregation="mean",
    definition=(
        "formats: share of MC questions whose highest next-token log-prob letter, among the "
        "offered letters, is right."
    ),
)
def mc_success(letter_logprobs: Sequence[Mapping[str, float]], labels: Sequence[int]) -> np.ndarray:
    """Per question 1.0 if `mc_choice` picks the right option, else 0.0. `labels` are 0-based
    option indices (0 = "A"). (N,); its mean is the format's success rate."""
    if len(letter_logprobs) != len(labels):
        raise ValueError(f"{len(letter_logprobs)} questions for {len(labels)} labels")
    for i, (logprobs, label) in enumerate(zip(letter_logprobs, labels, strict=True)):
        if not 0 <= label < len(logprobs):
            raise ValueError(
                f"labels[{i}] = {label} is not an offered option (letters {sorted(logprobs)})"
            )
    choices = mc_choice(letter_logprobs)
    return (choices == np.asarray(labels, dtype=np.int64)).astype(np.float64)


@register_metric(
    "cloze_probability",
    direction="closer_to_retain",
    version=2,
    aggregation="mean",
    definition=(
        "formats: mean P(span)^(1/n), the length-normalised probability of the masked cloze span."
    ),
)
def cloze_probability(logprob_sum: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Per item `exp(logprob_sum / tokens) = P(x_1..x_n)^(1/n)`: the length-normalised
    probability of the masked span given the question and the answer up to it (formats paper,
    cloze format). Normalising by length makes a multi-token span comparable with a short one.
    (N,), (N,) -> (N,) in (0, 1].
    """
    total = np.asarray(logprob_sum, dtype=np.float64)
    count = np.asarray(tokens)
    if total.shape != count.shape:
        raise ValueError(f"logprob_sum has shape {total.shape} but tokens has {count.shape}")
    if np.any(np.isnan(total)):
        raise ValueError(f"logprob_sum has NaN values: {total[np.isnan(total)]}")
    if np.any(count <= 0) or np.any(count != np.round(count)):
        raise ValueError(f"tokens must be positive whole counts, got {count.tolist()}")
    return np.exp(total / count)
