"""ROUGE recall as TOFU computes it: `rouge_score` with the Porter stemmer, recall of the
generation against the ground truth."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from forgetbench.metrics.info import register_metric


@lru_cache(maxsize=1)
def _scorer():
    # Lazy: rouge_score (with nltk) costs ~0.25 s, and every `forgetbench.metrics` import (the report
    # reads lume's MMLU bar) loads this module; only a generation's scoring needs it.
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)


@register_metric(
    "format_rougeL",
    direction="closer_to_retain",
    version=2,
    aggregation="mean",
    definition="formats: mean ROUGE-L recall of the greedy answer on the QA-style formats.",
)
@register_metric(
    "rougeL",
    direction="closer_to_retain",
    version=2,
    aggregation="mean",
    definition="mean ROUGE-L recall of the greedy answer (rouge_score, Porter stemmer).",
)
def rouge_recall(generations: Sequence[str], references: Sequence[str]) -> dict[str, np.ndarray]:
    """Per item: {"rouge1_recall": (N,), "rougeL_recall": (N,)}."""
    if len(generations) != len(references):
        raise ValueError(f"{len(generations)} generations for {len(references)} references")
    scores = [_scorer().score(ref, gen) for gen, ref in zip(generations, references, strict=True)]
    return {
        "rouge1_recall": np.array([s["rouge1"].recall for s in scores]),
        "rougeL_recall": np.array([s["rougeL"].recall for s in scores]),
    }
