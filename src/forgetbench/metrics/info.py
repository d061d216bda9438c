"""What each reported metric means: its direction, a version that changes with its numbers, and
the aggregation (`forgetbench.metrics.aggregation`) that turns its per-item values into it.

Version 2 of every metric scored on QA prompts: prompt and answer tokenised as one text (TOFU's and
open-unlearning's convention) instead of apart; memorisation also leaves out the final EOS."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class MetricInfo:
    """`aggregation` names an entry of `forgetbench.metrics.aggregation.AGGREGATIONS`. Metrics that
    transform an AUC (privleak, the LUME MIA score) name the AUC's aggregation; those combining
    other reported scores (model utility, the LUME aggregates) name how they combine them."""

    name: str
    direction: Literal["higher", "lower", "closer_to_retain"]
    version: int
    aggregation: str
    definition: str


METRICS: dict[str, MetricInfo] = {
    m.name: m
    for m in (
        MetricInfo(
            "probability",
            "closer_to_retain",
            2,
            "mean",
            "mean exp(-loss(a|q)) with loss the mean NLL per answer token; on Real Authors / World "
            "Facts mean p(a)/(p(a)+sum p(perturbed)) (TOFU).",
        ),
        MetricInfo(
            "rougeL",
            "closer_to_retain",
            2,
            "mean",
            "mean ROUGE-L recall of the greedy answer (rouge_score, Porter stemmer).",
        ),
        MetricInfo(
            "truth_ratio",
            "closer_to_retain",
            2,
            "mean",
            "R = exp(mean_j loss(pert_j) - loss(para)); forget set mean(min(R, 1/R)), "
            "other sets mean(max(0, 1 - 1/R)) (TOFU code).",
        ),
        MetricInfo(
            "model_utility",
            "higher",
            2,
            "harmonic_mean",
            "harmonic mean of the 9 retain/real-authors/world-facts sub-scores.",
        ),
        MetricInfo(
            "forget_quality",
            "higher",
            2,
            "ks_pvalue",
            "p-value of the two-sample KS test between forget-set truth ratios of the model and of a retain model.",
        ),
        MetricInfo(
            "retain_ks_pvalue",
            "higher",
            2,
            "ks_pvalue",
            "p-value of the same KS test on the retain-set truth ratios (TOFU appendix E sanity check).",
        ),
        MetricInfo(
            "mia/loss",
            "closer_to_retain",
            2,
            "roc_auc",
            "AUC of the LOSS attack (mean token log-prob) separating forget members from holdout non-members; members labelled 1.",
        ),
        MetricInfo(
            "mia/zlib",
            "closer_to_retain",
            2,
            "roc_auc",
            "AUC of the zlib attack: mean token log-prob / zlib-compressed length of the text in bytes (Carlini et al., 2021).",
        ),
        MetricInfo(
            "mia/min_k",
            "closer_to_retain",
            2,
            "roc_auc",
            "AUC of Min-K% Prob: mean of the lowest max(1, int(k*n)) token log-probs, k = 0.4 (Shi et al., 2024).",
        ),
        MetricInfo(
            "mia/min_k_plus_plus",
            "closer_to_retain",
            2,
            "roc_auc",
            "AUC of Min-K%++: lowest-k mean of (log p(x_t) - mu_t) / sigma_t over the vocabulary distribution (Zhang et al., 2024).",
        ),
        MetricInfo(
            "mia/tpr@1%fpr",
            "closer_to_retain",
            1,
            "tpr_at_fpr",
            "TPR of an MIA attack at 1% FPR, linear interpolation on the ROC curve; None (not resolvable) with fewer than 100 non-members.",
        ),
        MetricInfo(
            "mia/tpr@0.1%fpr",
            "closer_to_retain",
            1,
            "tpr_at_fpr",
            "TPR of an MIA attack at 0.1% FPR, as at 1%; None with fewer than 1000 non-members.",
        ),
        MetricInfo(
            "mia/reference",
            "closer_to_retain",
            1,
            "roc_auc",
            "AUC of the reference attack: the model's mean answer-token log-prob minus a reference (retain) model's, per item.",
        ),
        MetricInfo(
            "mia/lira",
            "closer_to_retain",
            2,
            "roc_auc",
            "AUC of online LiRA with fixed variance over the shadow models' mean answer-token log-probs (Carlini et al., 2022).",
        ),
        MetricInfo(
            "mia/rmia",
            "closer_to_retain",
            2,
            "roc_auc",
            "AUC of online RMIA over the shadow models, population = the other candidates, gamma = eval.mia_rmia_gamma (Zarifzadeh et al., 2024).",
        ),
        MetricInfo(
            "privleak",
            "closer_to_retain",
            2,
            "roc_auc",
            "((1 - AUC) - (1 - AUC_retain)) / (1 - AUC_retain) * 100 for an MIA AUC (MUSE); ~0 is best, negative = still leaks.",
        ),
        MetricInfo(
            "exact_memorisation",
            "lower",
            2,
            "mean",
            "mean fraction of answer tokens, the final label (EOS) excluded, whose teacher-forced argmax equals the label (open-unlearning exact_memorization).",
        ),
        MetricInfo(
            "extraction_strength",
            "lower",
            2,
            "mean",
            "mean 1 - k/n over the answer without its EOS, k the shortest prefix from which greedy decoding reproduces the rest, at most n - 1 (open-unlearning extraction_strength).",
        ),
        MetricInfo(
            "regurgitation",
            "closer_to_retain",
            1,
            "mean",
            "LUME: mean ROUGE-L recall of the greedy continuation of each sc prompt.",
        ),
        MetricInfo(
            "knowledge_accuracy",
            "closer_to_retain",
            1,
            "mean",
            "LUME: mean exact match of the qa answer after strip() and lower() on both sides (official scorer).",
        ),
        MetricInfo(
            "lume_task_aggregate",
            "higher",
            1,
            "harmonic_mean",
            "LUME: harmonic mean of the regurgitation/knowledge x Task1-3 x forget/retain means, forget ones as 1 - x.",
        ),
        MetricInfo(
            "lume_mia_score",
            "higher",
            1,
            "roc_auc",
            "LUME: 1 - 2|AUC - 0.5| for the loss-attack AUC of forget members vs. non-members.",
        ),
        MetricInfo(
            "lume_final",
            "higher",
            2,
            "mean",
            "LUME: arithmetic mean of task aggregate, MIA score and utility: MMLU when measured or given, else the miniature's background MC accuracy (official scorer).",
        ),
        MetricInfo(
            "format_mc_success",
            "closer_to_retain",
            2,
            "mean",
            "formats: share of MC questions whose highest next-token log-prob letter, among the offered letters, is right.",
        ),
        MetricInfo(
            "cloze_probability",
            "closer_to_retain",
            2,
            "mean",
            "formats: mean P(span)^(1/n), the length-normalised probability of the masked cloze span.",
        ),
        MetricInfo(
            "format_rougeL",
            "closer_to_retain",
            2,
            "mean",
            "formats: mean ROUGE-L recall of the greedy answer on the QA-style formats.",
        ),
    )
}
