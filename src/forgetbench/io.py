"""File helpers shared by every loader and writer: atomic writes and line-precise JSON reading."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

from forgetbench.errors import DataError, FilesystemError, ForgetbenchError


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write through a temp file in the same folder and rename, so a crash never leaves half a file
    and a finished result is only ever replaced by a complete one. An OSError (full disk,
    read-only file system, permission) becomes a FilesystemError naming `path`."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise FilesystemError.from_os_error(exc, path) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise FilesystemError.from_os_error(exc, path) from exc
        raise
    return path


def atomic_write_json(path: str | Path, obj: Any, *, indent: int | None = 2) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def require_writable_dir(path: str | Path, *, option: str = "--out") -> Path:
    """Refuse an output folder the command could not write, before any work: a regular file, a
    dangling symlink, a symlink loop, a folder (or, for a new folder, its nearest existing
    ancestor) where nothing can be created. Nothing is created or changed here apart from a probe
    folder made and removed at once: permission bits are not enough (root ignores them; procfs,
    read-only mounts and network file systems refuse anyway), so it asks the file system."""
    path = Path(path)
    label = f"{option} '{path}'"
    current = path

    def naming(part: Path) -> str:  # "--out 'a/b': 'a'" when the culprit is further up
        return label if part == path else f"{label}: '{part}'"

    while True:  # walk up to the nearest part of the path that exists
        try:
            info = os.stat(current)  # follows symlinks: a link to a folder is a folder
            break
        except FileNotFoundError:
            if current.is_symlink():
                raise FilesystemError(
                    f"{naming(current)} is a symlink to '{os.readlink(current)}', "
                    "which does not exist",
                    "create that folder, remove the link, or pass another folder",
                ) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise FilesystemError(
                    f"{naming(current)} is a symlink loop",
                    "fix or remove the link, or pass another folder",
                ) from None
            if exc.errno != errno.ENOTDIR:  # ENOTDIR: a file further up; reported below
                raise FilesystemError(
                    f"{naming(current)}: {(exc.strerror or str(exc)).lower()}",
                    "pass another folder",
                ) from None
        if current.parent == current:  # "." of a deleted working folder
            raise FilesystemError(f"{label}: '{current}' does not exist", "pass another folder")
        current = current.parent
    if not stat.S_ISDIR(info.st_mode):
        where = "is a file" if current == path else f"is inside '{current}', a file"
        raise FilesystemError(
            f"{label} {where}, not a folder",
            "pass a folder (a new one, or one holding earlier results)",
        )
    try:
        probe = tempfile.mkdtemp(prefix=".forgetbench-probe-", dir=current)
    except OSError as exc:
        # The folder exists (stat said so): ENOENT here is a file system that takes no new
        # entries (procfs), not a missing path.
        reason = {
            errno.EROFS: "read-only file system",
            errno.ENOENT: "the file system takes no new files here",
        }.get(exc.errno, (exc.strerror or str(exc)).lower())
        where = "" if current == path else f" (cannot create it in '{current}')"
        raise FilesystemError(
            f"{label} is not writable{where}: {reason}",
            "pass a folder you can write to",
        ) from None
    os.rmdir(probe)
    return path


def require_file(path: str | Path, *, what: str = "file") -> Path:
    path = Path(path)
    if not path.exists():
        raise DataError(f"{what} '{path}' does not exist", "check the path")
    if not path.is_file():
        raise DataError(f"{what} '{path}' is not a file", "pass a file, not a folder")
    return path


# Real files nest a few levels (TOFU rows, evaluation logs, results.json); anything deeper is
# damage or an attack, and would otherwise end in a RecursionError in `json` or in whatever
# walks the value later.
MAX_DEPTH = 100


def read_json(path: str | Path, *, what: str = "JSON file") -> Any:
    """One JSON document, with the line and column of any syntax error in the message."""
    path = require_file(path, what=what)
    text = read_text(path)
    if not text.strip():
        raise DataError(f"{path} is empty", f"expected a {what}")
    return parse_json(
        text, str(path), hint="the file is truncated or corrupt; re-download or regenerate it"
    )


def parse_json(text: str, where: str, *, hint: str | None = None) -> Any:
    """`json.loads` whose every failure is a DataError naming `where` (a file, or "file line N"):
    syntax errors with their line and column, nesting deeper than MAX_DEPTH, and numbers Python
    refuses to convert (an integer of more than 4300 digits)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{where} line {exc.lineno} column {exc.colno}: invalid JSON ({exc.msg})", hint
        ) from None
    except RecursionError:
        raise DataError(f"{where}: JSON nested more than {MAX_DEPTH} levels deep", hint) from None
    except ValueError as exc:  # int('1' * 5000): "Exceeds the limit (4300 digits) ..."
        raise DataError(f"{where}: invalid JSON ({_first_line(exc)})", hint) from None
    check_depth(value, where, hint=hint)
    return value


