"""The `forgetbench` command. Every failure the user can cause becomes one line on stderr:
`error: <what> — <what to do>` and a non-zero exit by class (docs/commands.md, "Errors and exit
codes"); with `--json` the last stdout line is always one JSON object (the result, or
`{"error": ...}`). `--debug` (or FORGETBENCH_DEBUG=1) lets the exception through instead,
traceback and all, for bug reports."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence

from forgetbench.cache import cache_root, require_usable_root
from forgetbench.cli.parser import build_parser
from forgetbench.cli.parsing import parse_args
from forgetbench.errors import ConfigError, FilesystemError, ForgetbenchError, os_error_in
from forgetbench.io import require_writable_dir

EXIT_BUG = 1  # an exception we did not expect: a bug in forgetbench
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Read before parsing, so a usage error still answers in JSON (and in debug mode).
    as_json = "--json" in argv
    debug = "--debug" in argv or _debug_from_env()
    args = None
    try:
        args = parse_args(build_parser(), argv)
        if not getattr(args, "handler", None):
            build_parser().print_help()
            return 2
        _check_cache_setting()
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
        error = as_error(exc, args)
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


def as_error(exc: Exception, args: argparse.Namespace | None) -> ForgetbenchError:
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


def _check_cache_setting() -> None:
    """A FORGETBENCH_CACHE that cannot be the cache (a regular file) is refused by every command
    before any work, as docs/cache.md says, whether or not this command reaches the cache."""
    root = cache_root()
    if root is not None:
        require_usable_root(root)


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
