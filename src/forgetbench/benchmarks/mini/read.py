"""Read a generated folder back: format files as typed records, and per-file counts.

TOFU and LUME files need nothing from here (`load_tofu(<out>/tofu, split)`,
`load_lume(<out>/lume, split)`); the formats have no published loader, so this is theirs.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

from forgetbench.benchmarks.mini.formats import MC_FORMATS, SIDES
from forgetbench.benchmarks.mini.generate import RELEASED_FOLDERS, read_manifest
from forgetbench.config_names import FORMATS
from forgetbench.data.lume import load_lume
from forgetbench.data.muse import require_muse
from forgetbench.data.rwku import require_rwku
from forgetbench.data.tofu import load_tofu
from forgetbench.data.wmdp import require_wmdp
from forgetbench.errors import DataError, UnknownNameError
from forgetbench.io import read_json_records, shorten
from forgetbench.records import ClozeRecord, MCRecord, QARecord

FormatRecord = MCRecord | QARecord | ClozeRecord


def load_format(folder: str | Path, name: str, split: str) -> list[FormatRecord]:
    """Records of `formats/{name}_{split}.jsonl` in a generated folder.

    Multiple-choice formats give `MCRecord`s, `cloze` gives `ClozeRecord`s, and the open
    formats (`analogy_qa`, `comprehension_qa`) give `QARecord`s scored by ROUGE-L."""
    if name not in FORMATS:
        raise UnknownNameError("format", name, FORMATS)
    if split not in SIDES:
        raise UnknownNameError("format split", split, SIDES)
    path = Path(folder) / "formats" / f"{name}_{split}.jsonl"
    records: list[FormatRecord] = []
    for index, row in enumerate(read_json_records(path)):
        where = f"{path} line {index + 1}"
        if name in MC_FORMATS:
            options = _field(row, "options", list, where)
            if not options or not all(isinstance(o, str) for o in options):
                raise DataError(f"{where}: field 'options' must be a non-empty list of strings")
            label = _field(row, "label", int, where)
            if not 0 <= label < len(options):
                raise DataError(
                    f"{where}: label {label} is not an index into its {len(options)} options"
                )
            records.append(
                MCRecord(_field(row, "prompt", str, where), tuple(options), label, split, index)
            )
        elif name == "cloze":
            records.append(
                ClozeRecord(
                    question=_field(row, "question", str, where),
                    prefix=_field(row, "prefix", str, where),
                    span=_field(row, "span", str, where),
                    entity=_author(row, where),
                    split=split,
                    index=index,
                )
            )
        else:
            records.append(
                QARecord(
                    question=_field(row, "question", str, where),
                    answer=_field(row, "answer", str, where),
                    entity=_author(row, where),
                    split=split,
                    index=index,
                )
            )
    return records


def mini_stats(folder: str | Path, *, verify: bool = True) -> list[dict[str, Any]]:
    """One row per (file, kind): TOFU splits, format files by option count, LUME prompts by task
    and kind, and pretraining documents by kind. Every file goes through its loader, and with
    `verify` its checksum must match the manifest."""
    out = Path(folder)
    manifest = read_manifest(out)
    rows: list[dict[str, Any]] = []
    released = _released_rows(out, manifest["files"])
    for path, entry in sorted(manifest["files"].items(), key=_display_order):
        file = out / path
        if not file.is_file():
            raise DataError(
                f"{file} is missing", f"regenerate it: forgetbench data generate --out {out} ..."
            )
        # Read first: a file edited by hand is reported by its line and field when its loader
        # refuses it, by its checksum otherwise.
        file_rows = released[path] if path in released else _file_rows(out, path)
        if verify and hashlib.sha256(file.read_bytes()).hexdigest() != entry["sha256"]:
            raise DataError(
                f"{file} differs from what the generator wrote (checksum mismatch)",
                "delete the folder and generate it again",
            )
        rows += file_rows
    return rows


def _file_rows(out: Path, path: str) -> list[dict[str, Any]]:
    part, _, name = path.rpartition("/")
    stem = Path(name).stem
    if part == "tofu":
        records = load_tofu(out / path, stem)
        perturbed = max(len(r.perturbed_answers) for r in records)
        if perturbed and any(r.paraphrased_answer for r in records):
            kind = f"qa + paraphrase + {perturbed} perturbed"
        elif perturbed:
            kind = f"multiple choice: answer + {perturbed} wrong"
        else:
            kind = "qa"
        return [_row("tofu", path, stem, kind, len(records))]
    if part == "formats":
        fmt, _, side = stem.rpartition("_")
        records = load_format(out, fmt, side)
        counts = Counter(
            f"{fmt}, {len(r.options)} options" if isinstance(r, MCRecord) else fmt for r in records
        )
        return [_row("formats", path, side, kind, n) for kind, n in sorted(counts.items())]
    if part == "lume":
        # holdout.jsonl has LUME's layout too; load_lume only needs a split name to label it.
        records_lume = load_lume(out / path, "forget")
        counts = Counter((r.task, r.kind) for r in records_lume)
        return [
            _row("lume", path, stem, f"Task{task} {kind}", n)
            for (task, kind), n in sorted(counts.items())
        ]
    docs: Counter[str] = Counter()
    for lineno, row in enumerate(read_json_records(out / path), 1):
        _field(row, "text", str, f"{out / path} line {lineno}")
        docs[_field(row, "kind", str, f"{out / path} line {lineno}")] += 1
    return [_row("pretrain", path, "-", kind, n) for kind, n in sorted(docs.items())]


def _released_rows(out: Path, files: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The MUSE-, WMDP- and RWKU-shaped folders' rows by file, read by their loaders as a whole (their
    `.txt` files count characters, which a row of `records` shows as such)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for benchmark, folder in RELEASED_FOLDERS.items():
        if not any(path.startswith(f"{folder}/") for path in files):
            continue  # a folder an older generator wrote, read before it is completed
        if benchmark == "muse":
            for row in require_muse(out / folder):
                path, kind = f"{folder}/{row['file']}", row["kind"]
                count = row["items"] if row["items"] is not None else row["characters"]
                kind = "characters" if row["items"] is None else kind
                rows[path] = [_row("muse", path, row["split"], f"{row['subset']} {kind}", count)]
        elif benchmark == "rwku":
            depth = len(folder.split("/"))
            # The numbered folders; a file beside them (pretraining.jsonl) is not RWKU's.
            targets = sorted({path.split("/")[depth] for path in files
                              if path.startswith(f"{folder}/") and path.count("/") > depth})  # fmt: skip
            for path in (p for p in files if p.startswith(f"{folder}/") and p.count("/") == depth):
                rows[path] = [_row("rwku", path, "-", "rows", len(read_json_records(out / path)))]
            for target in targets:
                # Whole files only: `data stats --benchmark rwku` counts each attack.
                for row in (r for r in require_rwku(out / folder / target) if not r["kind"]):
                    path = f"{folder}/{target}/{row['file']}"
                    rows[path] = [_row("rwku", path, target, "items", row["items"])]
        else:
            for row in require_wmdp(out / folder):
                path = f"{folder}/{row['file']}"
                rows[path] = [_row("wmdp", path, row["set"], row["kind"], row["items"])]
    return rows


def _display_order(item: tuple[str, Any]) -> tuple[int, str]:
    path = item[0]
    parts = ("tofu/", "formats/", "lume/", "muse/", "wmdp/", "rwku/")
    rank = next((i for i, p in enumerate(parts) if path.startswith(p)), len(parts))
    return rank, path


def _row(part: str, file: str, split: str, kind: str, records: int) -> dict[str, Any]:
    return {"part": part, "file": file, "split": split, "kind": kind, "records": records}


def _author(row: dict[str, Any], where: str) -> str | None:
    author = row.get("author")
    if author is not None and not isinstance(author, str):
        raise DataError(f"{where}: field 'author' must be a string, got {type(author).__name__}")
    return author


def _field(row: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in row:
        present = ", ".join(shorten(k, 30) for k in list(row)[:10]) or "none"
        raise DataError(f"{where}: missing field '{key}'", f"fields present: {present}")
    if not isinstance(row[key], kind) or (kind is int and isinstance(row[key], bool)):
        raise DataError(
            f"{where}: field '{key}' must be {kind.__name__}, got {type(row[key]).__name__}"
        )
    return row[key]
