"""Robustness attacks on a study's models (`forgetbench attack`, `study.attacks` in `run`).

One model's attacks (`attack_model`) are scored on the B half of the forget set (see
forgetbench.attacks): the model as it is ("none"), relearned on the A half ("relearn"), each
quantisation scheme, A-half facts in context ("incontext"); and the plain relearning variant on the
whole forget set ("relearn_full": optimizer steps until forget ROUGE-L is back). Every evaluation,
and the relearned model, is cached by its inputs like the other stages. What needs other models
(forget quality against the retain model, knowledge recovered against the finetuned one) is
computed from the outcomes afterwards (`attack_scores`), as forget quality is in the study.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from forgetbench.attacks.halves import DEFAULT_QUESTIONS_PER_AUTHOR, Halves, split_halves
from forgetbench.attacks.quantize import quantise_model
from forgetbench.attacks.recovery import knowledge_recovered, steps_to_reach
from forgetbench.cache import shared_entry, suspended
from forgetbench.config import RunConfig
from forgetbench.data.logs import EvalLog
from forgetbench.data.tofu import load_tofu, tofu_eval_sets
from forgetbench.errors import DataError
from forgetbench.eval.backend import evaluation_backend, serve
from forgetbench.eval.requests import Generate
from forgetbench.eval.runner import (
    cached_evaluation,
    evaluation_key,
    scored_length,
    tofu_root,
    write_evaluation,
)
from forgetbench.eval.summary import set_scores
from forgetbench.eval.tasks.task import run_task
from forgetbench.eval.tasks.tofu import TofuTask
from forgetbench.io import atomic_write_json, read_json
from forgetbench.metrics import tofu
from forgetbench.metrics.rouge import rouge_recall
from forgetbench.modeling import load_model, load_tokenizer
from forgetbench.records import QARecord
from forgetbench.study.given import given_data, given_model
from forgetbench.study.inputs import Study, resolve
from forgetbench.study.pool import make_pool, quiet_transformers, study_workers
from forgetbench.train.loop import LoopConfig
from forgetbench.train.stages import StageResult, encode_qa, run_stage

# The three TOFU numbers every attack reports on the B half (forget quality comes on top).
METRICS = ("probability", "rougeL", "truth_ratio")
HALVES_FILE = "halves.json"
CURVE_FILE = "relearn_full.json"


@dataclass
class AttackOutcome:
    """One model's attack evaluations: B-half logs by variant ("none", "relearn", "int8", ...),
    and the plain relearning curve of (optimizer steps, forget ROUGE-L), from step 0."""

    logs: dict[str, EvalLog] = field(default_factory=dict)
    curve: list[tuple[int, float]] = field(default_factory=list)
    relearn_steps: int | None = None  # optimizer steps of the A-half relearning


@dataclass(frozen=True)
class AttackData:
    """The forget split's records and halves: A-half training records, B-half evaluation records
    (with paraphrased and perturbed answers), the whole evaluation set (relearn_full)."""

    halves: Halves
    train: list[QARecord]  # the whole forget split, plain records
    evaluation: list[QARecord]  # the whole forget split with perturbed answers
    scored: list[QARecord]  # `evaluation` cut as the study's evaluation cuts it

    @property
    def a_train(self) -> list[QARecord]:
        return [self.train[i] for i in self.halves.a]

    @property
    def b_eval(self) -> list[QARecord]:
        return [self.evaluation[i] for i in self.halves.b]


def attack_data(study: Study, config: RunConfig, split: str) -> AttackData:
    tofu = tofu_root(study.data)
    train = load_tofu(tofu, split)
    evaluation = tofu_eval_sets(tofu, split)["forget"]
    if [r.question for r in train] != [r.question for r in evaluation]:
        raise DataError(
            f"{tofu}: {split} and {split}_perturbed do not hold the same questions in the same "
            "order",
            "the attacks train on one and score the other; regenerate or fix the data",
        )
    scored = tofu_eval_sets(tofu, split, max_questions=config.eval.max_questions)["forget"]
    halves = split_halves(train, seed=config.seed, questions_per_author=_per_author(study.data))
    return AttackData(halves, train, evaluation, scored)


def _per_author(data: Path) -> int:
    manifest = Path(data) / "manifest.json"
    if manifest.is_file():
        sizes = read_json(manifest).get("sizes", {})
        return int(sizes.get("questions_per_author", DEFAULT_QUESTIONS_PER_AUTHOR))
    return DEFAULT_QUESTIONS_PER_AUTHOR


def incontext_records(data: AttackData, k: int) -> list[QARecord]:
    """Each B question preceded by up to `k` true statements about the same author: the answers
    of that author's A-half questions, in the (seeded) order the halves were drawn."""
    facts: dict[int, list[str]] = {}
    for n, group in enumerate(data.halves.authors):
        members = set(group)
        facts[n] = [data.train[i].answer for i in data.halves.a if i in members][:k]
    author = {i: n for n, group in enumerate(data.halves.authors) for i in group}
    return [
        replace(
            data.evaluation[i],
            question=" ".join([*facts[author[i]], data.evaluation[i].question]),
        )
        for i in data.halves.b
    ]


