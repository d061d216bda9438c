"""The parser of every command: the command tree, each command's own options and its handler,
which lives in the module of its group (train, evaluate, study, bench, data, cache, compare,
config). The options several commands share are cli/flags.py's (their flags generated from the
typed config, forgetbench.options); how a command line is read, cli/parsing.py's."""

from __future__ import annotations

import argparse
import typing
from collections.abc import Callable
from typing import Any

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
from forgetbench.cli.flags import _config_options, _debug_option, _list_methods, _strict_option
from forgetbench.cli.parsing import _Parser
from forgetbench.config_names import SCALES
from forgetbench.config_sections import EvalConfig

Handler = Callable[[argparse.Namespace], dict[str, Any]]


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
    bench.add_argument(
        "--profile",
        choices=("auto", "on", "off"),
        default="auto",
        help="train with a given model, eval with --model: profile a few steady steps with "
        "torch.profiler into the report (auto: on a GPU; on: the CPU profile too)",
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
