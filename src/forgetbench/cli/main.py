"""The `forgetbench` command. Every failure the user can cause becomes one line on stderr:
`error: <what> — <what to do>` and a non-zero exit by class (docs/commands.md, "Errors and exit
codes"); with `--json` the last stdout line is always one JSON object (the result, or
`{"error": ...}`). `--debug` (or FORGETBENCH_DEBUG=1) lets the exception through instead,
traceback and all, for bug reports."""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import sys
import time
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from forgetbench import __version__
from forgetbench.config import (
    BENCHMARKS,
    FORGET_SPLITS,
    SCALES,
    EvalConfig,
    RunConfig,
    load_config,
)
from forgetbench.errors import (
    ConfigError,
    FilesystemError,
    ForgetbenchError,
    UnknownNameError,
    os_error_in,
)
from forgetbench.io import readable_alias, require_writable_dir
from forgetbench.options import (
    FLAGS,
    SPLIT_CHOICES,
    UNUSED,
    UNUSED_WITH_A_MODEL,
    flag_help,
    flag_metavar,
    flag_type,
    flag_value,
    unused_reason,
)

Handler = Callable[[argparse.Namespace], dict[str, Any]]


class _Parser(argparse.ArgumentParser):
    """argparse prints usage plus a message over several lines; we want one sentence. Help text
    that needs heavy imports (the method registry, the miniature's recipe) is given as a callable
    (`lazy_help` on an option, `lazy_epilog` on the parser) and built only when help is shown."""

    lazy_epilog: Callable[[], str] | None = None

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message}", f"see '{self.prog} --help'")

    def format_help(self) -> str:
        for action in self._actions:
            lazy = getattr(action, "lazy_help", None)
            if lazy is not None:
                action.help = lazy()
        if self.lazy_epilog is not None:
            self.epilog = self.lazy_epilog()
        return super().format_help()


class _UsageError(ForgetbenchError):
    pass


