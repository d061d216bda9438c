"""The robustness half of `forgetbench meta-eval` (open-unlearning, Dorna et al. 2025, eqs. 2-4):
how far a forget-set metric moves when knowledge is brought back into unlearned models.

A few methods unlearn the study's finetuned model on the forget split (the same cached runs as
`forgetbench run`'s). Each unlearned model, and the retain model as the control, is relearned for
one epoch on the whole forget split (the relearning attack's budget: `attack.*`), and each unlearned
model is also quantised to 4 bits (NF4); every model is evaluated on the forget split with every
metric. Per metric and attacked model, relearning robustness R compares the unlearned model's move
with the retain model's and quantisation robustness Q the value before with the value after
(`forgetbench.metrics.meta`); a metric's robustness is the harmonic mean of R and Q averaged over
the attacked models that the metric reads as having forgotten (the pools' best threshold) and that
kept most of the finetuned model's utility, as open-unlearning filters them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from forgetbench.attacks.quantize import quantise_model
from forgetbench.benchmarks.mini.scales import get_scale
from forgetbench.cache import shared_entry
from forgetbench.config import RunConfig
from forgetbench.metrics.meta import (
    Direction,
    knows_threshold,
    quantisation_robustness,
    reads_forgotten,
    relearning_robustness,
    robustness,
)
from forgetbench.modeling.loading import load_model
from forgetbench.rows import as_number, number
from forgetbench.study.attack_data import attack_data
from forgetbench.study.evaluate import evaluate_cached
from forgetbench.study.inputs import Study
from forgetbench.study.relearn import relearn_stage
from forgetbench.study.unlearn import unlearn_split
from forgetbench.train.integrity import reuse_finished
from forgetbench.train.stages import inputs_key, model_fingerprint, publish_model

# open-unlearning quantises with bitsandbytes' 4-bit NF4; ours is the same levels and blocks,
# simulated (forgetbench.attacks.quantize).
QUANTISATION = "nf4"
# open-unlearning leaves out attacked models whose utility fell too far (a broken model reads as
# "forgot" on every metric, and relearning it says little about the metric). Its cut is not in the
# text we had; ours keeps models with at least this share of the finetuned model's utility.
UTILITY_KEPT = 0.8
QUANTISED_FILE = "quantised.json"


def robustness_methods(config: RunConfig) -> tuple[str, ...]:
    """The methods whose unlearned models are attacked: the config's own when it names them."""
    if "methods" in config.study.model_fields_set:
        return tuple(config.study.methods)
    return get_scale(config.scale).robustness_methods


def quantised_copy(model_dir: Path, scheme: str, *, run_dir: Path, group_size: int = 0) -> Path:
    """`model_dir` quantised (weights rounded to `scheme`'s levels, stored as floats) as a cached
    stage: a model folder that every evaluation reads like any other."""
    parent = model_fingerprint(model_dir)
    header = {"stage": "quantised", "scheme": scheme, "group_size": group_size, "parent": parent}
    key = inputs_key(header, [])
    folder = run_dir / "models" / f"quantised-{scheme}-{key}"
    with shared_entry(folder, kind="models", name=folder.name):
        record = folder / QUANTISED_FILE
        if reuse_finished(folder, QUANTISED_FILE, required=("key",)) is not None:
            return folder / "model"
        model, tokenizer = load_model(model_dir)
        layers = quantise_model(model, scheme, group_size=group_size)
        payload = {**header, "key": key, "model": str(model_dir), "layers": len(layers)}
        publish_model(folder, model, tokenizer, record=record, payload=payload)
        return folder / "model"


def evaluated_scores(
    model_dir: Path, study: Study, config: RunConfig, split: str, folder: Path
) -> dict[str, Any]:
    """Every metric of one model on `split` (the shared cached evaluation): pools and attacked
    models alike."""
    return evaluate_cached(
        model_dir, study, split=split, eval_config=config.eval, folder=folder, model=config.model
    ).scores


def _relearned(model_dir: Path, study: Study, config: RunConfig, split: str, run_dir: Path) -> Path:
    """One round of the relearning attack's budget on the whole forget split."""
    records = attack_data(study, config, split).train
    return relearn_stage(model_dir, records, study, config, run_dir, "relearn-all").model_dir


