"""open-unlearning's TOFU evaluation file, `TOFU_EVAL.json`, read into TOFU's log layout.

open-unlearning's evaluator (`src/evals/base.py`) writes one JSON object keyed by metric name,
holding every metric it ran and every metric those needed (`pre_compute`). A per-question metric
is `{"agg_value": x, "value_by_index": {"0": {...}, "1": {...}}}`, keyed by the row of the TOFU
dataset. The fields read here, per set (prefix `forget`, `retain`, `ra` = Real Authors,
`wf` = World Facts):
- `{prefix}_Q_A_Prob`: `{"prob", "avg_loss"}` of the answer (`avg_loss` = mean NLL per answer
  token, TOFU's `avg_gt_loss`);
- `{prefix}_Q_A_PARA_Prob` (forget, retain): the same for the paraphrased answer;
  Real Authors and World Facts have none and, as in TOFU, the answer stands in for it;
- `{prefix}_Q_A_PERT_Prob`: `{"prob": [...], "avg_loss": [...]}`, one entry per perturbed answer;
- `{prefix}_Q_A_ROUGE`: `{"rouge1_recall", "rougeL_f1", "rougeL_recall", "input", "ground_truth",
  "generation"}` (the decoded prompt, the answer, the greedy generation).
`forget_truth_ratio` (and `retain_Truth_Ratio`, ...) hold per-question `score`s computed from
the two probability metrics above, `exp(-mean_j avg_loss(pert_j)) / (exp(-avg_loss(para)) + 1e-10)`
(perturbed over paraphrase, the inverse of forgetbench's R); its `forget_quality` KS-tests the
`forget_truth_ratio` scores of the model against those of the retain model's file
(`retain_logs_path`, `src/evals/metrics/privacy.py: ks_test`). forgetbench recomputes R from the
losses, so every `--truth-ratio-form` works; the KS p-value is the same for R and 1/R.
"""

from __future__ import annotations

from typing import Any

from forgetbench.data.log_layout import FIELD_RANGES, SET_FILES, check_number
from forgetbench.errors import DataError

OPEN_UNLEARNING_NAME = "TOFU_EVAL.json"
# Our set name -> open-unlearning's metric-name prefix.
_PREFIXES = {"forget": "forget", "retain": "retain", "real_authors": "ra", "world_facts": "wf"}
_WITH_PARAPHRASE = ("forget", "retain")


def set_metrics(name: str) -> tuple[str, ...]:
    """The open-unlearning metrics one of our sets is read from."""
    prefix = _PREFIXES[name]
    para = (f"{prefix}_Q_A_PARA_Prob",) if name in _WITH_PARAPHRASE else ()
    return (f"{prefix}_Q_A_Prob", *para, f"{prefix}_Q_A_PERT_Prob", f"{prefix}_Q_A_ROUGE")


def is_open_unlearning(data: Any) -> bool:
    """An object of metrics, like `{"forget_quality": {"agg_value": ...}, "forget_Q_A_Prob":
    {"agg_value": ..., "value_by_index": ...}}`."""
    return isinstance(data, dict) and any(
        isinstance(v, dict) and ("agg_value" in v or "value_by_index" in v) for v in data.values()
    )


def to_tofu_layout(data: dict[str, Any], source: str) -> dict[str, Any]:
    """The aggregated TOFU layout (`{"eval_log_forget.json": {"avg_gt_loss": {"0": ...}}}`) of
    every set whose metrics the file holds; a set with only some of them is an error."""
    layout: dict[str, Any] = {}
    for name in _PREFIXES:
        metrics = set_metrics(name)
        present = [m for m in metrics if m in data]
        if not present:
            continue
        missing = [m for m in metrics if m not in data]
        if missing:
            raise DataError(
                f"{source} has {present[0]} but no {missing[0]} ({name} set)",
                "open-unlearning writes them together (its TOFU evaluation with model_utility, "
                "forget_Truth_Ratio and the Q_A_Prob / Q_A_ROUGE metrics); rerun it with them",
            )
        layout[SET_FILES[name]] = _set_table(data, name, source)
    if not layout:
        raise DataError(
            f"{source} holds none of open-unlearning's per-question TOFU metrics",
            f"expected e.g. {', '.join(set_metrics('forget'))} (a TOFU_EVAL.json of its TOFU "
            "evaluation)",
        )
    return layout