EXIT_BUG = 1  # an exception we did not expect: a bug in forgetbench
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Read before parsing, so a usage error still answers in JSON (and in debug mode).
    as_json = "--json" in argv
    debug = "--debug" in argv or _debug_from_env()
    args = None
    try:
        args = _parse(build_parser(), argv)
        if not getattr(args, "handler", None):
            build_parser().print_help()
            return 2
        _check_output_folder(args)
        result = args.handler(args)
    except KeyboardInterrupt:
        if debug:
            raise
        print("error: interrupted — finished stages are kept; re-run to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if debug:
            raise
        error = _as_error(exc, args)
        message = _one_line(error.message)
        print(f"error: {message}", file=sys.stderr)
        if as_json:
            print(json.dumps({"error": message}))
        return error.exit_code
    # A command whose work finished but whose verdict is negative (a sanity check that fails)
    # reports it through a non-zero exit code after printing its result.
    exit_code = result.pop("exit_code", 0) if isinstance(result, dict) else 0
    if as_json:
        print(json.dumps(result, default=str))
    return exit_code


def _debug_from_env() -> bool:
    return os.environ.get("FORGETBENCH_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


class _Bug(ForgetbenchError):
    exit_code = EXIT_BUG


def _as_error(exc: Exception, args: argparse.Namespace | None) -> ForgetbenchError:
    """The one boundary: our own errors as they are, the operating system's refusals (full disk,
    read-only file system, permissions) as FilesystemError naming the path, anything else as a
    bug with a way to see its traceback."""
    if isinstance(exc, ForgetbenchError):
        return exc
    os_error = os_error_in(exc)
    if os_error is not None:
        exc = os_error
        error = FilesystemError.from_os_error(exc)
        folder = _output_folder(args)
        if exc.filename is None and folder is not None:  # e.g. ENOSPC from write() on a handle
            error = FilesystemError(f"{error.what} (writing under '{folder[0]}')", error.hint)
        return error
    detail = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}: {detail[0][:300]}" if detail else type(exc).__name__
    return _Bug(
        f"internal error ({what})",
        "this is a bug in forgetbench; re-run with --debug (or FORGETBENCH_DEBUG=1) for the "
        "traceback and report it",
    )


def _one_line(message: str) -> str:
    return re.sub(r"\s*\n\s*", " ", message.strip())


def _output_folder(args: argparse.Namespace | None) -> tuple[str, str] | None:
    """(folder, how the user named it) for a command that writes, when the user gave one; the
    commands declare where through `set_defaults(output=(dest, label))`."""
    dest, label = getattr(args, "output", None) or (None, None)
    value = getattr(args, dest, None) if dest else None
    return (str(value), label) if value else None


def _check_output_folder(args: argparse.Namespace) -> None:
    """Every command that writes refuses an unusable output folder here, before any data, model
    or training work. A folder a command picks itself (run's config `out`, sanity's default) is
    checked by that command as soon as it knows it."""
    dest, label = getattr(args, "output", None) or (None, None)
    if dest and getattr(args, dest, None) == "":
        # Path("") is the current folder: an empty --out would write there.
        raise ConfigError(f"{label} is '' (an empty path)", "give a folder name")
    folder = _output_folder(args)
    if folder is not None:
        require_writable_dir(folder[0], option=folder[1])


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    # argparse takes a positional list only once, so `run a=1 --splits forget10 b=2` would
    # reject `b=2`; KEY=VALUE overrides may go anywhere after the command.
    args, extra = parser.parse_known_args(argv)
    overrides = [a for a in extra if _OVERRIDE.match(a)]
    if overrides and hasattr(args, "overrides"):
        args.overrides = [*args.overrides, *overrides]
        extra = [a for a in extra if a not in overrides]
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


_OVERRIDE = re.compile(r"^[A-Za-z_][\w.]*=")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="forgetbench", description="Machine unlearning benchmarks for LLMs.")
    parser.add_argument("--version", action="version", version=f"forgetbench {__version__}")
    _debug_option(parser)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)

    def command(
        name: str, handler: Handler, help_text: str, *, writes: bool = False
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument(
            "--json", action="store_true", help="print one JSON object as the last line"
        )
        _debug_option(sub)
        sub.set_defaults(handler=handler)
        if writes:  # main() refuses an unusable --out before the handler runs
            sub.set_defaults(output=("out", "--out"))
        return sub

    data = command("data", _data_without_action, "inspect benchmark data")
    data_commands = data.add_subparsers(
        title="data commands", metavar="ACTION", parser_class=_Parser
    )
    stats = data_commands.add_parser("stats", help="count records per split/task/kind")
    stats.add_argument("--json", action="store_true")
    _debug_option(stats)
    stats.add_argument("--benchmark", required=True, help="|".join(BENCHMARKS))
    stats.add_argument("--path", required=True, help="the benchmark's data folder")
    stats.set_defaults(handler=_data_stats)
    generate = data_commands.add_parser(
        "generate", help="write the built-in miniature benchmark (offline, seeded)"
    )
    generate.add_argument("--json", action="store_true")
    _debug_option(generate)
    # Checked by get_scale (one line naming the scale, with a suggestion), not by argparse.
    generate.add_argument(
        "--scale",
        default="tiny",
        metavar="{" + ",".join(SCALES) + "}",
        help="size of the miniature benchmark (default: tiny)",
    )
    generate.add_argument("--seed", type=int, default=0, help="same seed, same bytes (default: 0)")
    generate.add_argument(
        "--out", required=True, help="output folder (new, or one generated alike)"
    )
    generate.set_defaults(handler=_data_generate, output=("out", "--out"))

    cache = command(
        "cache", _cache_without_action, "the stages every output folder shares (FORGETBENCH_CACHE)"
    )
    cache_commands = cache.add_subparsers(
        title="cache commands", metavar="ACTION", parser_class=_Parser
    )
    for action, handler, help_text in (
        ("list", _cache_list, "every cached stage with its size"),
        ("clear", _cache_clear, "delete every cached stage no run is using"),
    ):
        sub = cache_commands.add_parser(action, help=help_text, description=help_text)
        sub.add_argument("--json", action="store_true")
        _debug_option(sub)
        sub.set_defaults(handler=handler)

    compare = command(
        "compare", _compare, "TOFU scores of a candidate log against a retain model's log"
    )
    compare.add_argument(
        "--reference",
        required=True,
        help="retain model's eval log (TOFU layout or open-unlearning's TOFU_EVAL.json; file or "
        "folder); its questions must be among the candidate's",
    )
    compare.add_argument(
        "--candidate", required=True, help="evaluated model's eval log (file or folder)"
    )
    form = EvalConfig.model_fields["truth_ratio_form"]
    compare.add_argument(
        "--truth-ratio-form",
        choices=typing.get_args(form.annotation),
        default=form.default,
        help=f"{form.description} (default: {form.default})",
    )
    compare.add_argument(
        "--allow-question-mismatch",
        action="store_true",
        help="run the KS tests on every question of both logs, unmatched, even if they differ",
    )

    show = command("config", _config, "print the resolved run config (defaults + file + overrides)")
    _config_options(show, "config")
    show.add_argument(
        "--schema", action="store_true", help="print the YAML config's JSON schema instead"
    )

    finetune = command(
        "finetune",
        _finetune,
        "finetune a model on a TOFU-layout split (full -> finetuned, retainNN -> retain model)",
        writes=True,
    )
    _config_options(finetune, "finetune")
    finetune.add_argument("--no-progress", action="store_true", help="no progress bar")

    unlearn = command(
        "unlearn", _unlearn, "run an unlearning method on a forget split", writes=True
    )
    _config_options(unlearn, "unlearn")
    _list_methods(unlearn)
    unlearn.add_argument("--no-progress", action="store_true", help="no progress bar")

    evaluate = command(
        "eval",
        _eval,
        "every metric of one model: per-question logs (TOFU layout) + summary",
        writes=True,
    )
    _config_options(evaluate, "eval")
    evaluate.add_argument("--retain-log", help="a retain model's eval log, for forget quality")
    evaluate.add_argument("--no-progress", action="store_true", help="no line per task on stderr")

    sanity = command(
        "sanity",
        _sanity,
        "TOFU appendix E sanity checks of the KS test on the miniature study",
        writes=True,
    )
    _config_options(sanity, "sanity")
    sanity.add_argument("--no-progress", action="store_true", help="no progress bars")
    run = command(
        "run", _run, "the whole study: data, models, methods, metrics, report", writes=True
    )
    _config_options(run, "run")
    _list_methods(run)
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    attack = command(
        "attack",
        _attack,
        "robustness attacks (relearning, quantisation, in-context facts) on a model: does the "
        "forgotten knowledge come back?",
        writes=True,
    )
    _config_options(attack, "attack")
    attack.add_argument(
        "--finetuned", help="the model before unlearning, for knowledge recovered (with --data)"
    )
    attack.add_argument("--retain", help="a retain model, for forget quality (with --data)")
    attack.add_argument("--no-progress", action="store_true", help="no progress bars")

    sweep = command(
        "sweep",
        _sweep,
        "tune each method on a validation split (grid or random search, seeds) and write the "
        "selected settings as a preset for run",
        writes=True,
    )
    _config_options(sweep, "sweep")
    sweep.add_argument(
        "--executor",
        choices=("process", "ray"),
        default="process",
        help="where trials run: process = local process pool (default); ray = Ray tasks "
        "(pip install 'forgetbench[ray]')",
    )
    sweep.add_argument(
        "--address", help="Ray cluster address (default: start a local Ray for the sweep)"
    )
    # Unset by default, so that one given with the process executor is refused, not dropped.
    sweep.add_argument("--cpus-per-trial", type=float, help="CPUs a Ray task declares (default: 1)")
    sweep.add_argument("--gpus-per-trial", type=float, help="GPUs a Ray task declares (default: 0)")
    sweep.add_argument("--no-progress", action="store_true", help="no progress bars")

    meta = command(
        "meta-eval",
        _meta_eval,
        "which metrics can be trusted: faithfulness of each forget-set metric on pools of "
        "miniature models that saw or never saw the forget set",
        writes=True,
    )
    _config_options(meta, "meta-eval")
    meta.add_argument("--no-progress", action="store_true", help="no progress bars")
    bench = command(
        "bench", _bench, "speed benchmarks (times and peak memory; not tests)", writes=True
    )
    bench.add_argument(
        "target",
        help="what to time: train (pretrain + finetune + retain90) | "
        "eval (TOFU evaluation, fast path vs a naive reference; checks both agree) | "
        "study (forgetbench run, cold: per stage, per job, training/scoring/generation shares)",
    )
    _config_options(bench, "bench")

    report = command("report", _report, "rebuild the HTML report from a results folder")
    report.add_argument("results", help="results folder")
    report.set_defaults(output=("results", "results folder"))
    # Listed in the order people use them: the study first, then its steps one by one, then
    # reading and checking results, then the tools.
    commands._choices_actions.sort(key=lambda action: COMMAND_ORDER.index(action.dest))
    return parser


COMMAND_ORDER = (
    "run", "finetune", "unlearn", "eval", "compare", "report", "attack", "sweep", "meta-eval",
    "sanity", "data", "config", "cache", "bench",
)  # fmt: skip


def _list_methods(sub: argparse.ArgumentParser) -> None:
    """Every registered method with its one line, under the command's options: built when help
    is shown, since the registry imports torch."""
    sub.formatter_class = argparse.RawDescriptionHelpFormatter

    def methods() -> str:
        import shutil
        import textwrap

        from forgetbench.methods.base import method_names, method_summary

        names = method_names()
        width = max(len(name) for name in names) + 4
        columns = min(100, shutil.get_terminal_size().columns) - 2
        lines = ["methods (options as method.<option>=VALUE; docs/methods.md):"]
        for name in names:
            lines += textwrap.wrap(
                method_summary(name),
                width=columns,
                initial_indent=f"  {name:<{width - 2}}",
                subsequent_indent=" " * width,
                break_on_hyphens=False,
            )
        return "\n".join(lines)

    sub.lazy_epilog = methods  # type: ignore[attr-defined]


def _debug_option(parser: argparse.ArgumentParser) -> None:
    # Accepted before or after the command; main() reads it from argv, so it holds even when
    # parsing fails.
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="on an error, show the Python traceback (for bug reports); or FORGETBENCH_DEBUG=1",
    )


