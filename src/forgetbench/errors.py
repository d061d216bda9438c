"""One error hierarchy. Every message says what went wrong and what to do about it.

The CLI prints `error: <what> — <what to do>` and exits non-zero; nothing here ever needs a
traceback to be understood.
"""

from __future__ import annotations

import difflib
import errno
import os
import re
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


class ModelError(DataError):
    """A model that cannot be used: a Hub id that is not there, a folder without config.json or a
    tokenizer, truncated weights, code it needs but may not run, or non-finite outputs."""


class ConfigError(ForgetbenchError):
    """A config file, override or option has an unknown key or an out-of-range value."""


class PluginError(ConfigError):
    """A method plugin's own code failed while it ran (its loss raised, or returned something
    other than the method contract's): the sentence names its file, method and step; the
    plugin's traceback is this error's cause (`--debug` shows it)."""

    def __init__(self, head: str, detail: str, hint: str | None = None, *, at: str = "") -> None:
        self.head, self.detail, self.at_where = head, detail, at
        super().__init__(f"{head}, {at}: {detail}" if at else f"{head} {detail}", hint)

    def at(self, where: str) -> PluginError:
        """The same error, said to have happened at `where` (a training step)."""
        return PluginError(self.head, self.detail, self.hint, at=where)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_plugin_error, (self.head, self.detail, self.hint, self.at_where))


def _plugin_error(head: str, detail: str, hint: str | None, at: str) -> PluginError:
    return PluginError(head, detail, hint, at=at)


class UnknownNameError(ConfigError):
    """A name (split, method, scale, benchmark, ...) is not one we know."""

    def __init__(self, kind: str, name: str, known: Iterable[str]) -> None:
        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        what = f"unknown {kind} '{name}'"
        if close:
            what += f"; did you mean '{close[0]}'?"
        super().__init__(what, f"known: {', '.join(known)}")


class FilesystemError(ForgetbenchError):
    """The operating system refused a file operation: an unusable output folder, a full disk, a
    read-only file system, a permission, a symlink loop. Exit code 4, apart from bad input (2)."""

    exit_code = 4

    @classmethod
    def from_os_error(cls, exc: OSError, path: object = None) -> FilesystemError:
        """One line for an OSError. Writers pass the `path` they were writing (a failed write()
        on an open file, ENOSPC, names none); otherwise the path the OSError carries is named."""
        lines = (exc.strerror or str(exc)).strip().splitlines()
        reason = lines[0][:300] if lines else type(exc).__name__
        reason = reason[:1].lower() + reason[1:]
        if path is not None:
            what = f"cannot write '{path}': {reason}"
        elif exc.filename is not None:
            what = f"'{exc.filename}': {reason}"
            if exc.filename2 is not None:
                what += f" (and '{exc.filename2}')"
        else:
            what = reason
        return cls(what, _OS_HINTS.get(exc.errno, "check the path, its permissions and the disk"))


_OS_HINTS = {
    errno.ENOSPC: "free space on that disk, or pass an --out folder on another one",
    errno.EDQUOT: "free space (disk quota exceeded), or pass an --out folder on another disk",
    errno.EACCES: "check its permissions, or pass an --out folder you can write to",
    errno.EPERM: "check its permissions, or pass an --out folder you can write to",
    errno.EROFS: "that file system is read-only; pass an --out folder on a writable one",
    errno.ENOTDIR: "a part of the path is a file, not a folder; pass another path",
    errno.ELOOP: "a symlink in the path loops back on itself; fix or remove it",
    errno.ENOENT: "check the path",
    errno.EISDIR: "it is a folder; remove it or pass another path",
    errno.ENAMETOOLONG: "use a shorter path",
    errno.EMFILE: "too many open files; raise the limit (ulimit -n) and re-run",
}


_OS_ERROR_IN_TEXT = re.compile(r"\(os error (\d+)\)")


def os_error_in(exc: BaseException) -> OSError | None:
    """The OSError inside a library's own exception: Rust-backed libraries (safetensors writing a
    model or checkpoint, tokenizers) report a full disk as e.g. `SafetensorError: Error while
    serializing: I/O error: No space left on device (os error 28)`."""
    if isinstance(exc, OSError):
        return exc
    match = _OS_ERROR_IN_TEXT.search(str(exc))
    if match is None:
        return None
    code = int(match.group(1))
    return OSError(code, os.strerror(code))


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """A ' (did you mean X?)' suffix, or '' when nothing is close."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
