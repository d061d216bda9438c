"""`forgetbench finetune` and `forgetbench unlearn`: one training stage each, in a run folder
whose finished stages are reused."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from forgetbench.cli.config import resolve_config
from forgetbench.cli.usage import UsageError, progress
from forgetbench.io import readable_alias
from forgetbench.study.given import given_data, given_model, is_miniature

# The study layer and the training stages are imported inside the commands: they import torch
# and transformers, which `forgetbench --help` never needs.


def finetune(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.study.miniature import miniature
    from forgetbench.study.pool import quiet_transformers
    from forgetbench.train.stages import finetune_split

    quiet_transformers()
    config = resolve_config(args)
    if not args.out:
        raise UsageError(
            "forgetbench finetune: --out is required",
            "pass the run folder; finished stages there are reused",
        )
    split = config.benchmark.split  # `full` unless --split says otherwise
    model, data = given_model(config), given_data(config)
    if is_miniature(config):
        result = miniature(config, Path(args.out), progress=progress(args)).model(split)
    else:
        if not data:
            raise UsageError(
                "forgetbench finetune: --data is required",
                "pass a TOFU-layout folder, a JSON(L) file or a Hugging Face dataset id "
                "(or neither --model nor --data for the built-in miniature benchmark)",
            )
        if not model:
            raise UsageError(
                "forgetbench finetune: --model is required",
                "pass a Hugging Face id or a saved model folder",
            )
        result = finetune_split(
            config,
            model=model,
            data=data,
            split=split,
            out=args.out,
            progress=progress(args),
        )
    alias = readable_alias(
        Path(args.out), "finetuned" if split == "full" else split, result.model_dir
    )
    summary = {
        "stage": result.name,
        "model_dir": str(result.model_dir),
        "alias": str(alias) if alias else None,
        "cached": result.cached,
        "steps": len(result.losses),
        "first_loss": result.losses[0] if result.losses else None,
        "final_loss": result.losses[-1] if result.losses else None,
        "seconds": round(result.seconds, 2),
    }
    if not args.json:
        state = "reused cached" if result.cached else "trained"
        print(
            f"{state} {result.name}: {alias or result.model_dir} ({summary['steps']} steps, loss {summary['first_loss']:.4f} -> {summary['final_loss']:.4f})"
        )
    return summary


def unlearn(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.study.pool import quiet_transformers
    from forgetbench.study.unlearn import unlearn_command

    quiet_transformers()
    config = resolve_config(args)
    if not args.out:
        raise UsageError(
            "forgetbench unlearn: --out is required",
            "pass the run folder; finished stages there are reused",
        )
    result = unlearn_command(
        config,
        split=config.benchmark.split,
        out=args.out,
        progress=progress(args),
    )
    alias = readable_alias(
        Path(args.out),
        f"unlearned-{config.unlearn.method}-{config.benchmark.split}",
        result.model_dir,
    )
    summary = {
        "method": config.unlearn.method,
        "split": config.benchmark.split,
        "alias": str(alias) if alias else None,
        "model_dir": str(result.model_dir),
        "cached": result.cached,
        "steps": len(result.losses),
        "first_loss": result.losses[0] if result.losses else None,
        "final_loss": result.losses[-1] if result.losses else None,
        "snapshots": [{"step": step, "model_dir": str(path)} for step, path in result.snapshots],
        "seconds": round(result.seconds, 2),
    }
    if not args.json:
        state = "reused cached" if result.cached else "ran"
        print(
            f"{state} {summary['method']} on {summary['split']}: {alias or result.model_dir} "
            f"({summary['steps']} steps, {len(result.snapshots)} trajectory points)"
        )
    return summary
