"""How a command line is read: argparse with its errors as one sentence, help text built only
when help is shown, a flag given twice refused, and KEY=VALUE overrides anywhere after the
command. The commands and their flags are cli/parser.py's."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any, NoReturn

import forgetbench.cli.config as config_cli
from forgetbench.cli.usage import UsageError


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
