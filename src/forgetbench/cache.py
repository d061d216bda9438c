"""The cache every output folder shares (`FORGETBENCH_CACHE`, default `~/.cache/forgetbench`, as
Hugging Face keeps `~/.cache/huggingface`): deterministic stages (the miniature's data, its
tokenizer, pretrained, finetuned and retain models, unlearning runs, evaluations) live there once,
under names that carry their inputs' key, and an output folder holds links to them.

A second study in a new folder therefore trains and evaluates nothing it has done before. Two
runs filling the same entry take turns on the entry's lock: the second finds it finished and
reuses it. `FORGETBENCH_CACHE=off` keeps every stage inside its output folder, as before the cache.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

CACHE_ENV = "FORGETBENCH_CACHE"
OFF = ("", "0", "off", "none", "false")
LOCK_SUFFIX = ".lock"


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
    root = cache_root()
    if root is None or (folder.exists() and not folder.is_symlink()):
        yield folder
        return
    entry = root / kind / name
    entry.parent.mkdir(parents=True, exist_ok=True)
    with _locked(entry.with_name(name + LOCK_SUFFIX)):
        entry.mkdir(exist_ok=True)
        _link(folder, entry)
        yield folder


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
    tmp = folder.with_name(f".{folder.name}.link-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(entry.resolve(), target_is_directory=True)
    os.replace(tmp, folder)  # atomic: the link is either the old one or the new one


def entries(root: Path) -> list[dict[str, object]]:
    """Every cache entry: kind, name, size in bytes, whether a run holds it now."""
    found = []
    for kind in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        for entry in sorted(p for p in kind.iterdir() if p.is_dir()):
            size = sum(f.stat().st_size for f in entry.rglob("*") if f.is_file())
            found.append(
                {"kind": kind.name, "name": entry.name, "bytes": size, "in_use": _busy(entry)}
            )
    return found


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


def clear(root: Path) -> tuple[int, int, list[str]]:
    """Delete every entry no run is using: (entries removed, bytes freed, entries kept in use).
    Output folders that linked to a removed entry recompute it on their next run."""
    removed = freed = 0
    kept = []
    for item in entries(root):
        entry = root / str(item["kind"]) / str(item["name"])
        with _unless_held(entry) as free:
            if not free:
                kept.append(f"{item['kind']}/{item['name']}")
                continue
            shutil.rmtree(entry)
            entry.with_name(entry.name + LOCK_SUFFIX).unlink(missing_ok=True)
        removed += 1
        freed += int(item["bytes"])  # type: ignore[call-overload]
    return removed, freed, kept
