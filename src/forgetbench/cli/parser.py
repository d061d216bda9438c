"""The parser of every command, its flags generated from the typed config (forgetbench.options):
each command's handler lives in the module of its group (train, evaluate, study, bench, data,
cache, compare, config)."""

from __future__ import annotations

import argparse
import functools
import re
import shutil
import textwrap
import typing
from collections.abc import Callable
from typing import Any, NoReturn

# Each command group's handlers, by module: a test can replace a handler in its module.
import forgetbench.cli.bench as bench_cli
import forgetbench.cli.cache as cache_cli
import forgetbench.cli.compare as compare_cli
import forgetbench.cli.config as config_cli
import forgetbench.cli.data as data_cli
import forgetbench.cli.evaluate as evaluate_cli
import forgetbench.cli.study as study_cli
import forgetbench.cli.train as train_cli
from forgetbench import __version__
from forgetbench.cli.usage import UsageError
from forgetbench.config import SCALES, EvalConfig
from forgetbench.options import FLAGS, UNUSED, flag_help, flag_metavar, flag_type, unused_reason

Handler = Callable[[argparse.Namespace], dict[str, Any]]


class _Parser(argparse.ArgumentParser):
    """argparse prints usage plus a message over several lines; we want one sentence. Help text
    that needs heavy imports (the method registry, the miniature's recipe) is given as a callable
    (`lazy_help` on an option, `lazy_epilog` on the parser) and built only when help is shown."""

    lazy_epilog: Callable[[], str] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}", f"see '{self.prog} --help'")

    def format_help(self) -> str:
        for action in self._actions:
            lazy = getattr(action, "lazy_help", None)
            if lazy is not None:
                action.help = lazy()
        if self.lazy_epilog is not None:
            self.epilog = self.lazy_epilog()
        return super().format_help()


