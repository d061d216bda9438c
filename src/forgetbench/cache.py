"""The cache every output folder shares (`FORGETBENCH_CACHE`, default `~/.cache/forgetbench`, as
Hugging Face keeps `~/.cache/huggingface`): deterministic stages (the miniature's data, its
tokenizer, pretrained, finetuned and retain models, unlearning runs, evaluations) live there once,
under names that carry their inputs' key, and an output folder holds links to them.

A second study in a new folder therefore trains and evaluates nothing it has done before. Two
runs filling the same entry take turns on the entry's lock: the second finds it finished and
reuses it. `FORGETBENCH_CACHE=off` keeps every stage inside its output folder, as before the cache.

The cache only ever deletes what it can prove it made: every entry carries a marker file naming
its kind and name, written when the entry is made; `clear` removes marked entries only, never
follows a symlink, and refuses a folder that holds anything else (a user can point
`FORGETBENCH_CACHE` at a folder that is not ours, such as their home).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from forgetbench import __version__
from forgetbench.errors import FilesystemError
from forgetbench.io import atomic_write_text, replace_symlink, set_aside

CACHE_ENV = "FORGETBENCH_CACHE"
OFF = ("", "0", "off", "none", "false")
LOCK_SUFFIX = ".lock"
KINDS = ("data", "models", "unlearn", "evaluations")
MARKER = ".forgetbench-entry.json"
MARKER_FORMAT = 1
# The Cache Directory Tagging convention (bford.info/cachedir): backup tools skip a folder holding
# it. Written only into a root the cache created itself, never into a folder the user already had.
TAG = "CACHEDIR.TAG"
TAG_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This folder is forgetbench's shared cache (FORGETBENCH_CACHE); `forgetbench cache clear`\n"
    "# empties it. See https://bford.info/cachedir/\n"
)


_suspended: ContextVar[bool] = ContextVar("forgetbench_cache_suspended", default=False)


@contextmanager
def suspended() -> Iterator[None]:
    """Stages made inside stay in their own folders: scratch work (models deleted right after)
    must not fill the cache."""
    token = _suspended.set(True)
    try:
        yield
    finally:
        _suspended.reset(token)


def cache_root() -> Path | None:
    """The shared cache's folder, or None when `FORGETBENCH_CACHE` turns it off (or inside
    `suspended`)."""
    if _suspended.get():
        return None
    value = os.environ.get(CACHE_ENV)
    if value is None:
        home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        return Path(home) / "forgetbench"
    if value.strip().lower() in OFF:
        return None
    return Path(value).expanduser()


def require_usable_root(root: Path) -> Path:
    """Refuse a cache root that exists but is not a folder, before any stage relies on it."""
    if root.exists() and not root.is_dir():
        raise FilesystemError(
            f"{CACHE_ENV} '{root}' is a file, not a folder",
            f"point {CACHE_ENV} at a folder (it is made if missing), or set it to 'off'",
        )
    return root


def _distributed() -> bool:
    # Under `accelerate launch` every process enters the same stage and they wait for one another
    # at barriers: a lock only one of them could hold would deadlock them.
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


@contextmanager
def shared_entry(folder: Path, *, kind: str, name: str) -> Iterator[Path]:
    """Use `folder` (inside an output folder) as a link to the cache's `kind/name`, holding that
    entry's lock while the caller reuses or fills it. Yields `folder`.

    Without a cache, or when `folder` is already a real folder (made before the cache, or with it
    off), the stage stays where it is."""
    if kind not in KINDS:
        raise ValueError(f"cache kind {kind!r} is not one of {KINDS}")
    root = cache_root()
    if root is None or (folder.exists() and not folder.is_symlink()):
        yield folder
        return
    require_usable_root(root)
    _make_root(root)
    entry = root / kind / name
    entry.parent.mkdir(parents=True, exist_ok=True)
    with _locked(entry.with_name(name + LOCK_SUFFIX)):
        entry.mkdir(exist_ok=True)
        # An entry made by a forgetbench from before markers is adopted the first time a run
        # asks for it by its key-carrying name: only forgetbench computes such names.
        if _marker(entry) is None:
            _write_marker(entry, kind, name)
        _link(folder, entry)
        yield folder


def _make_root(root: Path) -> None:
    if root.is_dir():
        return
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_text(root / TAG, TAG_TEXT)


def _write_marker(entry: Path, kind: str, name: str) -> None:

    marker = {"format": MARKER_FORMAT, "kind": kind, "name": name, "forgetbench": __version__}
    atomic_write_text(entry / MARKER, json.dumps(marker) + "\n")


def _marker(entry: Path) -> dict[str, object] | None:
    """The entry's marker when it is a real folder holding a well-formed marker that names it."""
    if entry.is_symlink() or not entry.is_dir():
        return None
    marker_file = entry / MARKER
    if marker_file.is_symlink() or not marker_file.is_file():
        return None
    try:
        marker = json.loads(marker_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict):
        return None
    name = marker.get("name")
    if marker.get("kind") != entry.parent.name or not isinstance(name, str):
        return None
    if entry.name != name and not entry.name.startswith(name + CORRUPT):
        return None  # copied or renamed by hand: not provably the entry this name holds
    return marker


