"""MUSE's memorisation metrics (Shi et al., 2024, "MUSE: Machine Unlearning Six-Way Evaluation
for Language Models"), as its evaluation code (`metrics/verbmem.py`, `metrics/knowmem.py`,
`metrics/logger.py`) computes them: ROUGE-L F1 (`rouge_score`, no stemmer) of a greedy
generation against the reference, averaged over items and reported x100.

PrivLeak is `forgetbench.metrics.mia_roc.privleak` on the Min-K% (k = 40 %) AUC of the privleak
forget set against its holdout set (registered there as `muse/privleak`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from forgetbench.metrics.aggregation import AGGREGATIONS
from forgetbench.metrics.info import register_metric
from forgetbench.metrics.mia_roc import privleak

# MUSE's knowmem cuts the answer before the first of these (`get_prefix_before_words_occur`): a
# few-shot prompt invites the model to go on with the next "Question:".
STOP_STRINGS = ("\n\n", "\nQuestion", "Question:")


@lru_cache(maxsize=1)
def _scorer():
    # Lazy, as rouge.py's: rouge_score with nltk costs ~0.25 s and only scoring needs it.
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def _rouge_l_f1(generations: Sequence[str], references: Sequence[str]) -> np.ndarray:
    if len(generations) != len(references):
        raise ValueError(f"{len(generations)} generations for {len(references)} references")
    return np.array(
        [
            _scorer().score(ref, gen)["rougeL"].fmeasure
            for gen, ref in zip(generations, references, strict=True)
        ]
    )


@AGGREGATIONS.register("mean_x100")
def mean_x100(values: Sequence[float]) -> float:
    """Mean over items times 100: MUSE reports its ROUGE scores in percent (`agg[...] * 100`)."""
    return float(np.mean(np.asarray(values, dtype=np.float64)) * 100.0)


@register_metric(
    "muse/verbmem_f",
    direction="closer_to_retain",
    version=1,
    aggregation="mean_x100",
    definition=(
        "MUSE VerbMem on the forget set: ROUGE-L F1 of the greedy 128-token continuation of each "
        "verbmem prompt against its gt cut to 128 tokens, mean x100."
    ),
)
def verbmem(generations: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """Per prompt the ROUGE-L F1 of the continuation against the reference (N,). The reference is
    MUSE's `gt` already cut to the generation's budget: its first 128 tokens as the tokenizer
    gives them (BOS included when it adds one), decoded without special tokens
    (`forgetbench.eval.tasks.muse.cut_reference`)."""
    return _rouge_l_f1(generations, references)


def cut_at_stop_strings(text: str, stops: Sequence[str] = STOP_STRINGS) -> str:
    """`text` before the first occurrence of any of `stops` (MUSE cuts by each in turn, which
    keeps the same prefix)."""
    for stop in stops:
        text = text.split(stop)[0]
    return text


@register_metric(
    "muse/knowmem_r",
    direction="higher",
    version=1,
    aggregation="mean_x100",
    definition=(
        "MUSE KnowMem on the retain set (utility preserved): ROUGE-L F1 of the greedy few-shot "
        "answer (32 tokens, cut at MUSE's stop strings) against the answer, mean x100."
    ),
)
@register_metric(
    "muse/knowmem_f",
    direction="closer_to_retain",
    version=1,
    aggregation="mean_x100",
    definition=(
        "MUSE KnowMem on the forget set: ROUGE-L F1 of the greedy few-shot answer (32 tokens, cut "
        "at MUSE's stop strings) against the answer, mean x100."
    ),
)
def knowmem(generations: Sequence[str], answers: Sequence[str]) -> np.ndarray:
    """Per question the ROUGE-L F1 of the generation, cut before MUSE's stop strings, against
    the reference answer (N,)."""
    return _rouge_l_f1([cut_at_stop_strings(g) for g in generations], answers)


PRIVLEAK_ATTACK = "min_k"  # MUSE's privleak_auc_key 'forget_holdout_Min-40%'


def privleak_scores(
    scores: Mapping[str, Any], retain_scores: Mapping[str, Any] | None
) -> dict[str, Any]:
    """`muse/privleak` of one model's scores against a retain model's (its evaluation, or its
    log's scores): MUSE's PrivLeak on the Min-K% AUC, x100, ~0 best, negative = still leaks.
    None without a retain model: MUSE's own code falls back to AUCs it measured on its Llama-2
    retrained model (`AUC_RETRAIN`), which say nothing of another model."""
    key = f"muse/mia/{PRIVLEAK_ATTACK}"
    if key not in scores:
        return {}
    retain_auc = None if retain_scores is None else retain_scores.get(key)
    # At a retain AUC of 1 the ratio is undefined (`privleak` raises): no value, as in the TOFU
    # rows' privleak.
    undefined = retain_auc is None or retain_auc >= 1.0
    value = None if undefined else privleak(scores[key], retain_auc)
    return {"muse/privleak": value}