def _key(parts: Sequence[Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


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
    key = _key([base, variant, [(r.question, r.answer) for r in records]])
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


def relearn_loop(study: Study, config: RunConfig, *, epochs: int) -> LoopConfig:
    """The relearning budget, the same for every model: AdamW from a fresh state, no warm-up
    (one epoch of warm-up would be the whole attack), linear decay."""
    lr = config.attack.relearn_lr or study.finetune_lr or config.train.lr
    size = config.attack.relearn_batch_size
    return LoopConfig(
        lr=lr, epochs=epochs, batch_size=size, per_device_batch_size=size,
        weight_decay=0.0, warmup_epochs=0.0, seed=config.seed,
    )  # fmt: skip


def relearn_stage(
    model_dir: Path,
    records: Sequence[QARecord],
    study: Study,
    config: RunConfig,
    run_dir: Path,
    name: str,
) -> StageResult:
    tokenizer = load_tokenizer(model_dir, trust_remote_code=config.model.trust_remote_code)
    examples = encode_qa(records, tokenizer, study.template, max_length=study.max_length)
    return run_stage(
        run_dir, name=name, parent=model_dir, examples=examples,
        config=relearn_loop(study, config, epochs=config.attack.relearn_epochs),
        progress=False, trust_remote_code=config.model.trust_remote_code,
    )  # fmt: skip


def relearn_curve(
    model_dir: Path,
    data: AttackData,
    study: Study,
    config: RunConfig,
    folder: Path,
    *,
    target: float | None,
) -> list[tuple[int, float]]:
    """Forget ROUGE-L (the study's forget questions) after each round of relearning on the whole
    forget set, until it reaches `attack.relearn_target` x `target` or the rounds run out. The
    rounds' models are scratch (only the curve is kept, cached by its inputs)."""
    attack_config = config.attack
    loop = relearn_loop(study, config, epochs=attack_config.relearn_epochs)
    key = _key([
        evaluation_key(model_dir, study.data, "relearn_full", config.eval, study.benchmark),
        [(r.question, r.answer) for r in data.train], loop.__dict__,
        attack_config.relearn_full_rounds, attack_config.relearn_target, target,
    ])  # fmt: skip
    with shared_entry(folder, kind="evaluations", name=key):
        path = folder / CURVE_FILE
        if path.is_file():
            saved = read_json(path)
            if saved.get("key") == key:
                return [(int(s), float(r)) for s, r in saved["curve"]]

        def rouge(model: Path) -> float:
            return forget_rouge_only(model, data.scored, study, config)

        # Step 0 is the model as given.
        curve = [(0, rouge(model_dir))]
        folder.mkdir(parents=True, exist_ok=True)  # the cache's entry, or a folder of our own
        # The rounds' models are scratch, deleted with it: not for the cache.
        with tempfile.TemporaryDirectory(prefix="relearn-", dir=folder) as scratch, suspended():
            parent, steps = model_dir, 0
            # Without the finetuned model's score there is nothing to get back to.
            rounds = attack_config.relearn_full_rounds if target is not None else 0
            for round_ in range(1, rounds + 1):
                if steps_to_reach(curve, target, fraction=attack_config.relearn_target) is not None:
                    break
                stage = relearn_stage(
                    parent, data.train, study, config, Path(scratch), f"relearn-full-{round_}"
                )
                steps += len(stage.losses)
                curve.append((steps, rouge(stage.model_dir)))
                parent = stage.model_dir
        atomic_write_json(path, {"key": key, "target": target, "curve": curve})
        return curve


def forget_rouge_only(
    model_dir: Path, records: Sequence[QARecord], study: Study, config: RunConfig
) -> float:
    """Mean ROUGE-L recall of greedy answers to `records`: the evaluation's generations and
    ROUGE-L (`TofuTask`), without its scoring passes, which the relearning curve does not use."""

    model, tokenizer = load_model(
        model_dir, dtype=config.model.dtype, trust_remote_code=config.model.trust_remote_code
    )
    backend = evaluation_backend(model, tokenizer, config.eval)
    prompts = [study.template.prompt(r.question, tokenizer) for r in records]
    answers = serve(backend, [Generate(p, config.eval.max_new_tokens) for p in prompts])
    rouge = rouge_recall([str(a) for a in answers], [r.answer for r in records])
    return float(rouge["rougeL_recall"].mean())


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


def _b_scores(log: EvalLog, reference: EvalLog | None, form: str) -> dict[str, float | None]:
    forget = log.sets["forget"]
    scores: dict[str, float | None] = {
        key.split("/", 1)[1]: value for key, value in set_scores(forget, form=form).items()
    }
    scores["forget_quality"] = None
    if reference is not None:
        ref = reference.sets["forget"]
        _, pvalue = tofu.ks_test(
            tofu.truth_ratio(forget.paraphrased_loss, forget.perturbed_loss, form=form),
            tofu.truth_ratio(ref.paraphrased_loss, ref.perturbed_loss, form=form),
        )
        scores["forget_quality"] = pvalue
    return scores


def attack_rows(
    outcomes: dict[str, AttackOutcome], *, config: RunConfig, finetuned_rouge: float | None
) -> dict[str, dict[str, Any]]:
    """Each attacked model's `attack/...` keys, against the finetuned and retain models' own
    outcomes when they were attacked too."""
    return {
        name: attack_scores(
            outcome,
            finetuned=outcomes.get("finetuned"),
            retain=outcomes.get("retain"),
            config=config,
            finetuned_rouge=finetuned_rouge,
        )  # fmt: skip
        for name, outcome in outcomes.items()
    }


def attack_scores(
    outcome: AttackOutcome,
    *,
    finetuned: AttackOutcome | None,
    retain: AttackOutcome | None,
    config: RunConfig,
    finetuned_rouge: float | None = None,
) -> dict[str, Any]:
    """A result row's `attack/...` keys: per variant the B-half probability, ROUGE-L, truth ratio
    and forget quality (against the retain model's unattacked B half), and knowledge recovered
    on each of the three against the finetuned model's unattacked B half; the plain relearning
    variant's steps to `attack.relearn_target` x the finetuned model's forget ROUGE-L."""
    form = config.eval.truth_ratio_form
    reference = retain.logs.get("none") if retain else None
    before = _b_scores(outcome.logs["none"], reference, form)
    target = _b_scores(finetuned.logs["none"], None, form) if finetuned else {}
    row: dict[str, Any] = {f"attack/none/{m}": v for m, v in before.items()}
    for name, log in outcome.logs.items():
        if name == "none":
            continue
        after = _b_scores(log, reference, form)
        row.update({f"attack/{name}/{m}": v for m, v in after.items()})
        for metric in METRICS:
            row[f"attack/{name}/recovered_{metric}"] = knowledge_recovered(
                after[metric], before[metric], target.get(metric)
            )
    if outcome.relearn_steps is not None:
        row["attack/relearn/steps"] = outcome.relearn_steps
    if outcome.curve:
        fraction = config.attack.relearn_target
        row["attack/relearn_full/steps"] = steps_to_reach(
            outcome.curve, finetuned_rouge, fraction=fraction
        )
        row["attack/relearn_full/budget_steps"] = outcome.curve[-1][0]
        row["attack/relearn_full/rougeL"] = outcome.curve[-1][1]
    return row


ATTACKS_FILE = "attacks.json"


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
