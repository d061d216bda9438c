"""TOFU (Maini et al., 2024, "TOFU: A Task of Fictitious Unlearning for LLMs").

Reads the Hugging Face dataset `locuslab/TOFU` by config name through `datasets.load_dataset`,
or the same files from a local folder (`{split}.json` / `{split}.jsonl`) or one JSON/JSONL file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forgetbench.errors import ConfigError, DataError, UnknownNameError
from forgetbench.io import read_json_records, shorten
from forgetbench.records import QARecord

HUB_ID = "locuslab/TOFU"
AUTHORS = 200
QUESTIONS_PER_AUTHOR = 20

# The generalisation probes' kinds: what each asks of a forget split's facts (docs/generalisation.md).
PROBE_KINDS = ("paraphrase", "reverse", "two_hop", "shared")

SPLITS = (
    "full",
    "forget01",
    "forget05",
    "forget10",
    "retain90",
    "retain95",
    "retain99",
    "holdout01",
    "holdout05",
    "holdout10",
    "forget01_perturbed",
    "forget05_perturbed",
    "forget10_perturbed",
    "retain_perturbed",
    "real_authors_perturbed",
    "world_facts_perturbed",
    # The miniature's instance-level splits (single questions over many authors), nested like
    # the author splits: a sequence of unlearning requests runs on them at the tiny scale.
    *(f"forget{n}_instances" for n in ("01", "05", "10")),
    *(f"retain{n}_instances" for n in ("99", "95", "90")),
    *(f"forget{n}_instances_perturbed" for n in ("01", "05", "10")),
    # The miniature's generalisation probes of each forget split (benchmarks/mini/probes.py).
    *(f"forget{n}_{kind}_perturbed" for n in ("01", "05", "10") for kind in PROBE_KINDS),
)
# Eval sets whose perturbed answers the truth ratio needs; "answer-only" ones reuse the answer
# as the paraphrase, as TOFU's evaluation code does for Real Authors / World Facts.
_NEEDS_PARAPHRASE = {
    "forget01_perturbed",
    "forget05_perturbed",
    "forget10_perturbed",
    "retain_perturbed",
    *(f"forget{n}_instances_perturbed" for n in ("01", "05", "10")),
    *(f"forget{n}_{kind}_perturbed" for n in ("01", "05", "10") for kind in PROBE_KINDS),
}
_NEEDS_PERTURBED = _NEEDS_PARAPHRASE | {"real_authors_perturbed", "world_facts_perturbed"}


def validate_split(split: str) -> str:
    if split not in SPLITS:
        raise UnknownNameError("TOFU split", split, SPLITS)
    return split


def load_tofu(source: str | Path, split: str, *, limit: int | None = None) -> list[QARecord]:
    """Records of one TOFU split.

    `source` is a local folder holding `{split}.json[l]`, a single JSON/JSONL file (then `split`
    only labels the records), or a Hugging Face dataset id such as `locuslab/TOFU`.
    """
    path = Path(source)
    if path.is_file():
        rows, origin = read_json_records(path), str(path)
    elif path.is_dir():
        validate_split(split)
        file = _find_split_file(path, split)
        rows, origin = read_json_records(file), str(file)
    elif _looks_like_hub_id(str(source)):
        validate_split(split)
        rows, origin = load_hub_rows(str(source), split), f"{source} ({split})"
    else:
        raise DataError(
            f"TOFU source '{source}' is neither a local file or folder nor a Hugging Face dataset id",
            f"pass a folder with {split}.json, a .json/.jsonl file, or '{HUB_ID}'",
        )
    if not rows:
        raise DataError(f"{origin} has no rows", "expected one question per row")
    if limit is not None:
        rows = rows[:limit]
    return [_to_record(row, split, number, origin, len(rows)) for number, row in enumerate(rows)]


# The four evaluation sets TOFU's evaluation asks, read by the TOFU task, the eval command's file
# check and the sequences' per-request sets.
def eval_set_files(split: str) -> dict[str, str]:
    """The TOFU split file each of the four evaluation sets of forget split `split` reads."""
    return {
        "forget": f"{split}_perturbed",
        "retain": "retain_perturbed",
        "real_authors": "real_authors_perturbed",
        "world_facts": "world_facts_perturbed",
    }


def tofu_eval_sets(
    data: str | Path, split: str, *, max_questions: int | None = None
) -> dict[str, list[QARecord]]:
    """The four TOFU evaluation sets for a forget split, from a TOFU-layout source, each cut to
    its first `max_questions` (`first_questions`). A folder made by `forgetbench data generate`
    may be given by its root."""
    source = Path(data)
    if (source / "manifest.json").is_file() and (source / "tofu").is_dir():
        source = source / "tofu"
    sets = {name: load_tofu(source, file) for name, file in eval_set_files(split).items()}
    return {name: first_questions(records, max_questions) for name, records in sets.items()}


def first_questions(records: Sequence[QARecord], max_questions: int | None) -> list[QARecord]:
    """The first `max_questions` records, or all of them for None: TOFU's `ds_size`, which its
    evaluation applies to each of its four sets as `data.select(range(min(ds_size, len(data))))`
    (TOFU `evaluate_util.py`). Its published logs used 300: 300 of forget10's and retain's 400
    questions, all 100 Real Authors and 117 World Facts ones."""
    if max_questions is None:
        return list(records)
    if max_questions < 1:
        raise ConfigError(
            f"eval.max_questions must be at least 1, got {max_questions}", "or unset it for all"
        )
    return list(records[:max_questions])


def load_hub_rows(dataset: str, config: str, split: str = "train") -> list[dict[str, Any]]:
    """Rows of one config's split through `datasets.load_dataset` (hub id, or a local dataset repo
    folder). TOFU keeps each config in `train`; MUSE and WMDP name their splits."""
    import datasets  # lazy: ~0.8 s with pyarrow, and only a Hub id or dataset repo needs it

    try:
        table = datasets.load_dataset(dataset, config, split=split)
    except Exception as exc:  # datasets raises many types; all mean "could not get it"
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        which = f"config '{config}'" if split == "train" else f"config '{config}' split '{split}'"
        raise DataError(
            f"could not load {which} of dataset '{dataset}': {first_line}",
            "check the id and your network (HF_HUB_OFFLINE=1 forbids downloads), "
            "or pass a local folder with the split's JSON file",
        ) from None
    return [dict(row) for row in table]


def split_file(folder: str | Path, split: str) -> Path | None:
    """`{split}.jsonl` or `{split}.json` in a local folder, or None."""
    for name in (f"{split}.jsonl", f"{split}.json"):
        if (Path(folder) / name).is_file():
            return Path(folder) / name
    return None


def require_splits(folder: str | Path, splits: Sequence[str], *, reader: str) -> None:
    """Refuse at once, naming every one, the split files `reader` needs and a local folder lacks
    (a Hugging Face dataset id is left to the loader)."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    missing = [s for s in splits if split_file(folder, s) is None]
    if missing:
        raise DataError(
            f"{reader} needs {', '.join(f'{s}.json(l)' for s in missing)} in {folder}, "
            f"which {'is' if len(missing) == 1 else 'are'} not there",
            "add the missing TOFU split files (docs/your-model.md lists which command reads "
            "which), or pass another --data",
        )


