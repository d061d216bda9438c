"""What each command does not read, by config key or section, with the reason given when the
command line sets it anyway (`UNUSED`; `UNUSED_WITH_A_MODEL`: what only the built-in miniature
reads), and `unused_reason`, the reason for one key."""

from __future__ import annotations

from collections.abc import Mapping

# What each command does not read, by config key or section (the longest match wins), with the
# reason given when the command line sets it anyway, as a flag or a KEY=VALUE. A --config file
# may hold settings for several commands, so only the command line is checked. READ marks a key
# read inside a section that is not.
READ = None
_NO_UNLEARNING = "it runs no unlearning"
_STUDY = "study.* is for 'forgetbench run'"
UNUSED: dict[str, dict[str, str | None]] = {
    "config": {},
    "finetune": {
        "plugins": "finetune runs no unlearning, so it reads no method plugin",
        "unlearn.method": "finetune trains on one split; methods are for 'forgetbench unlearn'",
        "study.methods": "finetune trains on one split; methods are for 'forgetbench run'",
        "study.splits": "finetune trains on one split: use --split",
        "unlearn": "finetune runs no unlearning (unlearn.* is for 'unlearn' and 'run')",
        "method": "finetune runs no unlearning (method.* is for 'unlearn' and 'run')",
        "study": _STUDY,
        "eval": "finetune evaluates nothing (eval.* is for 'eval', 'sanity' and 'run')",
    },
    "unlearn": {
        "study.methods": "unlearn runs one method: use --method (or 'forgetbench run --methods')",
        "study.splits": "unlearn runs on one split: use --split (or 'forgetbench run --splits')",
        "study": _STUDY,
        "eval": "unlearn evaluates nothing (eval.* is for 'eval', 'sanity' and 'run')",
    },
    "eval": {
        "plugins": "eval " + _NO_UNLEARNING + ", so it reads no method plugin",
        "scale": "eval scores the given --model and trains nothing",
        "seed": "eval is deterministic (greedy generation) and trains nothing",
        "unlearn.method": "eval scores the given --model; " + _NO_UNLEARNING,
        "study.methods": "eval scores the given --model; " + _NO_UNLEARNING,
        "study.splits": "eval scores one split: use --split",
        "unlearn.epochs": "eval trains nothing",
        "unlearn.lr": "eval trains nothing",
        "train": "eval trains nothing",
        "model.sharding": "eval trains nothing (under torchrun its processes split the "
        "questions, each with the whole model)",
        "train.max_length": READ,
        "unlearn": "eval " + _NO_UNLEARNING,
        "method": "eval " + _NO_UNLEARNING,
        "study": _STUDY,
        "eval.mia_shadows": "eval scores one model; the shadow-model attacks are made by "
        "'forgetbench run', from several",
        "eval.mia_rmia_gamma": "eval scores one model; RMIA is made by 'forgetbench run', from "
        "its shadow models",
        "model.mixed_precision": "eval trains nothing (it is training's autocast; model.dtype "
        "sets the precision eval scores in)",
        "model.gradient_checkpointing": "eval trains nothing",
        "model.compile": "eval trains nothing (eval.compile_generation compiles generation)",
        "model.liger_kernel": "eval trains nothing",
        "model.padding_free": "eval trains nothing",
        "model.size": "it shapes only the built-in model; eval scores the given --model",
    },
    "sanity": {
        "plugins": "sanity " + _NO_UNLEARNING + ", so it reads no method plugin",
        "model.name": "sanity trains its own models at --scale (TOFU appendix E)",
        "benchmark.path": "sanity generates its own miniature data at --scale",
        "benchmark.split": "sanity's checks are defined on forget10",
        "unlearn.method": "sanity " + _NO_UNLEARNING,
        "study.methods": "sanity " + _NO_UNLEARNING,
        "study.splits": "sanity's checks are defined on forget10",
        "unlearn.epochs": "sanity trains with the miniature's fixed recipe",
        "unlearn.lr": "sanity trains with the miniature's fixed recipe",
        "benchmark": "sanity runs on the built-in miniature benchmark",
        "model": "sanity trains its own models at --scale",
        "train": "sanity trains with the miniature's fixed recipe",
        "unlearn": "sanity " + _NO_UNLEARNING,
        "method": "sanity " + _NO_UNLEARNING,
        "study": _STUDY,
    },
    "run": {
        "benchmark.split": "a study covers study.splits: use --splits",
        "unlearn.method": "a study runs study.methods: use --methods",
    },
    "sweep": {
        "benchmark.split": "a sweep selects on sweep.select_split",
        "unlearn.method": "a sweep runs the methods of its sweep section",
        "study.methods": "a sweep runs the methods of its sweep section",
        "study.splits": "a sweep selects on sweep.select_split and reports on sweep.report_split",
        "study.seeds": "a sweep runs each trial at sweep.seeds",
        "study.method_settings": "a sweep searches them (sweep.space, sweep.methods)",
        "study.attacks": "a sweep selects on forget quality and utility; attack the selected "
        "models with 'forgetbench run' or 'forgetbench attack'",
    },
    "bench": {
        "plugins": "bench " + _NO_UNLEARNING + ", so it reads no method plugin",
        "benchmark.name": "bench times the TOFU-layout path",
        "unlearn.method": "bench " + _NO_UNLEARNING,
        "study.methods": "bench " + _NO_UNLEARNING,
        "study.splits": "bench times one split: use --split (bench eval)",
        "unlearn.epochs": "bench times the miniature's fixed recipe",
        "unlearn.lr": "bench times the miniature's fixed recipe",
        "train": "bench times the miniature's fixed recipe",
        "unlearn": "bench " + _NO_UNLEARNING,
        "method": "bench " + _NO_UNLEARNING,
        "study": _STUDY,
    },
    "attack": {
        "plugins": "attack runs no unlearning, so it reads no method plugin",
        "benchmark.name": "attack runs on TOFU-layout data (the miniature's, or --data)",
        "unlearn.method": "attack runs no unlearning; attack an unlearned model with --model",
        "unlearn": "attack runs no unlearning (attack.* sets the attacks' budget)",
        "method": "attack runs no unlearning",
        "study.methods": "attack runs no unlearning; attack an unlearned model with --model",
        "study.splits": "attack runs on one split: use --split",
        "study": _STUDY,
        "study.attacks": READ,
    },
    "meta-eval": {
        "model": "meta-eval trains its own pools of the built-in miniature's models at --scale",
        "benchmark": "meta-eval runs on the built-in miniature benchmark",
        "benchmark.split": READ,
        "unlearn": "meta-eval unlearns with each method's preset (unlearn.* is for "
        "'forgetbench run')",
        "method": "meta-eval unlearns with each method's preset (method.* is for 'forgetbench "
        "run')",
        "study": "meta-eval's pools are fixed per scale (study.* is for 'forgetbench run')",
        "study.workers": READ,
        "study.methods": READ,
    },
    # `bench study` times `forgetbench run` on the built-in miniature: it reads what run reads.
    "bench study": {
        "model": "bench study times the built-in miniature's study",
        "benchmark": "bench study times the built-in miniature's study",
    },
    # `bench train` times generate, pretrain, finetune and retain90 of the miniature at --scale.
    "bench train": {
        "model": "bench train times the built-in miniature's training",
        "benchmark.path": "bench train times the built-in miniature's training",
        "benchmark.split": "bench train times the full and retain90 stages",
        "eval": "bench train evaluates with its own fixed settings",
    },
    # bench train with --model or model.size: one epoch of the full split, our loop and HF's
    # Trainer on train.*'s recipe (forgetbench.train.throughput).
    "bench throughput": {
        "train": READ,
        "model": READ,
        "seed": READ,
        "benchmark.path": READ,
        "train.epochs": "bench train times one epoch (--steps N: its first N steps)",
        "train.checkpoint_every": "bench train writes no checkpoints",
        "train.lora": "bench train times full-parameter finetuning",
        "train.lora_rank": "bench train times full-parameter finetuning",
        "train.lora_alpha": "bench train times full-parameter finetuning",
        "benchmark.split": "bench train finetunes on the full split",
        "eval": "bench train evaluates nothing",
    },
}
# Read only by the built-in miniature: refused when the model is the user's (--model, --data or
# another benchmark).
UNUSED_WITH_A_MODEL: dict[str, dict[str, str | None]] = {
    "finetune": {"scale": "it sizes the built-in miniature; the model is --model"},
    "bench": {
        "scale": "it sizes the built-in miniature; the model is --model",
        "seed": "bench eval of a given --model trains nothing",
    },
    **{
        command: {
            "scale": "it sizes the built-in miniature; the model is --model",
            # train.* is how a model is finetuned; with --model nothing is finetuned, the given
            # model is the start of unlearning.
            "train": f"{command} starts from the given --model as it is, so nothing is "
            "finetuned (train.* is for 'forgetbench finetune'; unlearning's loop is unlearn.*)",
            "train.max_length": READ,
        }
        for command in ("unlearn", "run")
    },
}
# model.size builds the miniature's model; a given --model has its own shape.
for _command in ("finetune", "unlearn", "run", "sweep", "attack", "bench"):
    UNUSED_WITH_A_MODEL.setdefault(_command, {})["model.size"] = (
        "it shapes only the built-in model; yours is --model"
    )
