"""What `forgetbench unlearn` unlearns: resolves the model, the forget and retain splits and the
method's options (built-in miniature study, or any model and TOFU-layout data), then runs the
engine."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from forgetbench.config import RunConfig
from forgetbench.data.tofu import load_tofu
from forgetbench.errors import ConfigError
from forgetbench.methods.base import UnlearnMethod, build_method, get_method
from forgetbench.methods.refusals import load_refusals
from forgetbench.modeling import TINY_SIZES
from forgetbench.train.loop import LoopConfig
from forgetbench.train.unlearn import UnlearnResult, run_unlearning

FORGET_SPLITS = ("forget01", "forget05", "forget10")


def retain_split_for(split: str) -> str:
    match = re.fullmatch(r"forget(\d\d)", split)
    if match is None or split not in FORGET_SPLITS:
        raise ConfigError(
            f"unlearning split '{split}' is not a forget split",
            f"use one of {', '.join(FORGET_SPLITS)}",
        )
    return f"retain{100 - int(match.group(1))}"


def resolve_method(
    config: RunConfig, name: str, loop: LoopConfig, options: dict[str, object]
) -> tuple[LoopConfig, UnlearnMethod]:
    """The method's loop and options: the model's defaults, then the user's `unlearn.*` and
    `method.*` settings on top. A `method.preset` the user names replaces the model's tuned
    hyperparameters; only the options that describe the model itself (the method's
    `model_options`, e.g. RMU's steered layer, which must exist in it) are kept."""
    u = config.unlearn
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
        keep = getattr(get_method(name), "model_options", frozenset())
        options = {key: value for key, value in options.items() if key in keep}
    return loop, build_method(name, {**options, **user})


def external_unlearn_defaults() -> tuple[LoopConfig, dict[str, object]]:
    # TOFU's unlearning recipe (forgetbench/presets/tofu.yaml), the same for every method.
    from forgetbench.train.presets import unlearn_preset

    return unlearn_preset("tofu")


def unlearn_command(
    config: RunConfig,
    *,
    model: str | None,
    data: str | None,
    split: str,
    out: str | Path,
    progress: bool = True,
) -> UnlearnResult:
    out = Path(out)
    retain_split = retain_split_for(split)
    name = config.unlearn.method
    if model is None and data is None and config.benchmark.name == "mini":
        from forgetbench.benchmarks.mini import generate_mini
        from forgetbench.train.mini import (
            TEMPLATE,
            finetune_mini,
            mini_unlearn_defaults,
            pretrain_base,
        )

        data_dir = out / "data"
        generate_mini(data_dir, scale=config.scale, seed=config.seed)
        base = pretrain_base(out, data_dir, scale=config.scale, seed=config.seed, progress=progress)
        finetuned = finetune_mini(
            out,
            data_dir,
            base.model_dir,
            split="full",
            scale=config.scale,
            seed=config.seed,
            progress=progress,
            train=config.train,  # the user's train.* options shape the finetuned parent
        )
        loop, options = mini_unlearn_defaults(name, layers=TINY_SIZES[config.scale].layers)
        model_dir, tofu_source, template, max_length = (
            str(finetuned.model_dir),
            data_dir / "tofu",
            TEMPLATE,
            TINY_SIZES[config.scale].max_positions,
        )
    elif model is None or data is None:
        raise ConfigError(
            "forgetbench unlearn needs both --model and --data",
            "or neither, for the built-in miniature benchmark (--benchmark mini)",
        )
    else:
        from forgetbench.modeling import load_tokenizer, resolve_template

        loop, options = external_unlearn_defaults()
        tokenizer = load_tokenizer(model, trust_remote_code=config.model.trust_remote_code)
        model_dir, tofu_source, max_length = model, data, config.train.max_length
        template = resolve_template(config.model.template, tokenizer, model)
    loop, method = resolve_method(config, name, loop, options)
    return run_unlearning(
        out,
        model_dir=model_dir,
        forget=load_tofu(tofu_source, split),
        retain=load_tofu(tofu_source, retain_split),
        method=method,
        config=loop,
        template=template,
        refusals=load_refusals(config.unlearn.refusals_file),
        split=split,
        max_length=max_length,
        snapshot_every=config.unlearn.snapshot_every,
        progress=progress,
        trust_remote_code=config.model.trust_remote_code,
    )
