"""One error hierarchy. Every message says what went wrong and what to do about it.

The CLI prints `error: <what> — <what to do>` and exits non-zero; nothing here ever needs a
traceback to be understood.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ForgetbenchError(Exception):
    """Base class: `what` names the culprit (file, field, option), `hint` says what to do."""

    exit_code = 2

    def __init__(self, what: str, hint: str | None = None) -> None:
        self.what = what
        self.hint = hint
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return f"{self.what} — {self.hint}" if self.hint else self.what

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # Errors cross process boundaries (the study's worker processes); subclasses with other
        # __init__ signatures would not unpickle from `args`.
        return (_restore, (type(self), self.what, self.hint))


def _restore(cls: type[ForgetbenchError], what: str, hint: str | None) -> ForgetbenchError:
    error = Exception.__new__(cls)
    ForgetbenchError.__init__(error, what, hint)
    return error


class DataError(ForgetbenchError):
    """A dataset or log file is missing, unreadable or has the wrong shape."""


class ConfigError(ForgetbenchError):
    """A config file, override or option has an unknown key or an out-of-range value."""


class UnknownNameError(ConfigError):
    """A name (split, method, scale, benchmark, ...) is not one we know."""

    def __init__(self, kind: str, name: str, known: Iterable[str]) -> None:
        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        what = f"unknown {kind} '{name}'"
        if close:
            what += f"; did you mean '{close[0]}'?"
        super().__init__(what, f"known: {', '.join(known)}")


class NotImplementedYet(ForgetbenchError):
    """A subcommand exists in the CLI but its pipeline has not been built."""

    exit_code = 3


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """A ' (did you mean X?)' suffix, or '' when nothing is close."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
