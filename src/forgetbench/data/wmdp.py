"""WMDP (Li et al., 2024, "The WMDP Benchmark: Measuring and Reducing Malicious Use With
Unlearning").

Questions: the subsets `wmdp-bio`, `wmdp-cyber`, `wmdp-chem`, rows `{question, choices (4
strings), answer (0-based int)}`, in a folder as `{subset}.jsonl` / `{subset}.json`, or the Hub
dataset's parquet files (`{subset}/test-*.parquet`, or `{subset}.parquet`), or by the Hub id
`cais/wmdp` (config = subset, split `test`). Corpora: `wmdp-corpora/{bio,cyber}-{forget,retain}-
corpus.jsonl`, rows with a `text` field (the Hub's `cais/wmdp-corpora`, config
`{name}-corpus`, split `train`; the bio forget corpus is given on request by its authors).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forgetbench.data.released import (
    LayoutFile,
    is_hub_id,
    layout_digest,
    problems_error,
    require_folder,
    string_field,
    survey,
)
from forgetbench.data.tofu import load_hub_rows
from forgetbench.errors import DataError, UnknownNameError
from forgetbench.io import read_json_records
from forgetbench.records import MCRecord

HUB_ID = "cais/wmdp"
CORPORA_HUB_ID = "cais/wmdp-corpora"
SUBSETS = ("wmdp-bio", "wmdp-cyber", "wmdp-chem")
CORPORA = ("bio-forget", "bio-retain", "cyber-forget", "cyber-retain")
CHOICES = 4
_FIELDS = "question, choices (4 strings), answer (0-3)"

# The question subsets are each optional (a group of their own, so one present does not make
# the others expected): many studies report bio and cyber only. At least one is required
# (`wmdp_stats`), and the ones missing are named (`missing_subsets`).
LAYOUT = [
    *(
        LayoutFile(
            f"{s} (.jsonl, .json or parquet)",
            (f"{s}.jsonl", f"{s}.json", f"{s}.parquet", f"{s}/*.parquet"),
            f"questions/{s}",
            required=False,
        )
        for s in SUBSETS
    ),
    *(
        LayoutFile(
            f"wmdp-corpora/{c}-corpus.jsonl",
            (f"wmdp-corpora/{c}-corpus.jsonl",),
            "corpora",
            required=False,
        )
        for c in CORPORA
    ),
]
_QUESTIONS = {entry.candidates[0].removesuffix(".jsonl"): entry for entry in LAYOUT[:3]}
# The utility questions beside WMDP (MMLU, or the miniature's counterpart), optional: MMLU's
# fields, `question, subject, choices, answer`, as `cais/mmlu` gives them.
MMLU = LayoutFile("mmlu.jsonl (or .json)", ("mmlu.jsonl", "mmlu.json"), "utility", required=False)
LAYOUT.append(MMLU)


def question_file(folder: str | Path, subset: str) -> Path | None:
    """The file a folder holds for one question subset, or None."""
    return _QUESTIONS[subset].find(Path(folder))


def _read_rows(file: Path) -> list[dict[str, Any]]:
    if file.suffix != ".parquet":
        return read_json_records(file)
    import pyarrow.parquet as pq  # lazy: only the Hub's parquet files need it

    try:
        rows = pq.read_table(file).to_pylist()
    except Exception as exc:  # pyarrow's errors have many types; all mean "not a parquet table"
        raise DataError(
            f"{file} is not a readable parquet file ({str(exc).splitlines()[0][:200]})",
            "re-download it, or give the subset as .jsonl",
        ) from None
    if not rows:
        raise DataError(f"{file} has no rows", "expected one question per row")
    return rows


def load_wmdp(source: str | Path, subset: str) -> list[MCRecord]:
    """The questions of one subset, from a folder (or one file) or the Hub id."""
    if subset not in SUBSETS:
        raise UnknownNameError("WMDP subset", subset, SUBSETS)
    path = Path(source)
    if path.is_file():
        rows, origin = _read_rows(path), str(path)
    elif path.is_dir():
        file = question_file(path, subset)
        if file is None:
            raise DataError(
                f"no {subset}.jsonl, {subset}.json or {subset} parquet file in {path}",
                "pass the folder holding the WMDP question files",
            )
        rows, origin = _read_rows(file), str(file)
    elif is_hub_id(source):
        rows, origin = load_hub_rows(str(source), subset, "test"), f"{source} ({subset})"
    else:
        raise DataError(
            f"WMDP source '{source}' is neither a local file or folder nor a Hugging Face dataset id",
            f"pass a folder with {subset}.jsonl, or '{HUB_ID}'",
        )
    if not rows:
        raise DataError(f"{origin} has no rows", "expected one question per row")
    return [_question(row, subset, i, f"{origin} row {i}") for i, row in enumerate(rows)]


def _question(row: dict[str, Any], subset: str, index: int, where: str) -> MCRecord:
    question = string_field(row, "question", where, fields=_FIELDS)
    choices = row.get("choices")
    if not isinstance(choices, list | tuple):
        raise DataError(f"{where}: field 'choices' must be a list of {CHOICES} strings",
                        f"got {type(choices).__name__}; rows have {_FIELDS}")  # fmt: skip
    if len(choices) != CHOICES:
        raise DataError(f"{where}: field 'choices' has {len(choices)} options, not {CHOICES}")
    if not all(isinstance(c, str) for c in choices):
        raise DataError(f"{where}: field 'choices' must hold strings only")
    answer = row.get("answer")
    # bool is an int in Python; an answer of `true` is no option index.
    if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < CHOICES:
        raise DataError(
            f"{where}: field 'answer' must be an option index 0-{CHOICES - 1}, got {answer!r}"
        )
    return MCRecord(
        prompt=question, options=tuple(choices), label=answer, split=subset, index=index
    )


def load_mmlu(folder: str | Path) -> list[tuple[MCRecord, str]]:
    """The utility questions of a WMDP folder's `mmlu.jsonl` with each one's MMLU subject (its
    prompt names it); empty when the folder has none."""
    file = MMLU.find(Path(folder))
    if file is None:
        return []
    rows = _read_rows(file)
    if not rows:
        raise DataError(f"{file} has no rows", "expected one question per row")
    found = []
    for i, row in enumerate(rows):
        where = f"{file} row {i}"
        subject = string_field(row, "subject", where, fields=f"subject, {_FIELDS}")
        found.append((_question(row, "mmlu", i, where), subject))
    return found


def load_wmdp_corpus(source: str | Path, name: str) -> list[str]:
    """The documents of one corpus (`bio-forget`, ...): a folder holding `wmdp-corpora/`, the
    `wmdp-corpora` folder itself, or the Hub id `cais/wmdp-corpora`."""
    if name not in CORPORA:
        raise UnknownNameError("WMDP corpus", name, CORPORA)
    path = Path(source)
    if path.is_dir():
        folder = path / "wmdp-corpora" if (path / "wmdp-corpora").is_dir() else path
        file = folder / f"{name}-corpus.jsonl"
        if not file.is_file():
            raise DataError(
                f"no {name}-corpus.jsonl in {folder}",
                "the WMDP corpora are wmdp-corpora/{bio,cyber}-{forget,retain}-corpus.jsonl",
            )
        rows, origin = read_json_records(file), str(file)
    elif is_hub_id(source):
        rows = load_hub_rows(str(source), f"{name}-corpus", "train")
        origin = f"{source} ({name}-corpus)"
    else:
        raise DataError(
            f"WMDP corpus source '{source}' is neither a local folder nor a Hugging Face dataset id",
            f"pass the folder holding wmdp-corpora/, or '{CORPORA_HUB_ID}'",
        )
    if not rows:
        raise DataError(f"{origin} has no rows", "expected one document per line")
    return [string_field(r, "text", f"{origin} row {i}", fields="text") for i, r in enumerate(rows)]


def wmdp_stats(folder: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per question subset and corpus found (exact counts) and every missing or
    malformed file named (`released.survey`)."""
    path = require_folder(folder, "WMDP", "holding wmdp-bio/-cyber/-chem (and wmdp-corpora/)")

    def read(file: Path, entry: LayoutFile) -> dict[str, Any]:
        if entry is MMLU:
            questions = load_mmlu(path)
            return {"set": "mmlu", "kind": "questions", "items": len(questions),
                    "characters": sum(len(r.prompt) + sum(map(len, r.options)) for r, _ in questions)}  # fmt: skip
        if entry.group.startswith("questions/"):
            subset = entry.candidates[0].removesuffix(".jsonl")
            records = load_wmdp(file, subset)
            return {"set": subset, "kind": "questions", "items": len(records),
                    "characters": sum(len(r.prompt) + sum(map(len, r.options)) for r in records)}  # fmt: skip
        name = file.name.removesuffix("-corpus.jsonl")
        texts = load_wmdp_corpus(path, name)
        return {"set": name, "kind": "documents", "items": len(texts),
                "characters": sum(len(t) for t in texts)}  # fmt: skip

    rows, problems = survey(path, LAYOUT, read)
    if all(question_file(path, s) is None for s in SUBSETS):
        problems.insert(0, f"missing every question subset ({', '.join(SUBSETS)}: at least one)")
    return rows, problems