def check_depth(
    value: Any,
    where: str,
    *,
    hint: str | None = None,
    max_nodes: int | None = None,
    error: type[ForgetbenchError] = DataError,
) -> None:
    """Refuse a value nested more than MAX_DEPTH levels (and, with `max_nodes`, one holding more
    values than that: YAML aliases can make a small file expand exponentially). Iterative, so
    the check itself cannot overflow the stack; a container shared by aliases counts once per
    place it appears."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise error(f"{where}: nested more than {MAX_DEPTH} levels deep", hint)
        seen += 1
        if max_nodes is not None and seen > max_nodes:
            raise error(f"{where}: holds more than {max_nodes} values", hint)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1) for v in item)


def read_json_records(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSON array file or a JSON Lines file (TOFU's hub files are JSONL named .json)."""
    path = require_file(path, what="data file")
    text = read_text(path)
    stripped = text.lstrip()
    if not stripped:
        raise DataError(f"{path} is empty", "expected JSON Lines or a JSON array of objects")
    if stripped.startswith("["):
        rows = read_json(path, what="JSON array of objects")
        for number, row in enumerate(rows):
            if not isinstance(row, dict):
                raise DataError(f"{path} item {number}: expected an object, got {_kind(row)}")
        return rows
    rows = []
    hint = "each line must be one complete JSON object; the file may be truncated"
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{path} line {lineno}: invalid JSON ({exc.msg} at column {exc.colno})", hint
            ) from None
        except RecursionError:
            raise DataError(
                f"{path} line {lineno}: JSON nested more than {MAX_DEPTH} levels deep", hint
            ) from None
        except ValueError as exc:
            raise DataError(
                f"{path} line {lineno}: invalid JSON ({_first_line(exc)})", hint
            ) from None
        if not isinstance(row, dict):
            raise DataError(f"{path} line {lineno}: expected a JSON object, got {_kind(row)}")
        check_depth(row, f"{path} line {lineno}", hint=hint)
        rows.append(row)
    return rows


def read_text(path: str | Path, *, error: type[ForgetbenchError] = DataError) -> str:
    """A UTF-8 text file (a byte-order mark is dropped); bytes that are not UTF-8 and a file the
    system will not read are `error`s naming the file (and the byte offset)."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(
            f"{path} is not UTF-8 text (byte {exc.start}: {exc.object[exc.start : exc.start + 1]!r})",
            "is it a binary file? save it as UTF-8",
        ) from None
    except OSError as exc:
        raise error(
            f"cannot read {path}: {(exc.strerror or str(exc)).lower()}", "check permissions"
        ) from None


def shorten(value: Any, width: int = 60) -> str:
    """`repr(value)` cut to `width` characters, for values quoted in error messages (a 10 MB field
    must not become a 10 MB error line)."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else type(exc).__name__


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string"}.get(
        type(value), type(value).__name__
    )


def set_aside(path: Path) -> Path:
    """Rename a damaged file or folder to `{name}.corrupt-<timestamp>`: never load it again, never
    delete a user's bytes. (A stage linked from the shared cache goes through
    `cache.set_aside_stage`, which sets the entry aside instead of the link.)"""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    path.rename(target)
    return target


def replace_symlink(link: Path, target: str | Path, *, tag: str = "link") -> None:
    """Point `link` at `target` atomically: a reader sees the old link or the new one, never
    none (a temp link beside it, then rename)."""
    tmp = link.with_name(f".{link.name}.{tag}-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        tmp.symlink_to(target, target_is_directory=True)
        os.replace(tmp, link)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def readable_alias(out: Path, name: str, target: Path) -> Path | None:
    """`out/name`, a relative symlink to `target` (a model folder under a hashed stage name), so a
    user can write `runs/x/finetuned` instead of finding `runs/x/models/finetune-<key>/model`.
    Replaced atomically when it is a link already; a real file or folder of that name is the
    user's and is left alone (returns None)."""
    link = Path(out) / name
    if link.exists() and not link.is_symlink():
        return None
    try:
        # Through the run folder's own stage link (abspath, not resolve): the alias stays inside
        # the run folder, wherever the shared cache behind that link lives.
        replace_symlink(
            link, os.path.relpath(os.path.abspath(target), os.path.abspath(out)), tag="alias"
        )
    except OSError:
        return None  # a convenience: a file system without symlinks loses nothing else
    return link