def _set_table(data: dict[str, Any], name: str, source: str) -> dict[str, dict[str, Any]]:
    prefix = _PREFIXES[name]
    gt_name, pert_name, rouge_name = (f"{prefix}_Q_A_{m}" for m in ("Prob", "PERT_Prob", "ROUGE"))
    para_name = f"{prefix}_Q_A_PARA_Prob" if name in _WITH_PARAPHRASE else gt_name
    gt, para, pert, rouge = (
        _by_index(data, m, source) for m in (gt_name, para_name, pert_name, rouge_name)
    )
    keys = sorted(gt, key=int)
    for metric, table in ((para_name, para), (pert_name, pert), (rouge_name, rouge)):
        if set(table) != set(keys):
            raise DataError(f"{source} '{metric}': its question indices differ from '{gt_name}'")
    columns: dict[str, dict[str, Any]] = {
        "avg_gt_loss": {},
        "avg_paraphrased_loss": {},
        "average_perturb_loss": {},
        "rouge1_recall": {},
        "rougeL_recall": {},
        "generated_text": {},
    }
    for k in keys:
        # The probabilities are not read (the losses are), but one outside [0, 1] marks a log
        # not to be trusted; every number is checked here, named by open-unlearning's metric.
        for metric, table in ((gt_name, gt), (para_name, para), (pert_name, pert)):
            probs = table[k].get("prob") if isinstance(table[k], dict) else None
            for p in probs if isinstance(probs, list) else [] if probs is None else [probs]:
                _number({"prob": p}, "prob", f"{source} '{metric}' question {k}", PROBABILITY)
        columns["avg_gt_loss"][k] = _number(
            gt[k], "avg_loss", f"{source} '{gt_name}' question {k}", FIELD_RANGES["avg_gt_loss"]
        )
        columns["avg_paraphrased_loss"][k] = _number(
            para[k], "avg_loss", f"{source} '{para_name}' question {k}", FIELD_RANGES["avg_gt_loss"]
        )
        where = f"{source} '{pert_name}' question {k}"
        losses = pert[k].get("avg_loss") if isinstance(pert[k], dict) else None
        if not isinstance(losses, list) or not losses:
            raise DataError(
                f"{where}: expected a non-empty list 'avg_loss' (one per perturbed answer)"
            )
        columns["average_perturb_loss"][k] = [
            _number({"avg_loss": v}, "avg_loss", where, FIELD_RANGES["average_perturb_loss"])
            for v in losses
        ]
        where = f"{source} '{rouge_name}' question {k}"
        for field in ("rouge1_recall", "rougeL_recall"):
            columns[field][k] = _number(rouge[k], field, where, FIELD_RANGES[field])
        texts = [rouge[k].get(t) for t in ("input", "generation", "ground_truth")]
        if not all(isinstance(t, str) for t in texts):
            raise DataError(f"{where}: expected the strings 'input', 'generation', 'ground_truth'")
        columns["generated_text"][k] = texts  # TOFU's order: prompt, generation, ground truth
    return columns


PROBABILITY = (0.0, 1.0, "a probability in [0, 1]")


def _by_index(data: dict[str, Any], metric: str, source: str) -> dict[str, Any]:
    table = data[metric].get("value_by_index") if isinstance(data[metric], dict) else None
    if not isinstance(table, dict) or not table:
        raise DataError(f"{source} '{metric}': expected a non-empty 'value_by_index' object")
    try:
        sorted(table, key=int)
    except ValueError:
        raise DataError(
            f"{source} '{metric}': question indices must be integers like \"0\""
        ) from None
    return table


def _number(entry: Any, field: str, where: str, valid: tuple[float, float, str]) -> float:
    value = entry.get(field) if isinstance(entry, dict) else None
    return check_number(
        value, where, valid, field=field,
        nonfinite="the evaluation produced a non-finite loss",
        rerun="the log is damaged; re-run open-unlearning's evaluation",
    )  # fmt: skip