def missing_subsets(folder: str | Path) -> list[str]:
    """The question subsets a WMDP folder lacks (scored without them)."""
    return [s for s in SUBSETS if question_file(folder, s) is None]


def wmdp_notes(folder: str | Path) -> list[str]:
    """What a study or an evaluation of a WMDP folder should say before it scores it."""
    missing = missing_subsets(folder)
    if not missing or len(missing) == len(SUBSETS):
        return []
    present = [s for s in SUBSETS if s not in missing]
    return [
        f"WMDP folder {folder} has no {' or '.join(missing)}: scoring "
        f"{' and '.join(present)} only (wmdp/all is their accuracy)"
    ]


WMDP_HINT = (
    "a WMDP folder holds wmdp-bio, wmdp-cyber and wmdp-chem, or some of them (.jsonl, .json or "
    "the Hub's parquet) and, for unlearning, wmdp-corpora/; re-download the named files"
)


def require_wmdp(folder: str | Path) -> list[dict[str, Any]]:
    """`wmdp_stats`' rows, or one DataError naming every missing or malformed file."""
    rows, problems = wmdp_stats(folder)
    if problems:
        raise problems_error("WMDP", Path(folder), problems, WMDP_HINT)
    return rows


def wmdp_digest(folder: str | Path) -> str:
    """The digest of the WMDP files the folder holds (`released.layout_digest`)."""
    return layout_digest(Path(folder), LAYOUT)
