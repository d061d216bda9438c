"""The relearning attacks' training: the budget every attacked model relearns under
(`relearn_loop`), one relearning stage on given records (`relearn_stage`: the A half, or the whole
forget set), and the plain relearning curve (`relearn_curve`: forget ROUGE-L after each round on
the whole forget set, scored by `forget_rouge_only`), which `study/attack.py` runs per model."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from forgetbench.attacks.recovery import steps_to_reach
from forgetbench.cache import shared_entry, suspended
from forgetbench.config import RunConfig
from forgetbench.eval.backend import evaluation_backend, serve
from forgetbench.eval.requests import Generate
from forgetbench.eval.runner import evaluation_key
from forgetbench.io import atomic_write_json, read_json
from forgetbench.metrics.rouge import rouge_recall
from forgetbench.modeling.loading import load_model, load_tokenizer
from forgetbench.records import QARecord
from forgetbench.study.attack_data import AttackData, attack_key
from forgetbench.study.inputs import Study
from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.stages import StageResult, encode_qa, run_stage

CURVE_FILE = "relearn_full.json"


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
    key = attack_key([
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
