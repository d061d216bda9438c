"""From the command line to the typed config: defaults, --config file, KEY=VALUE overrides and the
flags, then every refusal that needs no work (an option the command would not read, a split it
does not run on, a named file that is not there) before any data, model or training work; and
the `config` command, which prints the result."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from forgetbench.cli.usage import UsageError
from forgetbench.config import RunConfig, load_config, load_given_plugins
from forgetbench.config_names import DOCUMENT_BENCHMARKS, FORGET_SPLITS
from forgetbench.errors import ConfigError, UnknownNameError
from forgetbench.options.arguments import flag_value
from forgetbench.options.flags import FLAGS, SPLIT_CHOICES
from forgetbench.options.unused import UNUSED, UNUSED_WITH_A_MODEL, unused_reason
from forgetbench.study.given import builtin_models, given_data, trains_given_model

# The layers below (the study's miniature, the device, the method registry) are imported where
# they are used: they import torch, which `forgetbench --help` never needs.


def given_flags(args: argparse.Namespace) -> dict[str, tuple[str, Any]]:
    """Config key -> (flag, typed value) for each flag on the command line."""
    command = args.command
    given: dict[str, tuple[str, Any]] = {}
    for flag in FLAGS:
        value = getattr(args, flag.dest)
        if value is None:
            continue
        key = flag.key_for(command)
        if key in given:  # run's --method beside --methods, --split beside --splits
            many = next(f.name for f in FLAGS if f.key == key)
            raise ConfigError(
                f"forgetbench {command} got both {given[key][0]} and {flag.name}",
                f"give the list once: {many} a,b",
            )
        given[key] = (flag.name, flag_value(flag, command, value))
    return given


def refuse_twice_set(command: str, given: dict[str, tuple[str, Any]], overrides: list[str]) -> None:
    """One setting given twice on one command line (a flag and its KEY=VALUE, or one KEY=VALUE
    twice) is refused, even when the two values agree: which of two spellings wins is a rule a
    user would have to know, and a second one is more often a leftover of an edit than a wish."""
    seen: set[str] = set()
    for override in overrides:
        key = override.partition("=")[0]
        if key in given:
            raise ConfigError(
                f"forgetbench {command} got {given[key][0]} and {key}=, two values for one setting",
                f"give it once: {given[key][0]} or {key}=",
            )
        if key in seen:
            raise ConfigError(
                f"forgetbench {command} got {key}= twice, two values for one setting",
                "give it once",
            )
        seen.add(key)


def _refuse_lora_options_without_lora(config: RunConfig, keys: list[tuple[str, str]]) -> None:
    """`unlearn.lora_rank` (and every `lora_*` option) shapes the adapters only when `lora` is on:
    without it every weight trains and the option would be dropped."""
    for option, key in keys:
        section, _, name = key.partition(".")
        lora_option = section in ("train", "unlearn") and name.startswith("lora_")
        if lora_option and not getattr(config, section).lora:
            raise ConfigError(
                f"{option} applies only with {section}.lora=true: without it every weight trains",
                f"set {section}.lora=true, or drop {option}",
            )


def _refuse_unused(
    args: argparse.Namespace, config: RunConfig, given: dict[str, tuple[str, Any]]
) -> None:
    """Refuse, before any work, every option this command would not read: an option is applied
    or refused, never dropped."""
    from forgetbench.train.mini import check_mini_train_options

    command = args.command
    if config.benchmark.name in DOCUMENT_BENCHMARKS and command not in ("run", "eval", "config"):
        name = config.benchmark.name
        raise ConfigError(
            f"forgetbench {command} --benchmark {name}: {name} is studied by 'forgetbench run' "
            "(which trains, unlearns and scores its documents) and scored by 'forgetbench eval'",
            f"run 'forgetbench run --benchmark {name}', or check a folder with 'forgetbench "
            f"data stats --benchmark {name} --path DIR'",
        )
    unused = dict(UNUSED[command])
    throughput = command == "bench" and args.target == "train" and trains_given_model(config)
    if command == "bench" and args.target == "train" and not throughput:
        unused.update(UNUSED["bench train"])
    if command == "bench" and args.target == "study":
        unused = {**UNUSED["run"], **UNUSED["bench study"]}
    miniature = builtin_models(config)
    if not miniature:
        unused.update(UNUSED_WITH_A_MODEL.get(command, {}))
    if throughput:
        unused.update(UNUSED["bench throughput"])
    if command == "run" and config.benchmark.name in DOCUMENT_BENCHMARKS:
        from forgetbench.benchmarks.corpus import corpus_benchmark

        # The options of the benchmark's own section that its study reads (RWKU's targets).
        unused.update(dict.fromkeys(corpus_benchmark(config.benchmark.name).options))  # type: ignore[union-attr]
    reads_utility = False  # eval.rwku_utility: read by RWKU's evaluation alone
    if command == "eval" and config.benchmark.name in DOCUMENT_BENCHMARKS:
        from forgetbench.benchmarks.corpus import corpus_benchmark

        name = config.benchmark.name
        bench = corpus_benchmark(name)
        assert bench is not None
        # The options that choose the sets eval scores one by one (RWKU's targets).
        unused.update(dict.fromkeys(bench.eval_choose))
        reads_utility = "rwku_utility" in bench.eval_options
        unused["benchmark.split"] = (
            f"{name} is scored on its folder's own sets, and has no TOFU split"
        )
        unused["eval.probes"] = (
            f"the generalisation probes are TOFU-layout questions, which {name} has none of"
        )
    if not reads_utility:
        unused["eval.rwku_utility"] = (
            "it chooses how 'forgetbench eval --benchmark rwku' scores RWKU's utility (the RWKU "
            "study scores RWKU's own utility sets)"
        )
    typed = [(option, key) for key, (option, _) in given.items()]
    typed += [(key, key) for key in (o.partition("=")[0] for o in args.overrides)]
    for option, key in typed:
        reason = unused_reason(unused, key)
        if reason:
            raise ConfigError(
                f"forgetbench {command} does not use {option}: {reason}", f"drop {option}"
            )
    _refuse_lora_options_without_lora(config, typed)
    _refuse_absent_probes(config, typed)
    if miniature and command in ("finetune", "unlearn", "run", "sweep", "attack", "meta-eval"):
        check_mini_train_options(config.train)
    if command == "run":
        from forgetbench.study.format_data import refuse_format_methods

        refuse_format_methods(config.study.unlearn_formats, config.study.methods)
    if "unlearn.refusals_file" in (key for _, key in typed) and command in ("unlearn", "run"):
        _refuse_unread_refusals(command, config)
    _refuse_split(args, config)


def _refuse_absent_probes(config: RunConfig, keys: list[tuple[str, str]]) -> None:
    """`eval.probes=true` typed on the command line asks for the probes: on given data with no
    probe file for the split it would score nothing and say nothing (the default scores them
    where the data has them, silently)."""
    data = given_data(config)
    asked = any(key == "eval.probes" for _, key in keys) and config.eval.probes
    if not asked or data is None or config.benchmark.name == "lume":
        return
    from forgetbench.eval.runner import tofu_root
    from forgetbench.eval.tasks.probes import probe_file, probe_kinds_in

    split, tofu = config.benchmark.split, tofu_root(data)
    if tofu.is_dir() and not probe_kinds_in(tofu, split):
        raise ConfigError(
            f"eval.probes=true asks for the generalisation probes, and {tofu} has no probe file "
            f"for {split} (e.g. {probe_file(split, 'paraphrase')}.json)",
            "drop eval.probes=true, or give data that has them (the miniature's, "
            "docs/generalisation.md)",
        )


def _refuse_split(args: argparse.Namespace, config: RunConfig) -> None:
    """Each command's --split choices (`SPLIT_CHOICES`, what its --help offers) are what it runs
    on; any other split is refused here, before any work."""
    command, split = args.command, config.benchmark.split
    if command in ("run", "config") or command not in SPLIT_CHOICES:
        return  # run's splits are study.splits, typed as forget splits; config shows anything
    if command == "bench" and args.target != "eval":
        return
    if command in ("unlearn", "eval") and config.benchmark.name == "lume":
        return  # LUME has its own forget and retain sets; --split names a TOFU split
    choices = SPLIT_CHOICES[command]
    if split in choices:
        return
    if command == "finetune":
        raise ConfigError(
            f"forgetbench finetune --split {split}: finetune trains the finetuned model (full) "
            "or a retain model (retain90, retain95, retain99)",
            "use --split full, retain90, retain95 or retain99; unlearn a forget split with "
            "'forgetbench unlearn'",
        )
    what = (
        ": the attacks run on a forget split" if command == "attack" else " is not a forget split"
    )
    raise ConfigError(
        f"forgetbench {command} --split {split}{what}", f"use one of {', '.join(choices)}"
    )


def _refuse_unread_refusals(command: str, config: RunConfig) -> None:
    """unlearn.refusals_file on the command line of a run whose methods never answer with a
    refusal: refused, like any option the command would not read."""
    from forgetbench.methods.base import build_method, method_names

    def reads_refusals(name: str, options: dict[str, Any]) -> bool:
        return "refusal_logps" in build_method(name, options).required_inputs()

    readers = [name for name in method_names() if reads_refusals(name, {})]
    if command == "unlearn":
        chosen = {config.unlearn.method: dict(config.method)}
    else:
        from forgetbench.study.unlearn import method_config

        chosen = {m: dict(method_config(config, m).method) for m in config.study.methods}
    if not any(reads_refusals(name, options) for name, options in chosen.items()):
        methods = ", ".join(chosen)
        raise ConfigError(
            f"forgetbench {command} does not use unlearn.refusals_file: only "
            f"{' and '.join(readers)} read refusals, and {methods} "
            f"{'does' if len(chosen) == 1 else 'do'} not",
            f"drop unlearn.refusals_file, or unlearn with {' or '.join(readers)}",
        )


# The commands whose --help lists the registered methods (cli/flags.py's `_list_methods`).
_LISTING_METHODS = ("run", "unlearn")


def load_help_plugins(argv: list[str]) -> None:
    """`run --help --plugin mine.py` (or with a --config file listing `plugins:`) lists the
    plugin's methods beside the built-ins: the plugins the command line names are imported
    before argparse prints the help, wherever --help stands among the options."""
    # The command is the first word (only --debug may come before it).
    at = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if at is None or argv[at] not in _LISTING_METHODS:
        return
    scan = argparse.ArgumentParser(add_help=False)
    scan.add_argument("--config")
    scan.add_argument("--plugin", action="append")
    known, rest = scan.parse_known_args(argv[at + 1 :])
    overrides = [a for a in rest if a.startswith("plugins=")]
    load_given_plugins(known.config, overrides, known.plugin)


def _forget_sets(bench: Any, config: RunConfig) -> Any:
    """A document benchmark's forget sets: those of the given folder where they depend on it
    (RWKU's targets), else its own."""
    data = given_data(config)
    if data is None or not Path(data).is_dir():
        return bench.forget_sets
    return bench.chosen_sets(Path(data), config)


def _retain_log_flag(args: argparse.Namespace, config: RunConfig) -> RunConfig:
    """run's --retain-log: `study.retain_logs` of the study's one forget split (a document
    benchmark's forget set, or the TOFU split of --split); several splits need one log each."""
    path = getattr(args, "retain_log", None)
    if args.command != "run" or path is None:
        return config
    from forgetbench.benchmarks.corpus import corpus_benchmark

    if config.study.retain_logs:
        raise ConfigError(
            "forgetbench run got --retain-log and study.retain_logs, two values for one setting",
            "give one",
        )
    bench = corpus_benchmark(config.benchmark.name)
    splits = list(_forget_sets(bench, config)) if bench is not None else config.study.splits
    if len(splits) != 1:
        raise ConfigError(
            f"--retain-log names one retain model's evaluation, and this study runs "
            f"{len(splits)} forget splits ({', '.join(splits)})",
            "run one with --split NAME, or give one per split with "
            "study.retain_logs={SPLIT: DIR, ...}",
        )
    study = config.study.model_copy(update={"retain_logs": {splits[0]: path}})
    return config.model_copy(update={"study": study})


def _check_named_files(command: str, config: RunConfig) -> None:
    """The files and folders the config names, there before any data, model or training work:
    the study reads them only after minutes of training."""
    if command in ("run", "sweep"):
        from forgetbench.benchmarks.corpus import corpus_benchmark

        bench = corpus_benchmark(config.benchmark.name)
        known = tuple(_forget_sets(bench, config)) if bench is not None else FORGET_SPLITS
        named = {
            f"study.retain_logs.{split}": [path] for split, path in config.study.retain_logs.items()
        }
        named.update(
            {
                f"study.mia_shadow_models.{split}": list(files)
                for split, files in config.study.mia_shadow_models.items()
            }
        )
        for key in named:
            split = key.rsplit(".", 1)[1]
            if split not in known:
                raise UnknownNameError(f"split in {key.rsplit('.', 1)[0]}", split, known)
        if builtin_models(config) and config.study.retain_logs:
            raise ConfigError(
                "study.retain_logs names a retain model's evaluation for a study of your own "
                "model; the built-in study trains its own retain models",
                "drop study.retain_logs (--retain-log), or pass --model and --data",
            )
        for key, paths in named.items():
            for path in paths:
                if not Path(path).exists():
                    raise ConfigError(f"{key}: '{path}' does not exist", "check the path")
    include = config.eval.lm_eval_include_path
    if include is not None and config.eval.lm_eval_tasks and not Path(include).is_dir():
        raise ConfigError(
            f"eval.lm_eval_include_path: '{include}' is not a folder",
            "give the folder of your lm-eval task files",
        )


def resolve_config(args: argparse.Namespace) -> RunConfig:
    """Defaults, --config file, KEY=VALUE overrides, then the flags, as typed values."""
    command = args.command
    given = given_flags(args)
    refuse_twice_set(command, given, args.overrides)
    overridden = {o.partition("=")[0] for o in args.overrides}
    values = dict(given)
    for flag in FLAGS:
        key = flag.key_for(command)
        if command in flag.defaults and key not in values and key not in overridden:
            values[key] = (flag.name, flag.defaults[command])
    ignore = ("sweep",) if command == "sweep" else ()
    # `model.name` / `benchmark.path` from a config file or KEY=VALUE are --model / --data: the
    # commands read the model and the data from the config alone.
    # A study's method.* options are for its methods (study.methods; a sweep's: its trials'
    # methods, checked again per trial), not unlearn.method.
    study = command in ("run", "sweep") or (command == "bench" and args.target == "study")
    loaded = load_config(args.config, args.overrides, values, ignore=ignore, study=study)
    config = _retain_log_flag(args, loaded)
    if command != "config":
        _refuse_unused(args, config, given)
    # Torch only now: a config that does not validate is refused in a moment.
    from forgetbench.device import configure_model
    from forgetbench.methods.refusals import load_refusals

    configure_model(config.model)
    if command in ("finetune", "unlearn", "run", "sweep"):
        from forgetbench.train.sharding import check_sharding

        check_sharding(config, command)
    if command in ("run", "sweep", "eval"):
        _check_named_files(command, config)
    if config.unlearn.refusals_file and command in ("unlearn", "run"):
        # Read now: unlearning needs it only after minutes of pretraining and finetuning.
        load_refusals(config.unlearn.refusals_file)
    return config


def show(args: argparse.Namespace) -> dict[str, Any]:
    if args.schema:
        if args.config or args.overrides or given_flags(args):
            raise UsageError(
                "forgetbench config --schema describes every config, not one",
                "drop the other options",
            )
        result = RunConfig.model_json_schema()
    else:
        result = resolve_config(args).model_dump()
    if not args.json:
        print(json.dumps(result, indent=2))
    return result