CORRUPT = ".corrupt-"  # io.set_aside's suffix: a damaged entry kept for the user to look at


def set_aside_stage(folder: Path) -> Path:
    """Set a damaged stage aside (`io.set_aside`). A stage linked from the shared cache: the
    damaged bytes are the entry's, so the entry is renamed aside there (keeping its marker, so
    `clear` may remove it) and the link points at a fresh, marked, empty entry."""
    if not folder.is_symlink():
        return set_aside(folder)
    entry = folder.resolve()
    aside = set_aside(entry)
    entry.mkdir()
    if _marker(aside) is not None:
        _write_marker(entry, entry.parent.name, entry.name)
    return aside


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    if _distributed():
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _link(folder: Path, entry: Path) -> None:
    if folder.is_symlink() and folder.resolve() == entry.resolve():
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    replace_symlink(folder, entry.resolve())


def survey(root: Path) -> tuple[list[Path], list[Path]]:
    """(marked entries, everything else) in the cache folder, without following any symlink.

    What may sit in a cache besides marked entries: the tag file at the root, the kind folders,
    and each entry's lock file beside it. Anything else is not ours and is listed as foreign."""
    marked: list[Path] = []
    foreign: list[Path] = []
    if not root.is_dir():
        return marked, foreign
    for item in sorted(root.iterdir()):
        if item.name == TAG and item.is_file() and not item.is_symlink():
            continue
        if item.name not in KINDS or item.is_symlink() or not item.is_dir():
            foreign.append(item)
            continue
        for child in sorted(item.iterdir()):
            if child.name.endswith(LOCK_SUFFIX) and child.is_file() and not child.is_symlink():
                continue
            (marked if _marker(child) is not None else foreign).append(child)
    return marked, foreign


def entries(root: Path) -> list[dict[str, object]]:
    """Every marked cache entry: kind, name, size in bytes, whether a run holds it now."""
    return [
        {"kind": e.parent.name, "name": e.name, "bytes": _size(e), "in_use": _busy(e)}
        for e in survey(root)[0]
    ]


def _size(entry: Path) -> int:
    total = 0
    for folder, _, files in os.walk(entry):  # os.walk does not descend into symlinked folders
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                total += os.stat(path).st_size
    return total


def _busy(entry: Path) -> bool:
    if not entry.with_name(entry.name + LOCK_SUFFIX).exists():
        return False  # never filled under a lock (a set-aside copy): nothing to ask, nothing made
    with _unless_held(entry) as free:
        return not free


@contextmanager
def _unless_held(entry: Path) -> Iterator[bool]:
    """Take the entry's lock without waiting: True (and held until exit) when no run holds it."""
    lock = entry.with_name(entry.name + LOCK_SUFFIX)
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def _clearing(entry: Path) -> Iterator[None]:
    """The operating system's refusal to lock or remove an entry (a read-only or another user's
    cache), said as the cache's own problem: no output folder is involved."""
    try:
        yield
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise FilesystemError(
            f"cannot clear cache entry '{entry}': {reason}",
            f"clear it as a user who can write to {entry.parent.parent}, or point {CACHE_ENV} "
            "at another folder",
        ) from exc


def refuse_foreign(root: Path, foreign: list[Path]) -> None:
    """Stop before deleting anything when the cache folder holds what forgetbench did not make."""
    if not foreign:
        return
    shown = ", ".join(f"'{p}'" for p in foreign[:3])
    more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
    raise FilesystemError(
        f"{CACHE_ENV} '{root}' holds {len(foreign)} item(s) forgetbench did not make "
        f"({shown}{more}); nothing was removed",
        f"point {CACHE_ENV} at a folder of its own, or move those items out of it",
    )


def clear(root: Path) -> tuple[list[str], int, list[str]]:
    """Delete every marked entry no run is using: (entries removed as 'kind/name', bytes freed,
    entries kept in use). Refuses, removing nothing, when the folder holds anything unmarked.
    Output folders that linked to a removed entry recompute it on their next run."""
    require_usable_root(root)
    marked, foreign = survey(root)
    refuse_foreign(root, foreign)
    removed: list[str] = []
    freed = 0
    kept = []
    for entry in marked:
        label = f"{entry.parent.name}/{entry.name}"
        with _clearing(entry), _unless_held(entry) as free:
            if not free:
                kept.append(label)
                continue
            if _marker(entry) is None:  # changed since the survey: leave it
                continue
            size = _size(entry)
            try:
                shutil.rmtree(entry)
                entry.with_name(entry.name + LOCK_SUFFIX).unlink(missing_ok=True)
            except OSError as exc:
                raise FilesystemError(
                    f"cannot remove cache entry '{entry}': {exc.strerror or exc}",
                    "check its permissions and run 'forgetbench cache clear' again",
                ) from exc
        removed.append(label)
        freed += size
    return removed, freed, kept
