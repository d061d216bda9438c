"""What `forgetbench unlearn` unlearns: the study's finetuned model (`resolve`), the forget split
and its retain split, and the method's options (the model's defaults, then the user's), run
through the engine."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

from forgetbench.config import RunConfig, retain_split_for
from forgetbench.data.tofu import load_tofu
from forgetbench.errors import DataError
from forgetbench.eval.runner import tofu_root
from forgetbench.methods.base import UnlearnMethod, build_method, get_method
from forgetbench.methods.refusals import load_refusals
from forgetbench.records import QARecord
from forgetbench.study.resolve import resolve
from forgetbench.train.loop import LoopConfig
from forgetbench.train.presets import unlearn_preset
from forgetbench.train.unlearn import ALTERNATE_FIELDS, UnlearnResult, run_unlearning


def forget_records(tofu: str | Path, split: str, method: UnlearnMethod) -> list[QARecord]:
    """The forget split's records. A method that trains toward alternate answers (AltPO) gets
    TOFU's `{split}_perturbed` records instead: the same questions and answers in the same order
    (checked), with the perturbed answers it draws its alternates from."""
    plain = load_tofu(tofu, split)
    if not method.required_inputs() & ALTERNATE_FIELDS:
        return plain
    perturbed = load_tofu(tofu, f"{split}_perturbed")
    for index, (a, b) in enumerate(zip(plain, perturbed, strict=False)):
        if (a.question, a.answer) != (b.question, b.answer):
            raise DataError(
                f"{split}_perturbed row {index} is not {split} row {index} (question or answer "
                f"differs), so its perturbed answers cannot serve {method.name} as alternates",
                f"use the {split}_perturbed file that belongs to this {split}",
            )
    if len(plain) != len(perturbed):
        raise DataError(
            f"{split}_perturbed has {len(perturbed)} rows but {split} has {len(plain)}",
            f"use the {split}_perturbed file that belongs to this {split}",
        )
    return perturbed


def resolve_method(
    config: RunConfig, name: str, loop: LoopConfig, options: dict[str, object]
) -> tuple[LoopConfig, UnlearnMethod]:
    """The method's loop and options: the model's defaults, then the user's `unlearn.*` and
    `method.*` settings on top. An `unlearn.preset` (a forgetbench/presets file) or a
    `method.preset` the user names replaces the model's tuned hyperparameters; only the options
    that describe the model itself (the method's `model_options`, e.g. RMU's steered layer, which
    must exist in it) are kept. `unlearn.loss_reduction` reaches every method that has the option,
    unless a preset sets it for the method and the user did not set it."""
    u = config.unlearn
    keep = getattr(get_method(name), "model_options", frozenset())
    if u.preset is not None:
        loop, own = unlearn_preset(u.preset, name)
        options = {**{k: v for k, v in options.items() if k in keep}, **own}
    loop = replace(
        loop,
        lr=u.lr or loop.lr,
        epochs=u.epochs or loop.epochs,
        batch_size=u.batch_size or loop.batch_size,
        per_device_batch_size=u.per_device_batch_size
        or min(loop.per_device_batch_size, u.batch_size or loop.batch_size),
        seed=config.seed,
    )
    user = dict(config.method)
    if "preset" in user:
        options = {key: value for key, value in options.items() if key in keep}
    fields = {f.name for f in dataclasses.fields(get_method(name))}
    if "loss_reduction" in fields and (
        "loss_reduction" in u.model_fields_set or "loss_reduction" not in options
    ):
        options = {**options, "loss_reduction": u.loss_reduction}
    return loop, build_method(name, {**options, **user})


def unlearn_lora(config: RunConfig) -> dict[str, object] | None:
    """`apply_lora`'s options from `unlearn.lora*`, or None to train every weight."""
    u = config.unlearn
    if not u.lora:
        return None
    return {"rank": u.lora_rank, "alpha": u.lora_alpha, "target_modules": u.lora_targets}


def unlearn_command(
    config: RunConfig,
    *,
    split: str,
    out: str | Path,
    progress: bool = True,
) -> UnlearnResult:
    out = Path(out)
    retain_split = retain_split_for(split)
    name = config.unlearn.method
    study, _ = resolve(config, out, progress=progress, command="unlearn")
    loop, method = resolve_method(config, name, *study.unlearn_defaults(name))
    tofu = tofu_root(study.data)
    return run_unlearning(
        out,
        model_dir=study.finetuned,
        forget=forget_records(tofu, split, method),
        retain=load_tofu(tofu, retain_split),
        method=method,
        config=loop,
        template=study.template,
        refusals=load_refusals(config.unlearn.refusals_file),
        split=split,
        max_length=study.max_length,
        snapshot_every=config.unlearn.snapshot_every,
        progress=progress,
        trust_remote_code=config.model.trust_remote_code,
        lora=unlearn_lora(config),
    )
