"""What every command module shares: the usage error and the progress switch."""

from __future__ import annotations

import argparse

from forgetbench.errors import ForgetbenchError


class UsageError(ForgetbenchError):
    """The command line asks for something the command cannot do as written."""


def progress(args: argparse.Namespace) -> bool:
    """Progress bars and lines, unless the output is JSON or --no-progress is given."""
    return not (args.json or args.no_progress)
