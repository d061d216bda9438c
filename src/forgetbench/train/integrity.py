"""Integrity of what training leaves on disk: a cached stage and a resume checkpoint each record
the size and sha256 of every file they wrote, hashed once when written and checked once before
reuse. A damaged copy is never loaded and never deleted: it is renamed aside under a
`.corrupt-<timestamp>` name, one line on stderr says so, and the work is redone.

A stage's file list lives in its record (`stage.json` / `unlearn.json`, key `files`), which is
written atomically after the files, so the record covers the files and JSON parsing covers the
record. A checkpoint keeps its own `manifest.json`, written last inside the temp folder before
the rename that publishes it.
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
from pathlib import Path
from typing import Any

from forgetbench.cache import set_aside_stage

FILES_KEY = "files"
MANIFEST = "manifest.json"


def file_manifest(folder: Path, *, skip: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """{relative path: {"size", "sha256"}} of every file under `folder`, except paths that start
    with an entry of `skip` (the record itself, a resume checkpoint the record supersedes)."""
    manifest = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_file() and not relative.startswith(skip):
            manifest[relative] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
    return manifest


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_problem(folder: Path, manifest: Any) -> str | None:
    """What is wrong with the files `manifest` lists under `folder`, or None when all match.
    Sizes are compared first, so a truncated or missing file costs no hashing."""
    if not isinstance(manifest, dict) or not manifest:
        return f"{FILES_KEY} list is malformed"
    entries = []
    for relative, expected in manifest.items():
        if not isinstance(expected, dict) or not {"size", "sha256"} <= expected.keys():
            return f"{FILES_KEY} entry {relative!r} is malformed"
        entries.append((relative, expected))
    for relative, expected in entries:
        path = folder / relative
        if not path.is_file():
            return f"{relative}: missing"
        if path.stat().st_size != expected["size"]:
            return f"{relative}: size mismatch ({path.stat().st_size} bytes, expected {expected['size']})"
    for relative, expected in entries:
        if sha256_file(folder / relative) != expected["sha256"]:
            return f"{relative}: sha256 mismatch"
    return None


def read_record(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(record, None) for a readable JSON object, else (None, what is wrong with it)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, f"{path.name}: unreadable ({exc.strerror or exc})"
    try:
        record = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, f"{path.name}: not UTF-8 text (byte {exc.start})"
    except json.JSONDecodeError as exc:
        return None, f"{path.name}: invalid JSON, truncated? ({exc.msg}, line {exc.lineno})"
    if not isinstance(record, dict):
        return None, f"{path.name}: not a JSON object"
    return record, None


def stage_problem(
    folder: Path, record: dict[str, Any], *, required: tuple[str, ...] = ()
) -> str | None:
    """What is wrong with a finished stage whose record parsed, or None.

    A record without a file list is a legacy cache (written before checksums existed): it is
    kept when the files it needs are present and every safetensors file is as long as its own
    header says, which catches truncation and deletion but not a flipped byte. It is not
    rewritten; a recomputed stage gets checksums."""
    for key in required:
        if key not in record:
            return f"{folder.name}'s record has no {key!r}"
    if FILES_KEY in record:
        return manifest_problem(folder, record[FILES_KEY])
    for relative in ("model/config.json", "model/model.safetensors"):
        if not (folder / relative).is_file():
            return f"{relative}: missing"
    for path in sorted(folder.rglob("*.safetensors")):
        problem = safetensors_length_problem(path)
        if problem:
            return f"{path.relative_to(folder).as_posix()}: {problem}"
    return None


def safetensors_length_problem(path: Path) -> str | None:
    """A safetensors file starts with an 8-byte header length and a JSON header whose offsets
    give the data length: compare with the file size without reading the tensors."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            (header_len,) = struct.unpack("<Q", handle.read(8))
            if header_len > size:
                return "truncated (header longer than the file)"
            header = json.loads(handle.read(header_len))
        end = max(
            (v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0
        )
    except (OSError, struct.error, ValueError, KeyError, TypeError, IndexError):
        return "unreadable header"
    if 8 + header_len + end != size:
        return f"size mismatch ({size} bytes, header says {8 + header_len + end})"
    return None


def note(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def reuse_finished(
    folder: Path, record_name: str, *, required: tuple[str, ...] = ()
) -> dict[str, Any] | None:
    """The record of a finished, undamaged cached stage in `folder`, or None: not finished (no
    record; a checkpoint in `work/` may resume it), or damaged — then the folder is set aside with
    one line on stderr and the caller recomputes the stage into a fresh `folder`."""
    path = folder / record_name
    if not path.is_file():
        return None
    record, problem = read_record(path)
    if record is not None:
        problem = stage_problem(folder, record, required=required)
    if problem is None:
        return record
    aside = set_aside_stage(folder)
    note(f"cached stage {folder} is damaged ({problem}); set aside as {aside.name} and recomputed")
    return None
