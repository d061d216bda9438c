"""Robustness attacks on a study's models (`forgetbench attack`, `study.attacks` in `run`).

One model's attacks (`attack_model`) are scored on the B half of the forget set (see
forgetbench.attacks): the model as it is ("none"), relearned on the A half ("relearn"), each
quantisation scheme, A-half facts in context ("incontext"); and the plain relearning variant on the
whole forget set ("relearn_full": optimizer steps until forget ROUGE-L is back). Every evaluation,
and the relearned model, is cached by its inputs like the other stages. What needs other models
(forget quality against the retain model, knowledge recovered against the finetuned one) is
computed from the outcomes afterwards (`study/attack_rows.py`), as forget quality is in the study.
The halves and probes are `study/attack_data.py`'s, the relearning `study/relearn.py`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from forgetbench.attacks.quantize import quantise_model
from forgetbench.cache import shared_entry
from forgetbench.config import RunConfig
from forgetbench.data.logs import EvalLog
from forgetbench.eval.backend import evaluation_backend
from forgetbench.eval.runner import (
    cached_evaluation,
    evaluation_key,
    scored_length,
    write_evaluation,
)
from forgetbench.eval.summary import set_scores
from forgetbench.eval.tasks.task import run_task
from forgetbench.eval.tasks.tofu import TofuTask
from forgetbench.io import atomic_write_json
from forgetbench.modeling.loading import load_model
from forgetbench.records import QARecord
from forgetbench.study.attack_data import attack_data, attack_key, incontext_records
from forgetbench.study.attack_rows import AttackOutcome, attack_rows
from forgetbench.study.given import given_data, given_model
from forgetbench.study.inputs import Study
from forgetbench.study.pool import make_pool, quiet_transformers, study_workers
from forgetbench.study.relearn import relearn_curve, relearn_stage
from forgetbench.study.resolved import resolve

HALVES_FILE = "halves.json"
ATTACKS_FILE = "attacks.json"


def _evaluate(
    model_dir: Path,
    records: Sequence[QARecord],
    study: Study,
    config: RunConfig,
    folder: Path,
    *,
    variant: dict[str, Any],
    prepare: Callable[[Any], Any] | None = None,
) -> EvalLog:
    """TOFU's forget-set evaluation of `records` (the model changed by `prepare` first), cached
    by the model, the records, the variant and the evaluation config."""
    eval_config = config.eval
    base = evaluation_key(model_dir, study.data, "attack", eval_config, study.benchmark)
    key = attack_key([base, variant, [(r.question, r.answer) for r in records]])
    with shared_entry(folder, kind="evaluations", name=key):
        cached = cached_evaluation(folder, key)
        if cached is not None and cached[0] is not None:
            return cached[0]
        model, tokenizer = load_model(
            model_dir, dtype=config.model.dtype, trust_remote_code=config.model.trust_remote_code
        )
        if prepare is not None:
            prepare(model)
        task = TofuTask(
            {"forget": list(records)}, study.template, tokenizer,
            max_new_tokens=eval_config.max_new_tokens,
            max_length=scored_length(model, eval_config, study.max_length),
            form=eval_config.truth_ratio_form,
        )  # fmt: skip
        log = run_task(task, evaluation_backend(model, tokenizer, eval_config)).eval_log
        assert log is not None
        scores = set_scores(log.sets["forget"], form=eval_config.truth_ratio_form)
        write_evaluation(folder, key, log, scores, {}, {"model": str(model_dir), **variant})
        return log


def attack_model(
    model_dir: str | Path,
    study: Study,
    config: RunConfig,
    *,
    split: str,
    folder: Path,
    attacks: Sequence[str],
    relearn_target: float | None = None,
) -> AttackOutcome:
    """Every attack in `attacks` on one model; `relearn_target` is the finetuned model's forget
    ROUGE-L, which the plain relearning variant tries to get back to."""
    model_dir = Path(model_dir)
    data = attack_data(study, config, split)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(folder / HALVES_FILE, data.halves.to_json())
    b = data.b_eval
    outcome = AttackOutcome()

    def evaluate(
        name: str,
        model: Path,
        records: Sequence[QARecord],
        prepare: Callable[[Any], Any] | None = None,
        **variant: Any,
    ) -> None:
        outcome.logs[name] = _evaluate(
            model, records, study, config, folder / name, variant={"attack": name, **variant},
            prepare=prepare,
        )  # fmt: skip

    evaluate("none", model_dir, b)
    if "relearn" in attacks:
        stage = relearn_stage(model_dir, data.a_train, study, config, folder, "relearn-a")
        outcome.relearn_steps = len(stage.losses)
        evaluate("relearn", stage.model_dir, b)
    if "quantize" in attacks:
        group = config.attack.group_size
        for scheme in config.attack.quantize:
            evaluate(
                scheme, model_dir, b, group_size=group,
                prepare=lambda model, s=scheme: quantise_model(model, s, group_size=group),
            )  # fmt: skip
    if "incontext" in attacks:
        evaluate("incontext", model_dir, incontext_records(data, config.attack.incontext_k),
                 k=config.attack.incontext_k)  # fmt: skip
    if "relearn_full" in attacks:
        outcome.curve = relearn_curve(
            model_dir, data, study, config, folder / "relearn_full", target=relearn_target
        )
    return outcome


def attack_job(
    model_dir: Path, study: Study, config: RunConfig, split: str, folder: Path, target: float | None
) -> tuple[AttackOutcome, float]:
    """`attack_model` as a pool job (module level: process pools pickle it by name), timed."""
    started = time.perf_counter()
    outcome = attack_model(
        model_dir, study, config, split=split, folder=folder, attacks=config.study.attacks,
        relearn_target=target,
    )  # fmt: skip
    return outcome, time.perf_counter() - started


def forget_rouge(
    model_dir: Path, study: Study, config: RunConfig, *, split: str, folder: Path
) -> float:
    """Forget ROUGE-L on the questions the study's evaluation scores (the plain relearning
    variant's target, for the finetuned model), cached."""
    data = attack_data(study, config, split)
    log = _evaluate(model_dir, data.scored, study, config, folder, variant={"attack": "none"})
    return float(log.sets["forget"].rougeL_recall.mean())