def _config_options(sub: argparse.ArgumentParser, command: str) -> None:
    # Generated from forgetbench.options. A flag the command does not read is still parsed, so
    # it is refused by name with the reason (`_refuse_unused`), but hidden from its --help.
    sub.set_defaults(command=command)
    sweep = command == "sweep"  # a sweep is defined by its file
    sub.add_argument(
        "--config",
        required=sweep,
        help="run config with a sweep section (docs/sweeps.md)"
        if sweep
        else "YAML run config (docs/config.md)",
    )
    for flag in FLAGS:
        unused = unused_reason(UNUSED[command], flag.key_for(command))
        # An alias (run's --method for --methods) is named on its plural's line instead.
        hidden = unused or command in flag.alias_in
        action = sub.add_argument(
            flag.name,
            type=flag_type(flag),
            metavar=flag_metavar(flag, command),
            required=command in flag.required,
            help=argparse.SUPPRESS if hidden else "",
        )
        if not hidden:
            action.lazy_help = functools.partial(flag_help, flag, command)  # type: ignore[attr-defined]
    example = _OVERRIDE_EXAMPLES.get(command, "eval.batch_size=8")
    sub.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help=f"config overrides (docs/config.md), e.g. {example}",
    )


# A key each command reads (tests/test_options.py checks it is accepted), for its --help.
_OVERRIDE_EXAMPLES = {
    "config": "train.lr=2e-5",
    "finetune": "train.lr=2e-5",
    "unlearn": "unlearn.batch_size=16",
    "eval": "eval.max_questions=300",
    "run": "study.seeds=[0,1,2]",
    "attack": "attack.relearn_epochs=2",
    "sweep": "eval.batch_size=8",
    "meta-eval": "eval.batch_size=8",
    "sanity": "eval.batch_size=8",
    "bench": "eval.batch_size=8",
}


def _given_flags(args: argparse.Namespace) -> dict[str, tuple[str, Any]]:
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


