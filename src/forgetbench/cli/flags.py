"""The options several commands share: a command's config flags, generated from the typed config
(forgetbench.options) with --config and KEY=VALUE overrides; --debug; --strict; and the
registered methods listed under --help."""

from __future__ import annotations

import argparse
import functools
import shutil
import textwrap

from forgetbench.options.arguments import flag_help, flag_metavar, flag_type
from forgetbench.options.flags import FLAGS
from forgetbench.options.unused import UNUSED, unused_reason


def _strict_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a validity gate fails (the finetuned model is not told apart from the "
        "retain model, never learnt the forget set, or has zero utility); the results are "
        "written either way",
    )


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
