"""MUSE (Shi et al., 2024, "MUSE: Machine Unlearning Six-Way Evaluation for Language Models").

One corpus (News or Books) as the MUSE authors' `load_data.py` lays it out in a folder, or the
Hub dataset `muse-bench/MUSE-News` / `MUSE-Books` by id, where each folder below is a config and
each file a split:

- `knowmem/{forget_qa,retain_qa,forget_qa_icl,retain_qa_icl}.json`: `[{question, answer}]`;
- `verbmem/forget.json`: `[{prompt, gt}]`;
- `privleak/{forget,retain,holdout}.json`, `raw/{forget,retain1,retain2,holdout}.json`: lists
  of documents (strings; `{text}` objects are read too, as MUSE's training code does), with
  `raw/*.txt` beside them (the documents joined by a blank line, what MUSE trains on);
- News only: `scal/forget_{1..4}.json` and `sust/forget_{1..4}.json` (growing forget sets, and
  the sequence of requests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forgetbench.data.released import (
    LayoutFile,
    is_hub_id,
    layout_digest,
    problems_error,
    read_json_list,
    require_folder,
    string_field,
    survey,
)
from forgetbench.data.tofu import load_hub_rows
from forgetbench.errors import DataError, UnknownNameError
from forgetbench.io import read_text
from forgetbench.records import CompletionRecord, QARecord

HUB_IDS = {"news": "muse-bench/MUSE-News", "books": "muse-bench/MUSE-Books"}
KNOWMEM_SPLITS = ("forget_qa", "retain_qa", "forget_qa_icl", "retain_qa_icl")
PRIVLEAK_SPLITS = ("forget", "retain", "holdout")
RAW_SPLITS = ("forget", "retain1", "retain2", "holdout")
FOLDS = tuple(f"forget_{n}" for n in range(1, 5))
# The document subsets and their splits; scal and sust are News' only.
TEXT_SUBSETS = {"privleak": PRIVLEAK_SPLITS, "raw": RAW_SPLITS, "scal": FOLDS, "sust": FOLDS}
_QA_FIELDS = "question, answer"
_VERBMEM_FIELDS = "prompt, gt"


def _layout() -> list[LayoutFile]:
    files = [
        LayoutFile(f"knowmem/{s}.json", (f"knowmem/{s}.json",), "knowmem") for s in KNOWMEM_SPLITS
    ]
    files.append(LayoutFile("verbmem/forget.json", ("verbmem/forget.json",), "verbmem"))
    for subset, splits in TEXT_SUBSETS.items():
        required = subset in ("privleak", "raw")
        for split in splits:
            name = f"{subset}/{split}.json"
            files.append(LayoutFile(name, (name,), subset, required))
    # The .txt twins: optional, but where one is there all of them are expected.
    for subset in ("raw", "scal", "sust"):
        for split in TEXT_SUBSETS[subset]:
            name = f"{subset}/{split}.txt"
            files.append(LayoutFile(name, (name,), f"{subset}.txt", required=False))
    return files


LAYOUT = _layout()


def _rows(source: str | Path, subset: str, split: str) -> tuple[list[Any], str]:
    """The items of one file (a folder's `{subset}/{split}.json`) or Hub split, and where from."""
    path = Path(source)
    if path.is_dir():
        file = path / subset / f"{split}.json"
        if not file.is_file():
            raise DataError(
                f"no {subset}/{split}.json in MUSE folder {path}",
                "MUSE's load_data.py writes every file of the layout (docs/muse.md lists them)",
            )
        return read_json_list(file), str(file)
    if is_hub_id(source):
        rows = load_hub_rows(str(source), subset, split)
        if not rows:
            raise DataError(f"{source} ({subset}, {split}) has no rows")
        return rows, f"{source} ({subset}, {split})"
    raise DataError(
        f"MUSE source '{source}' is neither a local folder nor a Hugging Face dataset id",
        f"pass a MUSE corpus folder (e.g. data/news) or {HUB_IDS['news']}",
    )


def load_knowmem(source: str | Path, split: str) -> list[QARecord]:
    """The knowledge-memorisation questions of one split (`forget_qa`, ..., `retain_qa_icl`)."""
    if split not in KNOWMEM_SPLITS:
        raise UnknownNameError("MUSE knowmem split", split, KNOWMEM_SPLITS)
    rows, origin = _rows(source, "knowmem", split)
    return [
        QARecord(
            question=string_field(row, "question", f"{origin} item {i}", fields=_QA_FIELDS),
            answer=string_field(row, "answer", f"{origin} item {i}", fields=_QA_FIELDS),
            split=split,
            index=i,
        )
        for i, row in enumerate(rows)
    ]


def load_verbmem(source: str | Path) -> list[CompletionRecord]:
    """The verbatim-memorisation prompts (`verbmem/forget`): an excerpt's opening and its `gt`."""
    rows, origin = _rows(source, "verbmem", "forget")
    return [
        CompletionRecord(
            prefix=string_field(row, "prompt", f"{origin} item {i}", fields=_VERBMEM_FIELDS),
            completion=string_field(row, "gt", f"{origin} item {i}", fields=_VERBMEM_FIELDS),
            id=str(i),
            kind="regurgitation",
            split="verbmem",
        )
        for i, row in enumerate(rows)
    ]


def load_muse_texts(source: str | Path, subset: str, split: str) -> list[str]:
    """The documents of a privleak, raw, scal or sust split."""
    if subset not in TEXT_SUBSETS:
        raise UnknownNameError("MUSE document subset", subset, TEXT_SUBSETS)
    if split not in TEXT_SUBSETS[subset]:
        raise UnknownNameError(f"MUSE {subset} split", split, TEXT_SUBSETS[subset])
    rows, origin = _rows(source, subset, split)
    texts = []
    for i, row in enumerate(rows):
        if isinstance(row, str):
            texts.append(row)
        else:  # the Hub's rows and MUSE's {text} files
            texts.append(string_field(row, "text", f"{origin} item {i}", fields="text"))
    return texts


def load_raw_text(folder: str | Path, subset: str, split: str) -> str:
    """`{subset}/{split}.txt` of raw, scal or sust: the split's documents as one text, which
    MUSE's training code tokenises whole and cuts into chunks."""
    if subset not in ("raw", "scal", "sust"):
        raise UnknownNameError("MUSE text subset", subset, ("raw", "scal", "sust"))
    file = Path(folder) / subset / f"{split}.txt"
    text = read_text(file)
    if not text.strip():
        raise DataError(f"{file} is empty", "expected the split's documents joined by blank lines")
    return text


def muse_stats(folder: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per file of the layout found in a MUSE corpus folder (its items, exactly), and
    every missing or malformed file named (`released.survey`)."""
    path = require_folder(
        folder, "MUSE", "of one corpus (e.g. data/news) as load_data.py writes it"
    )

    def read(file: Path, entry: LayoutFile) -> dict[str, Any]:
        subset, split = entry.name.removesuffix(".json").removesuffix(".txt").split("/")
        if file.suffix == ".txt":
            text = load_raw_text(path, subset, split)
            return {"subset": subset, "split": split, "kind": "text", "items": None,
                    "characters": len(text)}  # fmt: skip
        if subset == "knowmem":
            items: list[Any] = load_knowmem(path, split)
            kind, characters = "questions", sum(len(r.question) + len(r.answer) for r in items)
        elif subset == "verbmem":
            items = load_verbmem(path)
            kind, characters = "prompts", sum(len(r.prefix) + len(r.completion) for r in items)
        else:
            items = load_muse_texts(path, subset, split)
            kind, characters = "documents", sum(len(t) for t in items)
        return {"subset": subset, "split": split, "kind": kind, "items": len(items),
                "characters": characters}  # fmt: skip

    return survey(path, LAYOUT, read)


def require_muse(folder: str | Path) -> list[dict[str, Any]]:
    """`muse_stats`' rows, or one DataError naming every missing or malformed file."""
    rows, problems = muse_stats(folder)
    if problems:
        raise problems_error("MUSE", Path(folder), problems, MUSE_HINT)
    return rows


MUSE_HINT = (
    "a MUSE corpus folder holds knowmem/, verbmem/, privleak/ and raw/ (News also scal/ and "
    "sust/) as MUSE's load_data.py writes them; re-download the named files"
)


def muse_digest(folder: str | Path) -> str:
    """The digest of the MUSE files the folder holds (`released.layout_digest`)."""
    return layout_digest(Path(folder), LAYOUT)