def run_attacks(
    config: RunConfig,
    *,
    out: Path,
    split: str,
    finetuned: str | None = None,
    retain: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """`forgetbench attack`: `study.attacks` on `model` and on the references (the miniature's
    finetuned and retain models, or `finetuned` / `retain` given with `data`); writes and
    returns attacks.json: per model, the `attack/...` keys of a study row. The model and data
    are the config's."""
    quiet_transformers()
    model, data = given_model(config), given_data(config)
    if data is None:  # the built-in miniature: its finetuned and retain models are the references
        # No shadow models: the attacks' evaluations are TOFU's forget-set scores, no MIA.
        study, _ = resolve(
            config, out, progress=progress, forget_splits=[split], with_shadows=False,
            builtin=True,
        )  # fmt: skip
        references = {"finetuned": study.finetuned, "retain": study.retain[split]}
    else:
        study, _ = resolve(config, out, progress=progress, command="attack")
        given = (("finetuned", finetuned), ("retain", retain))
        references = {name: Path(path) for name, path in given if path}
    models = {**({"model": Path(model)} if model else {}), **references}
    target = None
    if "finetuned" in references:
        target = forget_rouge(
            references["finetuned"], study, config, split=split,
            folder=out / "attacks" / split / "finetuned" / "forget",
        )  # fmt: skip
    pool = make_pool(study_workers(config, model if data else None))
    try:
        jobs = {
            name: pool.submit(
                attack_job, path, study, config, split, out / "attacks" / split / name, target
            )
            for name, path in models.items()
        }
        outcomes = {name: job.result()[0] for name, job in jobs.items()}
    finally:
        pool.shutdown(cancel_futures=True)
    rows = attack_rows(outcomes, config=config, finetuned_rouge=target)
    result = {
        "split": split,
        "attacks": list(config.study.attacks),
        "models": {name: {"path": str(models[name]), **row} for name, row in rows.items()},
        "config": config.attack.model_dump(),
    }
    atomic_write_json(out / ATTACKS_FILE, result)
    return result