def attacked_job(
    study: Study, config: RunConfig, out: Path, split: str, method: str | None
) -> dict[str, Any]:
    """One attacked model's scores: `method`'s unlearned model (None = the retain model, relearned
    only) before and after each attack. Module level: process pools pickle it by name."""
    started = time.perf_counter()
    logs = out / "meta_eval" / split / "robustness" / (method or "retain")
    if method is None:
        model_dir = study.retain[split]
    else:
        model_dir = unlearn_split(study, config, out, split, method)[0].snapshots[-1][1]
    scores = {"before": evaluated_scores(model_dir, study, config, split, logs / "before")}
    relearned = _relearned(model_dir, study, config, split, out)
    scores["relearned"] = evaluated_scores(relearned, study, config, split, logs / "relearned")
    if method is not None:
        group = config.attack.group_size
        quantised = quantised_copy(model_dir, QUANTISATION, run_dir=out, group_size=group)
        scores["quantised"] = evaluated_scores(quantised, study, config, split, logs / "quantised")
    return {
        "method": method or "retain",
        "log": str(logs.relative_to(out)),
        "seconds": time.perf_counter() - started,
        **scores,
    }


def pool_values(scored: list[tuple[str, dict[str, Any]]], key: str) -> dict[str, list[float]]:
    """Each pool's finite values of metric `key`, from (pool, scores) per model; a model without
    one is left out of that metric's pools."""
    values: dict[str, list[float]] = {"positive": [], "negative": []}
    for pool, scores in scored:
        if (value := number(scores, key)) is not None:
            values[pool].append(value)
    return values


def robustness_rows(
    rows: list[dict[str, Any]],
    pools: list[tuple[str, dict[str, Any]]],
    attacked: list[dict[str, Any]],
    retain: dict[str, Any],
    *,
    finetuned_utility: float | None,
) -> list[dict[str, Any]]:
    """The faithfulness `rows` with each metric's robustness filled in from the `attacked` models'
    scores (before / relearned / quantised) and the `retain` model's (before / relearned); `pools`
    are the faithfulness pools' (pool, scores), which set each metric's "forgot" threshold."""
    finetuned_utility = as_number(finetuned_utility)  # not a number: no utility filter
    kept = [
        a
        for a in attacked
        if finetuned_utility is None
        or (u := number(a["before"], "model_utility")) is None
        or u >= UTILITY_KEPT * finetuned_utility
    ]
    return [
        {
            **row,
            **_metric_robustness(row["metric"], row["direction"], pools, kept, retain),
            "utility_dropped": len(attacked) - len(kept),
        }
        for row in rows
    ]


def _metric_robustness(
    key: str,
    direction: Direction,
    pools: list[tuple[str, dict[str, Any]]],
    attacked: list[dict[str, Any]],
    retain: dict[str, Any],
) -> dict[str, Any]:
    values = pool_values(pools, key)
    try:
        threshold: float | None = knows_threshold(values["positive"], values["negative"], direction)
    except ValueError:
        threshold = None  # the pools never differ on it: every attacked model counts
    ret = (number(retain["before"], key), number(retain["relearned"], key))
    r_values, q_values, used = [], [], []
    for model in attacked:
        before = number(model["before"], key)
        if before is None or (
            threshold is not None and not reads_forgotten(before, threshold, direction)
        ):
            continue
        used.append(model["method"])
        relearned = number(model["relearned"], key)
        if relearned is not None and None not in ret:
            r_values.append(relearning_robustness((before, relearned), ret, direction))  # type: ignore[arg-type]
        quantised = number(model.get("quantised", {}), key)
        if quantised is not None:
            q_values.append(quantisation_robustness(before, quantised, direction))
    result: dict[str, Any] = {
        "forgot_threshold": None if threshold is None else round(threshold, 6),
        "attacked": used,
        "relearning": round(sum(r_values) / len(r_values), 6) if r_values else None,
        "quantisation": round(sum(q_values) / len(q_values), 6) if q_values else None,
    }
    if r_values and q_values:
        result["robustness"] = round(robustness(result["relearning"], result["quantisation"]), 6)
        result["robustness_note"] = None
    else:
        result["robustness"] = None
        result["robustness_note"] = (
            "no attacked model reads as having forgotten by this metric"
            if not used
            else "the attacked models have no value of this metric"
        )
    return result


def attacked_summary(attacked: list[dict[str, Any]], judged: Any) -> list[dict[str, Any]]:
    """meta_eval.json's record of each attacked model: its judged scores per attack."""
    return [
        {
            "method": a["method"],
            "log": a["log"],
            "model_utility": number(a["before"], "model_utility"),
            **{
                stage: {k: v for k, v in a[stage].items() if judged(k)}
                for stage in ("before", "relearned", "quantised")
                if stage in a
            },
        }
        for a in attacked
    ]