def _refuse_unused(
    args: argparse.Namespace, config: RunConfig, given: dict[str, tuple[str, Any]]
) -> None:
    """Refuse, before any work, every option this command would not read: an option is applied
    or refused, never dropped."""
    command = args.command
    unused = dict(UNUSED[command])
    if command == "bench" and args.target == "train":
        unused.update(UNUSED["bench train"])
    if command == "bench" and args.target == "study":
        unused = {**UNUSED["run"], **UNUSED["bench study"]}
    miniature = config.benchmark.name == "mini" and not args.model and not args.data
    if not miniature:
        unused.update(UNUSED_WITH_A_MODEL.get(command, {}))
    typed = [(option, key) for key, (option, _) in given.items()]
    typed += [(key, key) for key in (o.partition("=")[0] for o in args.overrides)]
    for option, key in typed:
        reason = unused_reason(unused, key)
        if reason:
            raise ConfigError(
                f"forgetbench {command} does not use {option}: {reason}", f"drop {option}"
            )
    if miniature and command in ("finetune", "unlearn", "run", "sweep", "attack", "meta-eval"):
        from forgetbench.train.mini import check_mini_train_options

        check_mini_train_options(config.train)
    if "unlearn.refusals_file" in (key for _, key in typed) and command in ("unlearn", "run"):
        _refuse_unread_refusals(command, config)
    _refuse_split(args, config)


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
        settings = config.study.method_settings
        chosen = {
            m: dict(settings[m].options) if m in settings else {} for m in config.study.methods
        }
    if not any(reads_refusals(name, options) for name, options in chosen.items()):
        methods = ", ".join(chosen)
        raise ConfigError(
            f"forgetbench {command} does not use unlearn.refusals_file: only "
            f"{' and '.join(readers)} read refusals, and {methods} "
            f"{'does' if len(chosen) == 1 else 'do'} not",
            f"drop unlearn.refusals_file, or unlearn with {' or '.join(readers)}",
        )


