"""From a TOFU-layout log to the numbers TOFU reports: 12 sub-scores, model utility, forget quality."""

from __future__ import annotations

from typing import Any

import numpy as np

from forgetbench.data.logs import SET_FILES, EvalLog, SetLog, match_questions
from forgetbench.metrics import tofu
from forgetbench.metrics.tofu import TruthRatioForm

SUBSCORE_METRICS = ("probability", "rougeL", "truth_ratio")
UTILITY_SETS = ("retain", "real_authors", "world_facts")
# Sets scored as multiple choice against their perturbed answers (TOFU: files without "eval_log").
_MC_PROBABILITY_SETS = {"real_authors", "world_facts"}


def set_scores(log: SetLog, *, form: TruthRatioForm = "tofu_code") -> dict[str, float]:
    """The three TOFU sub-scores of one evaluation set."""
    if log.name in _MC_PROBABILITY_SETS:
        probability = tofu.multiple_choice_probability(log.gt_loss, log.perturbed_loss)
    else:
        probability = tofu.normalized_probability(log.gt_loss)
    ratio = tofu.truth_ratio(log.paraphrased_loss, log.perturbed_loss, form=form)
    truth = tofu.truth_ratio_score(ratio, form=form, forget=log.name == "forget")
    return {
        f"{log.name}/probability": float(np.mean(probability)),
        f"{log.name}/rougeL": float(np.mean(log.rougeL_recall)),
        f"{log.name}/truth_ratio": truth,
    }


def summarize(log: EvalLog, *, form: TruthRatioForm = "tofu_code") -> dict[str, float]:
    """The 12 sub-scores `{set}/{metric}` (4 sets x 3 metrics) and `model_utility`."""
    scores: dict[str, float] = {}
    for name in SET_FILES:
        scores.update(set_scores(log.require(name, purpose="the TOFU summary"), form=form))
    utility_inputs = {
        f"{s}/{m}": scores[f"{s}/{m}"] for s in UTILITY_SETS for m in SUBSCORE_METRICS
    }
    scores["model_utility"] = tofu.model_utility(utility_inputs)
    return scores


def compare(
    reference: EvalLog,
    candidate: EvalLog,
    *,
    form: TruthRatioForm = "tofu_code",
    allow_question_mismatch: bool = False,
) -> dict[str, Any]:
    """Summary of `candidate` plus its forget quality against `reference` (a retain model's log) and
    the same KS test on the retain set.

    The KS tests use the reference's questions: each must be in the candidate's set (matched by
    question text, `match_questions`), which may hold more (TOFU's published logs hold the first
    300 questions of each set; a full forget10 evaluation holds 400). The summary is the
    candidate's own, on all its questions. `{set}/questions` is the number of candidate truth
    ratios the KS test used, out of `{set}/candidate_questions`; `{set}/matched_by` says how.
    `allow_question_mismatch` tests every question of both logs as they are, unmatched."""
    result: dict[str, Any] = summarize(candidate, form=form)
    for set_name, key in (("forget", "forget_quality"), ("retain", "retain_ks_pvalue")):
        ref = reference.require(set_name, purpose="the KS test")
        cand = candidate.require(set_name, purpose="the KS test")
        cand_ratios = tofu.truth_ratio(cand.paraphrased_loss, cand.perturbed_loss, form=form)
        matched_by = "unchecked"
        if not allow_question_mismatch:
            match = match_questions(reference, candidate, set_name)
            cand_ratios, matched_by = cand_ratios[match.indices], match.by
        statistic, pvalue = tofu.ks_test(
            cand_ratios, tofu.truth_ratio(ref.paraphrased_loss, ref.perturbed_loss, form=form)
        )
        result[key] = pvalue
        result[f"{set_name}/ks_statistic"] = statistic
        result[f"{set_name}/questions"] = len(cand_ratios)
        result[f"{set_name}/candidate_questions"] = len(cand)
        result[f"{set_name}/reference_questions"] = len(ref)
        result[f"{set_name}/matched_by"] = matched_by
    return result


def held_out_scores(
    reference: EvalLog, candidate: EvalLog, *, form: TruthRatioForm = "tofu_code"
) -> dict[str, float]:
    """Forget quality on the two halves of the forget questions (`tofu.held_out_quality`), the
    candidate's truth ratios matched to the reference's questions as `compare` matches them:
    `forget_quality/selection`, `forget_quality/held_out` and the held-out one's bootstrap
    interval over questions. Empty with fewer than 4 shared questions."""
    ref = reference.require("forget", purpose="the KS test")
    cand = candidate.require("forget", purpose="the KS test")
    match = match_questions(reference, candidate, "forget")
    ratios = tofu.truth_ratio(cand.paraphrased_loss, cand.perturbed_loss, form=form)[match.indices]
    reference_ratios = tofu.truth_ratio(ref.paraphrased_loss, ref.perturbed_loss, form=form)
    if len(ratios) < 4 or len(ratios) != len(reference_ratios):
        return {}
    found = tofu.held_out_quality(ratios, reference_ratios)
    return {f"forget_quality/{key}": value for key, value in found.items()}
