"""What the MUSE and WMDP loaders share: where a file of a released layout is in a local folder,
Hub-or-folder resolution, and the survey of a whole folder that names every missing or
malformed file in one sentence (`forgetbench data stats`)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgetbench.errors import DataError
from forgetbench.io import read_json, shorten


@dataclass(frozen=True)
class LayoutFile:
    """One file of a released layout. `candidates` are the names it may have (relative to the
    folder; a glob such as `wmdp-bio/*.parquet` for the Hub's files), the first one found wins.
    Files of one `group` come together: where any of them is there, the others are expected;
    a `required` group is expected always."""

    name: str
    candidates: tuple[str, ...]
    group: str
    required: bool = True

    def find(self, folder: Path) -> Path | None:
        for pattern in self.candidates:
            found = sorted(p for p in folder.glob(pattern) if p.is_file())
            if found:
                return found[0]
        return None


def layout_digest(folder: Path, files: Sequence[LayoutFile]) -> str:
    """sha256 of every file of the layout the folder holds (its relative path and bytes): what a
    score was measured on, so two evaluations can be told to come from the same data wherever
    the folder lies."""
    digest = hashlib.sha256()
    for entry in files:
        found = entry.find(folder)
        if found is None:
            continue
        digest.update(found.relative_to(folder).as_posix().encode() + b"\0")
        with found.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def is_hub_id(source: str | Path) -> bool:
    """`owner/name` that is not a local path: read through `datasets` (`tofu.load_hub_rows`)."""
    return not Path(source).exists() and re.fullmatch(r"[\w.-]+/[\w.-]+", str(source)) is not None


def require_folder(folder: str | Path, benchmark: str, what: str) -> Path:
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise DataError(
            f"{benchmark} path '{path}' is a file, not a folder", f"pass the folder {what}"
        )
    if not path.is_dir():
        raise DataError(f"{benchmark} folder '{path}' does not exist", f"pass the folder {what}")
    return path


def read_json_list(file: Path) -> list[Any]:
    """A JSON file holding one array (MUSE writes its files so), non-empty."""
    value = read_json(file, what="JSON array")
    if not isinstance(value, list):
        raise DataError(f"{file}: expected a JSON array, got {type(value).__name__}")
    if not value:
        raise DataError(f"{file} is an empty array", "expected at least one item")
    return value


def string_field(row: Any, key: str, where: str, *, fields: str) -> str:
    """`row[key]` as a string, or a DataError naming `where` and the fields a row should have."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected an object with {fields}, got {type(row).__name__}")
    if key not in row:
        present = ", ".join(shorten(k, 30) for k in list(row)[:10]) or "none"
        raise DataError(f"{where}: missing field '{key}'", f"rows have {fields}; found: {present}")
    if not isinstance(row[key], str):
        raise DataError(f"{where}: field '{key}' must be a string, got {type(row[key]).__name__}")
    return row[key]


def survey(
    folder: Path,
    files: Sequence[LayoutFile],
    read: Callable[[Path, LayoutFile], dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per file found (`{"file": ..., **read(path, file)}`) and the problems: every
    expected file that is missing, every file found that `read` refuses, each named."""
    present = {f.group for f in files if f.find(folder) is not None}
    rows: list[dict[str, Any]] = []
    missing: list[str] = []
    malformed: list[str] = []
    for file in files:
        found = file.find(folder)
        if found is None:
            if file.required or file.group in present:
                missing.append(file.name)
            continue
        try:
            rows.append({"file": found.relative_to(folder).as_posix(), **read(found, file)})
        except DataError as exc:
            malformed.append(
                f"{found.relative_to(folder).as_posix()} ({failure_reason(exc, found)})"
            )
    return rows, survey_problems(missing, malformed)


def survey_problems(missing: list[str], malformed: list[str]) -> list[str]:
    """A survey's findings as the clauses of its one sentence: what is missing, what is malformed."""
    problems = []
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    if malformed:
        problems.append(f"malformed {'; '.join(malformed)}")
    return problems


def failure_reason(exc: DataError, file: Path) -> str:
    # The loaders name the file by its path; the survey names it once, relative to the folder.
    return exc.what.replace(str(file), "").lstrip(" :") or exc.what


def problems_error(benchmark: str, folder: Path, problems: Sequence[str], hint: str) -> DataError:
    """The one sentence `data stats` ends with when a folder is not the whole released layout."""
    return DataError(f"{benchmark} folder {folder}: {'; '.join(problems)}", hint)