def _check_named_files(command: str, config: RunConfig, *, miniature: bool) -> None:
    """The files and folders the config names, there before any data, model or training work:
    the study reads them only after minutes of training."""
    if command in ("run", "sweep"):
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
            if split not in FORGET_SPLITS:
                raise UnknownNameError(f"split in {key.rsplit('.', 1)[0]}", split, FORGET_SPLITS)
        if miniature and config.benchmark.name == "mini" and config.study.retain_logs:
            raise ConfigError(
                "study.retain_logs names a retain model's evaluation for a study of your own "
                "model; the built-in miniature trains its own retain models",
                "drop study.retain_logs, or pass --model and --data",
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


def _resolve_config(args: argparse.Namespace) -> RunConfig:
    """Defaults, --config file, KEY=VALUE overrides, then the flags, as typed values."""
    command = args.command
    given = _given_flags(args)
    overridden = {o.partition("=")[0] for o in args.overrides}
    values = dict(given)
    for flag in FLAGS:
        key = flag.key_for(command)
        if command in flag.defaults and key not in values and key not in overridden:
            values[key] = (flag.name, flag.defaults[command])
    ignore = ("sweep",) if command == "sweep" else ()
    config = load_config(args.config, args.overrides, values, ignore=ignore)
    # `model.name` / `benchmark.path` from a config file or KEY=VALUE are --model / --data: the
    # handlers read args, so they are copied there rather than dropped.
    if args.model is None and config.model.name != "tiny-llama":
        args.model = config.model.name
    if args.data is None and config.benchmark.path is not None:
        args.data = config.benchmark.path
    if command != "config":
        _refuse_unused(args, config, given)
    # Lazy: the device module imports torch, which `forgetbench --help` never needs.
    from forgetbench.device import configure

    configure(
        config.model.device,
        config.model.dtype,
        mixed_precision=config.model.mixed_precision,
        gradient_checkpointing=config.model.gradient_checkpointing,
    )
    if command in ("run", "sweep", "eval"):
        _check_named_files(command, config, miniature=not args.model and not args.data)
    if config.unlearn.refusals_file and command in ("unlearn", "run"):
        from forgetbench.methods.refusals import load_refusals

        # Read now: unlearning needs it only after minutes of pretraining and finetuning.
        load_refusals(config.unlearn.refusals_file)
    return config


def _config(args: argparse.Namespace) -> dict[str, Any]:
    if args.schema:
        if args.config or args.overrides or _given_flags(args):
            raise _UsageError(
                "forgetbench config --schema describes every config, not one",
                "drop the other options",
            )
        result = RunConfig.model_json_schema()
    else:
        result = _resolve_config(args).model_dump()
    if not args.json:
        print(json.dumps(result, indent=2))
    return result


def _cache_without_action(args: argparse.Namespace) -> dict[str, Any]:
    raise _UsageError("forgetbench cache: missing action", "try 'forgetbench cache list'")


def _cache_folder() -> Path:
    from forgetbench.cache import CACHE_ENV, cache_root

    root = cache_root()
    if root is None:
        raise _UsageError(
            f"the shared cache is off ({CACHE_ENV}={os.environ.get(CACHE_ENV)!r})",
            f"unset {CACHE_ENV} or point it at a folder",
        )
    return root


def _cache_list(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.cache import entries, require_usable_root, survey
    from forgetbench.report.console import print_rows

    root = require_usable_root(_cache_folder())
    found = entries(root)
    foreign = [str(p) for p in survey(root)[1]]
    total = sum(int(e["bytes"]) for e in found)  # type: ignore[call-overload]
    if not args.json:
        rows = [
            {"kind": e["kind"], "name": e["name"], "MiB": f"{int(e['bytes']) / 2**20:.1f}",  # type: ignore[call-overload]
             "in use": "yes" if e["in_use"] else ""}
            for e in found
        ]  # fmt: skip
        print_rows(rows, title=f"forgetbench cache: {root}")
        print(f"{len(found)} entries, {total / 2**20:.1f} MiB")
        if foreign:
            print(
                f"{len(foreign)} item(s) here are not forgetbench entries and are left alone: "
                + ", ".join(foreign[:3])
                + (" ..." if len(foreign) > 3 else ""),
                file=sys.stderr,
            )
    return {"cache": str(root), "entries": found, "bytes": total, "foreign": foreign}


def _cache_clear(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.cache import clear, require_usable_root

    root = require_usable_root(_cache_folder())
    removed, freed, kept = clear(root) if root.is_dir() else ([], 0, [])
    if not args.json:
        for name in removed:
            print(f"removed {name}")
        print(f"removed {len(removed)} entries ({freed / 2**20:.1f} MiB) from {root}")
        for name in kept:
            print(f"kept {name}: a run is using it", file=sys.stderr)
    return {"cache": str(root), "removed": len(removed), "removed_entries": removed,
            "bytes": freed, "kept": kept}  # fmt: skip


def _data_without_action(args: argparse.Namespace) -> dict[str, Any]:
    raise _UsageError("forgetbench data: missing action", "try 'forgetbench data stats'")


def _finetune(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.study.resolve import is_miniature, miniature
    from forgetbench.train.stages import finetune_split

    _quiet_transformers()
    config = _resolve_config(args)
    if not args.out:
        raise _UsageError(
            "forgetbench finetune: --out is required",
            "pass the run folder; finished stages there are reused",
        )
    split = config.benchmark.split  # `full` unless --split says otherwise
    progress = not (args.no_progress or args.json)
    if is_miniature(config, args.model, args.data):
        result = miniature(config, Path(args.out), progress=progress).model(split)
    else:
        if not args.data:
            raise _UsageError(
                "forgetbench finetune: --data is required",
                "pass a TOFU-layout folder, a JSON(L) file or a Hugging Face dataset id "
                "(or neither --model nor --data for the built-in miniature benchmark)",
            )
        if not args.model:
            raise _UsageError(
                "forgetbench finetune: --model is required",
                "pass a Hugging Face id or a saved model folder",
            )
        result = finetune_split(
            config, model=args.model, data=args.data, split=split, out=args.out, progress=progress
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


def _quiet_transformers() -> None:
    """Our progress bars show the training; transformers' load/save bars only flicker. Called by
    the model commands, not in main(), so light commands never import transformers."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()


def _unlearn(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.study.unlearn import unlearn_command

    _quiet_transformers()
    config = _resolve_config(args)
    if not args.out:
        raise _UsageError(
            "forgetbench unlearn: --out is required",
            "pass the run folder; finished stages there are reused",
        )
    result = unlearn_command(
        config,
        model=args.model,
        data=args.data,
        split=config.benchmark.split,
        out=args.out,
        progress=not (args.no_progress or args.json),
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


def _eval(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.data.logs import read_eval_log
    from forgetbench.eval.runner import SUMMARY_NAME, relative_scores
    from forgetbench.eval.tasks.lume import lume_final_scores
    from forgetbench.io import read_json
    from forgetbench.metrics import METRICS
    from forgetbench.modeling import load_tokenizer, resolve_template
    from forgetbench.report.tables import lume_mmlu_notes
    from forgetbench.study.evaluate import evaluate_cached
    from forgetbench.study.resolve import Study

    _quiet_transformers()
    config = _resolve_config(args)
    for option in ("model", "data", "out"):
        if not getattr(args, option):
            raise _UsageError(
                f"forgetbench eval: --{option} is required", "see 'forgetbench eval --help'"
            )
    out = Path(args.out)
    if (out / SUMMARY_NAME).exists():
        raise _UsageError(
            f"{out / SUMMARY_NAME} already exists",
            "pass another --out; finished evaluations are never overwritten",
        )
    benchmark = config.benchmark.name
    reference_log, reference_scores = None, None
    if args.retain_log:  # read before the work, so a bad path fails at once
        reference_log = read_eval_log(args.retain_log)
        summary_file = Path(args.retain_log)
        summary_file = (
            summary_file if summary_file.is_dir() else summary_file.parent
        ) / SUMMARY_NAME
        if summary_file.is_file():
            reference_scores = read_json(summary_file).get("scores")
    info = {
        "model": args.model,
        "data": args.data,
        "benchmark": benchmark,
        "split": config.benchmark.split,
        "retain_log": args.retain_log,
        "forgetbench": __version__,
        "metric_versions": {name: m.version for name, m in METRICS.items()},
        "config": config.model_dump(),
    }

    def extend(log: Any, scores: dict[str, Any]) -> dict[str, Any]:
        added = relative_scores(
            log, scores, reference_log, reference_scores, form=config.eval.truth_ratio_form
        )
        if config.eval.lm_eval_tasks:
            from forgetbench.eval.lmeval import lm_eval_utility

            utility = lm_eval_utility(
                args.model,
                config.eval.lm_eval_tasks,
                batch_size=config.eval.batch_size,
                apply_chat_template=config.eval.lm_eval_chat_template,
                dtype=config.model.dtype,
                trust_remote_code=config.model.trust_remote_code,
                include_path=config.eval.lm_eval_include_path,
            )
            added.update({f"lm_eval/{key}": value for key, value in utility.items()})
        # LUME's final score with MMLU as utility, now that lm-eval may have measured it.
        added.update(lume_final_scores({**scores, **added}, given_mmlu=config.eval.lume_mmlu))
        return added

    if benchmark != "lume":
        _require_eval_files(config, Path(args.data), quiet=args.json)
    tokenizer = load_tokenizer(args.model, trust_remote_code=config.model.trust_remote_code)
    study = Study(
        Path(args.data), Path(args.model), None, {},
        resolve_template(config.model.template, tokenizer, args.model),
        config.train.max_length, lambda name: (None, {}), benchmark=benchmark,
    )  # fmt: skip
    started = time.perf_counter()

    def on_task(name: str, k: int, n: int) -> None:
        # On a terminal, like the training bars: a log or a pipe gets the result lines only.
        if not args.json and not args.no_progress and sys.stderr.isatty():
            print(
                f"eval {config.benchmark.split}: task {k}/{n} {name} "
                f"({time.perf_counter() - started:.0f} s so far)",
                file=sys.stderr, flush=True,
            )  # fmt: skip

    scores = evaluate_cached(
        args.model, study, split=config.benchmark.split, options=config.eval, folder=out,
        model=config.model, info=info, extend=extend, shared=False, on_task=on_task,
    ).scores  # fmt: skip
    summary = {"scores": scores, "out": str(out), **info}
    if not args.json:
        from forgetbench.report.console import print_comparison

        if "forget_quality" in scores:
            print_comparison({"candidate": args.model, "reference": args.retain_log, **scores})
        else:
            print(json.dumps(scores, indent=2))
        print(f"per-question logs and summary: {out}")
    for note in lume_mmlu_notes([scores]):
        print(f"warning: {note}", file=sys.stderr)
    return summary


def _require_eval_files(config: RunConfig, data: Path, *, quiet: bool) -> None:
    """Every TOFU file the evaluation reads, named at once before the model loads; a missing
    holdout only turns membership inference off, and says so."""
    from forgetbench.data.tofu import require_splits, split_file
    from forgetbench.eval.runner import tofu_root
    from forgetbench.eval.tofu_eval import eval_set_files

    split = config.benchmark.split
    tofu = tofu_root(data)
    needed = list(eval_set_files(split).values())
    holdout = split.replace("forget", "holdout")
    if config.eval.mia and tofu.is_dir() and split_file(tofu, holdout) is not None:
        needed.append(split)  # the members' side of membership inference
    elif config.eval.mia and tofu.is_dir() and not quiet:
        print(
            f"note: no {holdout}.json(l) in {tofu}: membership inference is skipped "
            "(eval.mia=false silences this)",
            file=sys.stderr,
        )
    require_splits(tofu, needed, reader=f"forgetbench eval --split {split}")


def _sanity(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.study.sanity import sanity_study

    _quiet_transformers()
    config = _resolve_config(args)
    out = Path(args.out) if args.out else Path("runs") / f"sanity-{config.scale}"
    if not args.out:
        require_writable_dir(out, option="the default --out")
    result = sanity_study(
        out,
        scale=config.scale,
        seed=config.seed,
        eval_options=config.eval,
        progress=not (args.json or args.no_progress),
    )
    if not args.json:
        from forgetbench.report.console import print_rows

        print_rows(
            [
                {
                    "check": c["name"],
                    "holds": "yes" if c["holds"] else "NO",
                    "p_value": "" if c["p_value"] is None else f"{c['p_value']:.3g}",
                    "value": "" if c["value"] is None else f"{c['value']:.3f}",
                    "expected": c["expected"],
                }
                for c in result["checks"]
            ],
            title=f"sanity checks, scale {config.scale} ({result['seconds']:.0f} s)",
        )
        print("all checks hold" if result["all_hold"] else "some checks FAIL")
    return {**result, "exit_code": 0 if result["all_hold"] else 1}


def _run(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.html import build_report
    from forgetbench.report.tables import lume_mmlu_notes, print_leaderboard
    from forgetbench.rows import leaderboard
    from forgetbench.study.run import run_study

    _quiet_transformers()
    config = _resolve_config(args)
    if config.eval.lume_mmlu is not None:
        raise _UsageError(
            "eval.lume_mmlu is one model's MMLU accuracy; a study evaluates many models",
            "give it to 'forgetbench eval' for the model it was measured on",
        )
    out = Path(config.out)
    if args.out is None:  # from the config file, an `out=` override or the default
        require_writable_dir(out, option="out")
    results = run_study(
        config,
        out=out,
        model=args.model,
        data=args.data,
        progress=not (args.json or args.no_progress),
    )
    report = build_report(out)
    if not args.json:
        # Identical splits once, as in the report: their rows are the computed split's.
        same = results.get("same_data", {})
        print_leaderboard(leaderboard([r for r in results["rows"] if r["split"] not in same]))
        for split, computed in same.items():
            print(
                f"{split} = {computed} here (the same questions): computed once, shown as {computed}"
            )
        print(f"results: {out / 'results.json'}, {out / 'results.csv'}")
        print(f"report:  {report}")
    for note in lume_mmlu_notes(results["rows"]):
        print(f"warning: {note}", file=sys.stderr)
    return {"rows": results["rows"], "report": str(report)}


def _attack(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.robustness import print_attack_table
    from forgetbench.study.attack import run_attacks

    _quiet_transformers()
    config = _resolve_config(args)
    split = config.benchmark.split  # a forget split: _refuse_split checked it
    if not config.study.attacks:
        raise ConfigError("forgetbench attack got an empty --attacks", "name at least one attack")
    if args.data is None and (args.finetuned or args.retain):
        raise ConfigError(
            "--finetuned and --retain are for a model of your own (with --data)",
            "on the built-in miniature its finetuned and retain models are the references",
        )
    result = run_attacks(
        config, out=Path(args.out), split=split, model=args.model, data=args.data,
        finetuned=args.finetuned, retain=args.retain,
        progress=not (args.json or args.no_progress),
    )  # fmt: skip
    if not args.json:
        print_attack_table(result["models"], config.study.attacks)
        print(f"attacks: {Path(args.out) / 'attacks.json'}")
    return result


def _sweep(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.io import atomic_write_text
    from forgetbench.report.sweep import render_sweep
    from forgetbench.study.pool import make_pool, study_workers
    from forgetbench.study.sweep import PRESET_FILE, REPORT_FILE, SWEEP_FILE, read_spec, run_sweep

    _quiet_transformers()
    if args.config is None:
        raise _UsageError(
            "forgetbench sweep needs --config: a run config with a sweep section",
            "see docs/sweeps.md",
        )
    if args.out is None:
        raise _UsageError("forgetbench sweep: --out is required", "see 'forgetbench sweep --help'")
    _check_executor_options(args)
    spec = read_spec(args.config)
    config = _resolve_config(args)
    workers = study_workers(config, args.model)
    if args.executor == "ray":
        from forgetbench.study.ray_executor import RayPool

        pool = RayPool(
            address=args.address,
            workers=workers,
            cpus=1.0 if args.cpus_per_trial is None else args.cpus_per_trial,
            gpus=args.gpus_per_trial or 0.0,
        )
    else:
        pool = make_pool(workers)
    out = Path(args.out)
    try:
        result = run_sweep(
            config, spec, out=out, model=args.model, data=args.data, pool=pool,
            executor=args.executor, progress=not (args.json or args.no_progress),
        )  # fmt: skip
    finally:
        pool.shutdown(cancel_futures=True)
    atomic_write_text(out / REPORT_FILE, render_sweep(result))
    if not args.json:
        for method, pick in result["selected"].items():
            flag = "" if pick["matched"] else " * (utility not matched)"
            print(
                f"{method}: trial {pick['trial']} {pick['settings']} step {pick['step']}: "
                f"forget quality {pick['forget_quality']:.3g}, utility "
                f"{pick['model_utility']:.4f}{flag}"
            )
        print(f"{len(result['trials'])} trials in {result['timings']['total']:.0f} s")
        print(f"preset:  {out / PRESET_FILE} (forgetbench run --config {out / PRESET_FILE})")
        print(f"results: {out / SWEEP_FILE}; report: {out / REPORT_FILE}")
    return {"selected": result["selected"], "preset": str(out / PRESET_FILE)}


def _check_executor_options(args: argparse.Namespace) -> None:
    """The Ray options only with --executor ray, and resources a Ray task can declare."""
    ray_options = {
        "--address": args.address,
        "--cpus-per-trial": args.cpus_per_trial,
        "--gpus-per-trial": args.gpus_per_trial,
    }
    given = [option for option, value in ray_options.items() if value is not None]
    if args.executor != "ray" and given:
        raise _UsageError(
            f"forgetbench sweep --executor {args.executor} does not use {given[0]}: it is for "
            "--executor ray",
            f"add --executor ray, or drop {given[0]}",
        )
    if args.cpus_per_trial is not None and not (
        math.isfinite(args.cpus_per_trial) and args.cpus_per_trial > 0
    ):
        raise _UsageError(
            f"--cpus-per-trial {args.cpus_per_trial:g}: a trial needs a positive number of CPUs",
            "e.g. --cpus-per-trial 1 (or 0.5 to pack two trials on a core)",
        )
    if args.gpus_per_trial is not None and not (
        math.isfinite(args.gpus_per_trial) and args.gpus_per_trial >= 0
    ):
        raise _UsageError(
            f"--gpus-per-trial {args.gpus_per_trial:g}: a trial declares 0 or more GPUs",
            "e.g. --gpus-per-trial 1, or 0.5 to share a GPU between two trials",
        )


def _meta_eval(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.results import RESULTS_FILE
    from forgetbench.study.meta_eval import meta_evaluate
    from forgetbench.study.run import with_setup_defaults

    _quiet_transformers()
    config = with_setup_defaults(_resolve_config(args), model=None, data=None)
    if not args.out:
        raise _UsageError(
            "forgetbench meta-eval: --out is required", "pass a folder for the pools' models"
        )
    out = Path(args.out)
    result = meta_evaluate(
        config,
        out=out,
        forget_split=config.benchmark.split,
        progress=not (args.json or args.no_progress),
    )
    report = None
    if (out / RESULTS_FILE).is_file():  # a run folder: its report gains the meta-evaluation
        from forgetbench.report.html import build_report

        report = str(build_report(out))
    if not args.json:
        from forgetbench.report.console import print_rows
        from forgetbench.report.tables import format_cell

        sizes = {p: sum(m["pool"] == p for m in result["models"]) for p in ("positive", "negative")}
        print_rows(
            [
                {
                    "metric": row["metric"],
                    "knows if": row["direction"],
                    "faithfulness (AUC)": format_cell(row["faithfulness"]),
                    "robustness": format_cell(row["robustness"])
                    if row["robustness"] is not None
                    else "—",
                    "R / Q": f"{format_cell(row.get('relearning'))} / "
                    f"{format_cell(row.get('quantisation'))}",
                    "attacked": len(row.get("attacked", [])),
                    "pools (+/-)": f"{row['positives']}/{row['negatives']}",
                    "positive mean": format_cell(row["positive_mean"]),
                    "negative mean": format_cell(row["negative_mean"]),
                }
                for row in result["metrics"]
            ],
            title=f"meta-evaluation on {result['split']}, scale {result['scale']}: "
            f"{sizes['positive']} positive, {sizes['negative']} negative models",
        )
        for family, reason in result.get("not_judged", {}).items():
            print(f"not judged: {family}* — {reason}")
        print(f"meta-evaluation: {out / 'meta_eval.json'} ({result['timings']['total']:.0f} s)")
        if report:
            print(f"report:  {report}")
    return {**result, "report": report}


def _report(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.html import build_report

    path = build_report(Path(args.results))
    if not args.json:
        print(f"report: {path}")
    return {"report": str(path)}


def _bench(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.console import print_rows
    from forgetbench.study.bench import bench_training

    if args.target not in ("train", "eval", "study"):
        raise UnknownNameError("benchmark target", args.target, ("train", "eval", "study"))
    config = _resolve_config(args)
    if not args.out:
        raise _UsageError("forgetbench bench: --out is required", "pass a scratch run folder")
    if args.target == "eval":
        return _bench_eval(args, config)
    if args.target == "study":
        from forgetbench.study.bench import bench_study

        _quiet_transformers()
        result = bench_study(Path(args.out), config, progress=not args.json)
        if not args.json:
            print_rows(result["stages"] + result["jobs"], title=f"study, scale {config.scale}")
            shares = ", ".join(f"{k} {v:.0%}" for k, v in result["shares"].items())
            print(f"wall {result['wall_seconds']:.1f} s on {result['workers']} workers; {shares}")
        return result
    result = bench_training(
        Path(args.out), scale=config.scale, seed=config.seed, progress=not args.json
    )
    if not args.json:
        print_rows(result["stages"], title=f"training benchmark, scale {config.scale}")
        print(
            f"total {result['total_seconds']:.1f} s, peak memory {result['peak_rss_mib']:.0f} MiB; "
            f"finetuned ROUGE-L on full {result['finetuned_full_rougeL']:.3f}, "
            f"retain model on forget10 {result['retain_forget10_rougeL']:.3f}"
        )
    return result


def _bench_eval(args: argparse.Namespace, config: RunConfig) -> dict[str, Any]:
    """Time the fast evaluation backend against the naive one on one model: a given one (--model
    and --data), or the built-in study's finetuned model at --scale, trained in --out or reused."""
    from forgetbench.eval.bench import PathsDiffer, bench_evaluation
    from forgetbench.eval.runner import scored_length
    from forgetbench.eval.tofu_eval import tofu_eval_sets
    from forgetbench.io import atomic_write_json
    from forgetbench.modeling import load_model, resolve_template
    from forgetbench.report.console import print_rows
    from forgetbench.study.resolve import miniature

    _quiet_transformers()
    out = Path(args.out)
    if bool(args.model) != bool(args.data):
        raise _UsageError(
            "forgetbench bench eval: --model and --data go together",
            "pass both, or neither for the built-in study's finetuned model at --scale",
        )
    if args.model:
        model_dir, data = str(args.model), str(args.data)
    else:
        mini = miniature(config, out, progress=not args.json)
        model_dir, data = str(mini.model("full").model_dir), str(mini.data)
    sets = tofu_eval_sets(data, config.benchmark.split)
    model, tokenizer = load_model(
        model_dir, dtype=config.model.dtype, trust_remote_code=config.model.trust_remote_code
    )
    template = resolve_template(config.model.template, tokenizer, model_dir)
    report = bench_evaluation(
        model, tokenizer, template, sets,
        max_new_tokens=config.eval.max_new_tokens, batch_size=config.eval.batch_size,
        max_length=scored_length(model, config.eval, config.train.max_length),
    )  # fmt: skip
    report = {
        "model": model_dir,
        "data": data,
        "split": config.benchmark.split,
        "scale": None if args.model else config.scale,
        "forgetbench": __version__,
        **report,
    }
    saved = atomic_write_json(out / "bench_eval.json", report)
    if not args.json:
        rows = [
            {
                "path": name,
                "seconds": p["seconds"],
                "scoring s": p["scoring_seconds"],
                "generation s": p["generation_seconds"],
                "questions/s": p["questions_per_s"],
                "answer tokens/s": p["answer_tokens_per_s"],
                "model tokens": p["model_tokens"]["total"],
                "GFLOP/s": round(p["flop_per_s"] / 1e9, 2),
                "of peak": f"{report['fraction_of_peak'][name]:.1%}",
                "peak RSS MiB": p["peak_rss_mib"],
            }
            for name, p in report["paths"].items()
        ]
        print_rows(rows, title=f"TOFU evaluation, {report['questions']} questions: {model_dir}")
        print(
            f"matmul peak {report['matmul_peak_flop_per_s'] / 1e9:.0f} GFLOP/s; "
            f"speedup {report['speedup']}x (scoring {report['scoring_speedup']}x, "
            f"generation {report['generation_speedup']}x); max abs difference "
            f"{report['max_abs_diff']:.2e} at {report['max_abs_diff_at'] or '-'}; "
            f"identical: {str(report['identical']).lower()}; report: {saved}"
        )
    if not report["identical"]:
        raise PathsDiffer(
            f"fast and naive evaluation differ beyond {report['tolerance']:g} "
            f"({report['mismatch_count']} values; first {report['mismatches'][0]})",
            f"the fast path is wrong; the full report is in {saved}",
        )
    return report


def _data_stats(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.console import print_rows

    if args.benchmark not in BENCHMARKS:
        raise UnknownNameError("benchmark", args.benchmark, BENCHMARKS)
    path = Path(args.path)
    if args.benchmark == "lume":
        from forgetbench.data.lume import lume_stats

        rows = lume_stats(path)
    elif args.benchmark == "tofu":
        from forgetbench.data.tofu import tofu_stats

        rows = tofu_stats(path)
    else:
        from forgetbench.benchmarks.mini import mini_stats

        rows = mini_stats(path)
    if not args.json:
        print_rows(rows, title=f"{args.benchmark} data in {path}")
    return {"benchmark": args.benchmark, "path": str(path), "rows": rows}


def _data_generate(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.benchmarks.mini import generate_mini, get_scale

    get_scale(args.scale)  # an unknown scale fails before anything is built
    out = Path(args.out)
    existed = (out / "manifest.json").is_file()
    manifest = generate_mini(out, scale=args.scale, seed=args.seed)
    counts = {path: entry["records"] for path, entry in manifest["files"].items()}
    status = "unchanged" if existed else "written"
    if not args.json:
        verb = "already up to date" if existed else "wrote"
        print(
            f"{verb}: miniature benchmark (scale {args.scale}, seed {args.seed}) in {out}: "
            f"{len(counts)} files, {counts['tofu/full.json']} TOFU questions, "
            f"{counts['tofu/forget10.json']} in forget10"
        )
    return {"out": str(out), "status": status, **manifest}


def _compare(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.data.logs import read_eval_log
    from forgetbench.eval.summary import compare
    from forgetbench.report.console import print_comparison

    result = compare(
        read_eval_log(args.reference),
        read_eval_log(args.candidate),
        form=args.truth_ratio_form,
        allow_question_mismatch=args.allow_question_mismatch,
    )
    result = {"reference": str(args.reference), "candidate": str(args.candidate), **result}
    if not args.json:
        print_comparison(result)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