class _StoreOnce(argparse._StoreAction):
    """A flag given twice (`--out A --out B`) is refused, as one KEY=VALUE given twice is
    (cli/config.py's `refuse_twice_set`): argparse would keep the last, silently."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        if option_string is not None:
            given = namespace.__dict__.setdefault("_flags_given", {})
            if self.dest in given:
                first = given[self.dest]
                both = option_string if first == option_string else f"{first} and {option_string}"
                raise UsageError(
                    f"{parser.prog} got {both}{' twice' if first == option_string else ''}, "
                    "two values for one setting",
                    "give it once",
                )
            given[self.dest] = option_string
        super().__call__(parser, namespace, values, option_string)


def parse_args(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    # argparse takes a positional list only once, so `run a=1 --splits forget10 b=2` would
    # reject `b=2`; KEY=VALUE overrides may go anywhere after the command.
    if {"-h", "--help"} & set(argv):
        # Before argparse prints the help: it lists the methods the plugins register.
        config_cli.load_help_plugins(argv)
    args, extra = parser.parse_known_args(argv)
    overrides = [a for a in extra if _OVERRIDE.match(a)]
    if overrides and hasattr(args, "overrides"):
        args.overrides = [*args.overrides, *overrides]
        extra = [a for a in extra if a not in overrides]
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


_OVERRIDE = re.compile(r"^[A-Za-z_][\w.]*=")


def _strict_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a validity gate fails (the finetuned model is not told apart from the "
        "retain model, never learnt the forget set, or has zero utility); the results are "
        "written either way",
    )


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

    data = command(
        "data", data_cli.without_action, "write the built-in miniature benchmark, or inspect data"
    )
    data_commands = data.add_subparsers(
        title="data commands", metavar="ACTION", parser_class=_Parser
    )
    stats = data_commands.add_parser("stats", help="count records per split/task/kind")
    stats.add_argument("--json", action="store_true")
    _debug_option(stats)
    stats.add_argument("--benchmark", required=True, help="|".join(data_cli.STATS_BENCHMARKS))
    stats.add_argument("--path", required=True, help="the benchmark's data folder")
    stats.set_defaults(handler=data_cli.stats)
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
    generate.set_defaults(handler=data_cli.generate, output=("out", "--out"))

    cache = command(
        "cache",
        cache_cli.without_action,
        "the stages every output folder shares (FORGETBENCH_CACHE)",
    )
    cache_commands = cache.add_subparsers(
        title="cache commands", metavar="ACTION", parser_class=_Parser
    )
    for action, handler, help_text in (
        ("list", cache_cli.list_entries, "every cached stage with its size"),
        ("clear", cache_cli.clear_entries, "delete every cached stage no run is using"),
    ):
        sub = cache_commands.add_parser(action, help=help_text, description=help_text)
        sub.add_argument("--json", action="store_true")
        _debug_option(sub)
        sub.set_defaults(handler=handler)

    compare = command(
        "compare",
        compare_cli.compare,
        "TOFU scores of a candidate log against a retain model's log; MUSE or WMDP scores of "
        "several results files side by side",
    )
    compare.add_argument(
        "--benchmark",
        choices=compare_cli.BENCHMARKS,
        default="tofu",
        help="tofu: --reference and --candidate logs; muse, wmdp: the --results files "
        "(default: tofu)",
    )
    compare.add_argument(
        "--reference",
        help="retain model's eval log (TOFU layout or open-unlearning's TOFU_EVAL.json; file or "
        "folder); its questions must be among the candidate's (required for tofu)",
    )
    compare.add_argument(
        "--candidate", help="evaluated model's eval log (file or folder; required for tofu)"
    )
    compare.add_argument(
        "--results",
        nargs="+",
        metavar="PATH",
        help="muse, wmdp: forgetbench results.json files (or their folders) and open-unlearning's "
        "MUSE_EVAL.json, MUSE_SUMMARY.json or LMEval_SUMMARY.json, shown side by side",
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

    show = command(
        "config", config_cli.show, "print the resolved run config (defaults + file + overrides)"
    )
    _config_options(show, "config")
    show.add_argument(
        "--schema", action="store_true", help="print the YAML config's JSON schema instead"
    )

    finetune = command(
        "finetune",
        train_cli.finetune,
        "finetune a model on a TOFU-layout split (full -> finetuned, retainNN -> retain model)",
        writes=True,
    )
    _config_options(finetune, "finetune")
    finetune.add_argument("--no-progress", action="store_true", help="no progress bar")

    unlearn = command(
        "unlearn", train_cli.unlearn, "run an unlearning method on a forget split", writes=True
    )
    _config_options(unlearn, "unlearn")
    _list_methods(unlearn)
    unlearn.add_argument("--no-progress", action="store_true", help="no progress bar")

    evaluate = command(
        "eval",
        evaluate_cli.evaluate,
        "every metric of one model: per-question logs (TOFU layout) + summary",
        writes=True,
    )
    _config_options(evaluate, "eval")
    evaluate.add_argument("--retain-log", help="a retain model's eval log, for forget quality")
    evaluate.add_argument("--no-progress", action="store_true", help="no line per task on stderr")

    sanity = command(
        "sanity",
        evaluate_cli.sanity,
        "TOFU appendix E sanity checks of the KS test on the miniature study",
        writes=True,
    )
    _config_options(sanity, "sanity")
    sanity.add_argument("--no-progress", action="store_true", help="no progress bars")
    run = command(
        "run", study_cli.run, "the whole study: data, models, methods, metrics, report", writes=True
    )
    _config_options(run, "run")
    run.add_argument(
        "--retain-log",
        metavar="DIR",
        help="with --model: your retain model's evaluation ('forgetbench eval --out DIR'), for "
        "the scores relative to it (forget quality, PrivLeak) and its row; the study's one "
        "forget split (several: study.retain_logs={SPLIT: DIR})",
    )
    _list_methods(run)
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    _strict_option(run)
    attack = command(
        "attack",
        study_cli.attack,
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
        study_cli.sweep,
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
    _strict_option(sweep)

    meta = command(
        "meta-eval",
        study_cli.meta_eval,
        "which metrics can be trusted: faithfulness of each forget-set metric on pools of "
        "miniature models that saw or never saw the forget set",
        writes=True,
    )
    _config_options(meta, "meta-eval")
    meta.add_argument("--no-progress", action="store_true", help="no progress bars")
    bench = command(
        "bench", bench_cli.bench, "speed benchmarks (times and peak memory; not tests)", writes=True
    )
    bench.add_argument(
        "target",
        help="what to time: train (pretrain + finetune + retain90; with --model or "
        "model.size: tokens/s against HF's Trainer) | "
        "eval (TOFU evaluation, fast path vs a naive reference; checks both agree) | "
        "study (forgetbench run, cold: per stage, per job, training/scoring/generation shares)",
    )
    bench.add_argument(
        "--steps",
        type=int,
        default=0,
        metavar="N",
        help="train with --model or model.size: time N optimizer steps of the full split "
        "(0 = all of it), forgetbench's loop against HF's Trainer",
    )
    _config_options(bench, "bench")

    report = command("report", study_cli.report, "rebuild the HTML report from a results folder")
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
        from forgetbench.methods.base import get_method, method_names, method_summary
        from forgetbench.methods.plugins import plugin_file

        names = method_names()
        width = max(len(name) for name in names) + 4
        columns = min(100, shutil.get_terminal_size().columns) - 2
        lines = ["methods (options as method.<option>=VALUE; docs/methods.md):"]
        for name in names:
            origin = plugin_file(get_method(name))
            lines += textwrap.wrap(
                method_summary(name) + (f" (plugin: {origin})" if origin else ""),
                width=columns,
                initial_indent=f"  {name:<{width - 2}}",
                subsequent_indent=" " * width,
                break_on_hyphens=False,
                break_long_words=False,  # a plugin's path stays whole, to copy
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
            action="append" if flag.repeat else "store",
            type=flag_type(flag, command),
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