def _find_split_file(folder: Path, split: str) -> Path:
    found = split_file(folder, split)
    if found is not None:
        return found
    raise DataError(
        f"no file for TOFU split '{split}' in {folder}",
        f"expected {split}.json or {split}.jsonl there",
    )


def _looks_like_hub_id(source: str) -> bool:
    return re.fullmatch(r"[\w.-]+/[\w.-]+", source) is not None


def _to_record(row: dict[str, Any], split: str, number: int, origin: str, count: int) -> QARecord:
    where = f"{origin} row {number}"
    question = _string(row, "question", where)
    answer = _string(row, "answer", where)
    paraphrased = row.get("paraphrased_answer")
    if paraphrased is None and split in _NEEDS_PARAPHRASE:
        raise DataError(f"{where}: missing field 'paraphrased_answer'", f"split '{split}' needs it")
    if paraphrased is not None and not isinstance(paraphrased, str):
        raise DataError(f"{where}: field 'paraphrased_answer' must be a string")
    perturbed = row.get("perturbed_answer", [])
    if isinstance(perturbed, str):
        perturbed = [perturbed]
    if not isinstance(perturbed, list) or not all(isinstance(p, str) for p in perturbed):
        raise DataError(f"{where}: field 'perturbed_answer' must be a list of strings")
    if not perturbed and split in _NEEDS_PERTURBED:
        raise DataError(f"{where}: missing field 'perturbed_answer'", f"split '{split}' needs it")
    return QARecord(
        question=question,
        answer=answer,
        paraphrased_answer=paraphrased,
        perturbed_answers=tuple(perturbed),
        entity=_author_of(split, number, count),
        split=split,
        index=number,
    )


def _author_of(split: str, number: int, count: int) -> str | None:
    """TOFU orders `full` by author, 20 questions each; forgetNN is its last NN % and retainNN the
    rest. Only trust that when the row count proves the file is the whole split."""
    base = split.removesuffix("_perturbed")
    total = AUTHORS * QUESTIONS_PER_AUTHOR
    if base == "full" and count == total:
        offset = 0
    elif m := re.fullmatch(r"forget(\d\d)", base):
        expected = total * int(m.group(1)) // 100
        if count != expected:
            return None
        offset = total - expected
    elif m := re.fullmatch(r"retain(\d\d)", base):
        if count != total * int(m.group(1)) // 100:
            return None
        offset = 0
    else:
        return None
    return f"tofu-author-{(offset + number) // QUESTIONS_PER_AUTHOR:03d}"


def _string(row: dict[str, Any], key: str, where: str) -> str:
    if key not in row:
        raise DataError(
            f"{where}: missing field '{key}'",
            f"fields present: {', '.join(shorten(k, 30) for k in list(row)[:10]) or 'none'}",
        )
    value = row[key]
    if not isinstance(value, str):
        raise DataError(f"{where}: field '{key}' must be a string, got {type(value).__name__}")
    return value


def tofu_stats(folder: str | Path) -> list[dict[str, Any]]:
    """One row per JSON/JSONL file in a local TOFU folder: its split, size and which answer kinds it
    carries. Files whose name is not a TOFU split are read as plain QA files."""
    path = Path(folder)
    if not path.is_dir():
        raise DataError(
            f"TOFU folder '{path}' does not exist", "pass the folder holding the split files"
        )
    files = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl") and p.is_file())
    if not files:
        raise DataError(
            f"no .json or .jsonl files in {path}", "pass the folder holding the split files"
        )
    rows = []
    for file in files:
        records = load_tofu(file, file.stem)
        rows.append(
            {
                "file": file.name,
                "split": file.stem if file.stem in SPLITS else f"{file.stem} (not a TOFU split)",
                "questions": len(records),
                "with_paraphrase": sum(r.paraphrased_answer is not None for r in records),
                "perturbed_per_question": max(len(r.perturbed_answers) for r in records),
            }
        )
    return rows