UNUSED_WITH_A_MODEL["run"]["eval.mia_shadows"] = (
    "shadow models are trained only for the built-in miniature; give yours with "
    "study.mia_shadow_models"
)


# lm-eval's tasks are one model's utility, which `forgetbench eval` measures; a study, a sweep
# and the sanity checks score utility on their own sets.
for _command in ("run", "sweep", "sanity"):
    for _option in ("lm_eval_tasks", "lm_eval_chat_template", "lm_eval_include_path"):
        UNUSED[_command][f"eval.{_option}"] = (
            f"{_command} scores utility on its own sets; lm-eval's tasks score one model "
            "with 'forgetbench eval --model FOLDER ... eval.lm_eval_tasks=[...]'"
        )

# rwku.* is read by the RWKU study alone (docs/rwku.md): every other command refuses it.
for _command, _unused in UNUSED.items():
    _unused.setdefault("rwku", "rwku.* is for the RWKU study ('forgetbench run --benchmark rwku')")
# The RWKU study reads every rwku.* option (its `CorpusBenchmark.options`); another benchmark's
# study none.
UNUSED["run"]["rwku"] = (
    "rwku.* is read by the RWKU study alone ('forgetbench run --benchmark rwku', docs/rwku.md)"
)


def unused_reason(unused: Mapping[str, str | None], key: str) -> str | None:
    """Why `key` is not read, from the longest entry of `unused` that is it or a section of it."""
    matches = [name for name in unused if key == name or key.startswith(name + ".")]
    return unused[max(matches, key=len)] if matches else None
