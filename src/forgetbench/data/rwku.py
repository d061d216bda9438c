"""RWKU (Jin et al., 2024, "RWKU: Benchmarking Real-World Knowledge Unlearning for Large Language
Models"): 200 famous people to unlearn, each a target with no forget corpus given.

Two forms, read alike. The per-target folders RWKU's `process/data_process.py` writes (and its
scripts read): a `Target` folder holding one `{N}_{Name_with_underscores}` folder per target, each
with the files of `FILES` (`intro.json`, `forget_level{1,2,3}.json`, ..., the Phi-3 corpora as
`*_phi.json`), every file a JSON array of rows carrying the target as `subject`. Or the Hub
dataset `jinzhuoran/RWKU` by id, whose configs (`HUB_CONFIGS`) hold every target's rows in one
split, filtered by `subject` as `data_process.py` does.

Rows, by file (RWKU's field names): probes `{query, answer, level, type, subject}` (level 3's
`type` is the adversarial attack); MIA sets and corpora `{text, subject}`; `retain_mmlu`
`{question, choices, answer (index), task, examples}`; `retain_bbh` `{question, answer, task,
cot}`; `truthful` `{question, mc1_targets, mc2_targets}` (each `{choices, labels}`); `triviaqa`
`{question, answers}`; `fluency` `{instruction}`; `pair` `{prompt, response: [chosen,
rejected]}`; `reject` `{instruction, input, output}`; `intro` `{target, intro}` (a one-row array
as `data_process.py` writes it, or the object the Hub's own Target folders hold).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgetbench.data.released import (
    failure_reason,
    is_hub_id,
    problems_error,
    require_folder,
    string_field,
    survey_problems,
)
from forgetbench.data.tofu import load_hub_rows
from forgetbench.errors import DataError, UnknownNameError
from forgetbench.io import read_json
from forgetbench.records import (
    MCRecord,
    OpenQARecord,
    PreferenceRecord,
    ProbeRecord,
    QARecord,
    ReasoningRecord,
    TextRecord,
    TruthfulRecord,
)

HUB_ID = "jinzhuoran/RWKU"
# The nine adversarial attacks of level 3 as the paper names them; the data spells some its own
# way (`type` "context hint" for background hint, "incontext learning"), kept as it is.
ADVERSARIAL_KINDS = (
    "prefix injection", "affirmative suffix", "role play", "reverse query",
    "synonym manipulation", "background hint", "in-context learning", "cross-lingual",
    "multiple choice",
)  # fmt: skip


@dataclass(frozen=True)
class RWKUFile:
    """One file of a target's folder: its Hub config and split, and which files come together
    (`group`: the evaluation sets always; each model's forget corpora all or none)."""

    stem: str
    config: str
    split: str
    group: str


def _files() -> dict[str, RWKUFile]:
    files = [RWKUFile("intro", "forget_target", "train", "eval")]
    for stem, config in [
        *((f"forget_level{n}", f"forget_level{n}") for n in (1, 2, 3)),
        *((f"neighbor_level{n}", f"neighbor_level{n}") for n in (1, 2)),
        ("forget_mia", "mia_forget"), ("retain_mia", "mia_retain"),
        ("retain_mmlu", "utility_general"), ("retain_bbh", "utility_reason"),
        ("truthful", "utility_truthfulness"), ("triviaqa", "utility_factuality"),
        ("fluency", "utility_fluency"),
    ]:  # fmt: skip
        files.append(RWKUFile(stem, config, "test", "eval"))
    files.append(RWKUFile("passage", "train_original_passage", "train", "passage"))
    for suffix, model in (("", "llama3"), ("_phi", "phi3")):
        for stem, kind in (("positive", "positive"), ("negative", "negative"), ("pair", "pair"),
                           ("reject", "refusal")):  # fmt: skip
            files.append(RWKUFile(stem + suffix, f"train_{kind}_{model}", "train", model))
    return {f.stem: f for f in files}


FILES = _files()
HUB_CONFIGS = {f.config: f.stem for f in FILES.values()}
PROBE_FILES = ("forget_level1", "forget_level2", "forget_level3", "neighbor_level1",
               "neighbor_level2")  # fmt: skip
_FOLDER = re.compile(r"(\d+)_(.+)")


@dataclass(frozen=True)
class Target:
    """One unlearning target: its `name` ("Stephen King"), the `intro` RWKU prompts with, its
    1-based `number` and, for a local layout, its `folder`."""

    name: str
    intro: str
    number: int
    folder: Path | None = None


def _read_array(file: Path) -> list[Any]:
    value = read_json(file, what="JSON array")
    if not isinstance(value, list):
        raise DataError(f"{file}: expected a JSON array, got {type(value).__name__}")
    return value


def _intro(value: Any, where: str) -> tuple[str, str]:
    # data_process.py writes a one-row array; the Hub's own Target folders hold the object.
    row = value[0] if isinstance(value, list) and len(value) == 1 else value
    if isinstance(value, list) and len(value) != 1:
        raise DataError(f"{where}: expected one {{target, intro}} row, got {len(value)}")
    fields = "target, intro"
    return string_field(row, "target", where, fields=fields), string_field(
        row, "intro", where, fields=fields
    )


def _target_of_folder(folder: Path) -> Target:
    name, intro = _intro(read_json(folder / "intro.json"), str(folder / "intro.json"))
    match = _FOLDER.fullmatch(folder.name)
    return Target(name, intro, int(match.group(1)) if match else 1, folder)


def _target_folders(root: Path) -> list[Path]:
    found = [p for p in root.iterdir() if p.is_dir() and _FOLDER.fullmatch(p.name)]
    return sorted(found, key=lambda p: int(_FOLDER.fullmatch(p.name).group(1)))  # type: ignore[union-attr]


def _root(path: Path) -> Path:
    # The folder data_process.py writes into is data/RWKU/Target: its parent is taken too.
    return path / "Target" if (path / "Target").is_dir() else path


def load_targets(source: str | Path) -> list[Target]:
    """The targets in RWKU's order: a `Target` folder's `{N}_{Name}` folders (or the folder
    holding `Target/`), one target's own folder, or the Hub's `forget_target` config (numbered
    as data_process.py numbers them)."""
    path = Path(source)
    if path.is_dir():
        path = _root(path)
        if (path / "intro.json").is_file():
            return [_target_of_folder(path)]
        folders = _target_folders(path)
        if not folders:
            raise DataError(
                f"RWKU folder {path} holds no target folder ({{N}}_{{Name}} with intro.json)",
                "pass the Target folder RWKU's process/data_process.py writes, or one of its "
                "target folders",
            )
        return [_target_of_folder(f) for f in folders]
    if is_hub_id(source):
        rows = load_hub_rows(str(source), "forget_target", "train")
        where = f"{source} (forget_target)"
        return [Target(*_intro(r, f"{where} row {i}"), i + 1) for i, r in enumerate(rows)]
    raise DataError(
        f"RWKU source '{source}' is neither a local folder nor a Hugging Face dataset id",
        f"pass RWKU's Target folder (or one target's folder) or '{HUB_ID}'",
    )


def find_target(source: str | Path, target: str) -> Target:
    """The target named `target` (its name, "Stephen King", or its folder, "1_Stephen_King")."""
    targets = load_targets(source)
    for t in targets:
        if target in (t.name, t.folder.name if t.folder else None, t.name.replace(" ", "_")):
            return t
    raise UnknownNameError("RWKU target", target, [t.name for t in targets])


def _rows(source: str | Path, target: Target, stem: str) -> tuple[list[Any], str]:
    if stem not in FILES:
        raise UnknownNameError("RWKU file", stem, FILES)
    if target.folder is not None:
        file = target.folder / f"{stem}.json"
        if not file.is_file():
            raise DataError(
                f"no {stem}.json in RWKU target folder {target.folder}",
                "RWKU's process/data_process.py writes every file of the layout (docs/rwku.md)",
            )
        return _read_array(file), str(file)
    entry = FILES[stem]
    rows = load_hub_rows(str(source), entry.config, entry.split)
    # Every target's rows are in one split: data_process.py keeps those whose subject is it.
    return [r for r in rows if r.get("subject") == target.name], f"{source} ({entry.config})"


def _subject(row: Any, target: Target, where: str, fields: str) -> None:
    subject = string_field(row, "subject", where, fields=fields)
    if subject != target.name:
        raise DataError(f"{where}: subject '{subject}' is not the target '{target.name}'")


def _probes(rows: list[Any], origin: str, target: Target, stem: str) -> list[ProbeRecord]:
    split, level = stem.split("_level")[0], int(stem[-1])
    fields = "query, answer, level, type, subject"
    probes = []
    for i, row in enumerate(rows):
        where = f"{origin} item {i}"
        values = [string_field(row, k, where, fields=fields) for k in ("query", "answer", "type")]
        # RWKU's evaluation routes each probe by this field, not by the file it came from.
        found = string_field(row, "level", where, fields=fields)
        if found != str(level):
            raise DataError(f"{where}: level '{found}' in the level-{level} file")
        _subject(row, target, where, fields)
        probes.append(ProbeRecord(*values[:2], target.name, level, values[2], split, i))
    return probes


def _list(row: dict[str, Any], key: str, where: str, item: type, fields: str) -> tuple:
    value = row.get(key) if isinstance(row, dict) else None
    if not isinstance(value, list) or not all(
        isinstance(v, item) and not isinstance(v, bool) for v in value
    ):
        raise DataError(f"{where}: field '{key}' must be a list of {item.__name__}s",
                        f"rows have {fields}")  # fmt: skip
    return tuple(value)


def _mc(row: Any, where: str, index: int, shot: bool = False) -> MCRecord:
    fields = "question, choices, answer (index), task, examples"
    question = string_field(row, "question", where, fields=fields)
    choices = _list(row, "choices", where, str, fields)
    answer = row.get("answer")
    if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < len(choices):
        raise DataError(f"{where}: field 'answer' must index one of the {len(choices)} choices, "
                        f"got {answer!r}")  # fmt: skip
    if shot:
        return MCRecord(question, choices, answer, "retain_mmlu", index)
    examples = row.get("examples")
    if not isinstance(examples, list):
        raise DataError(f"{where}: field 'examples' must be a list of solved questions")
    shots = tuple(_mc(e, f"{where} example {j}", j, True) for j, e in enumerate(examples))
    task = string_field(row, "task", where, fields=fields)
    return MCRecord(question, choices, answer, "retain_mmlu", index, task, shots)


def _truthful(row: Any, where: str) -> TruthfulRecord:
    fields = "question, mc1_targets, mc2_targets ({choices, labels})"
    question = string_field(row, "question", where, fields=fields)
    parts = []
    for key in ("mc1_targets", "mc2_targets"):
        value = row.get(key)
        if not isinstance(value, dict):
            raise DataError(f"{where}: field '{key}' must be an object with choices, labels")
        choices = _list(value, "choices", f"{where} {key}", str, fields)
        labels = _list(value, "labels", f"{where} {key}", int, fields)
        if len(choices) != len(labels) or not set(labels) <= {0, 1} or 1 not in labels:
            raise DataError(f"{where}: {key} needs one 0/1 label per choice, at least one 1")
        parts += [choices, labels]
    return TruthfulRecord(question, *parts)


def _record(row: Any, stem: str, where: str, index: int) -> Any:
    """One row of `stem` (not a probe file, not intro) as its record."""
    base = stem.removesuffix("_phi")
    if base in ("forget_mia", "retain_mia", "passage", "positive", "negative"):
        return TextRecord(string_field(row, "text", where, fields="text, subject"))
    if base == "retain_mmlu":
        return _mc(row, where, index)
    if base == "retain_bbh":
        fields = "question, answer, task, cot"
        return ReasoningRecord(*(string_field(row, k, where, fields=fields)
                                 for k in ("question", "answer", "task", "cot")))  # fmt: skip
    if base == "truthful":
        return _truthful(row, where)
    if base == "triviaqa":
        question = string_field(row, "question", where, fields="question, answers")
        return OpenQARecord(question, _list(row, "answers", where, str, "question, answers"))
    if base == "fluency":
        return string_field(row, "instruction", where, fields="instruction")
    if base == "pair":
        prompt = string_field(row, "prompt", where, fields="prompt, response")
        response = _list(row, "response", where, str, "prompt, response ([chosen, rejected])")
        if len(response) != 2:
            raise DataError(f"{where}: field 'response' must be [chosen, rejected]")
        return PreferenceRecord(prompt, *response)
    fields = "instruction, input, output"  # reject: LLaMA-Factory joins instruction and input
    parts = [string_field(row, k, where, fields=fields) for k in ("instruction", "input", "output")]
    return QARecord("\n".join(p for p in parts[:2] if p), parts[2], split=stem, index=index)


def load_rwku(source: str | Path, target: str | Target, stem: str) -> list[Any]:
    """The rows of one file of one target as records: `ProbeRecord`s for the probe files,
    `TextRecord`s for the MIA sets and the corpora, `MCRecord`s (MMLU), `ReasoningRecord`s
    (BBH), `TruthfulRecord`s, `OpenQARecord`s (TriviaQA), instructions (fluency, strings),
    `PreferenceRecord`s (pair) and `QARecord`s (reject: question, refusal)."""
    if stem == "intro":
        raise UnknownNameError("RWKU file with rows (intro is the Target)", stem, FILES)
    if not isinstance(target, Target):
        target = find_target(source, target)
    rows, origin = _rows(source, target, stem)
    if stem in PROBE_FILES:
        return _probes(rows, origin, target, stem)
    records = []
    for i, row in enumerate(rows):
        where = f"{origin} item {i}"
        record = _record(row, stem, where, i)
        if isinstance(row, dict) and "subject" in row:
            _subject(row, target, where, "subject")
        records.append(record)
    return records


def _characters(record: Any) -> int:
    if isinstance(record, str):
        return len(record)
    return sum(len(v) if isinstance(v, str) else sum(len(x) for x in v if isinstance(x, str))
               for v in vars(record).values() if isinstance(v, str | tuple))  # fmt: skip


def rwku_stats(folder: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per file of the layout (its items and characters over every target, exactly),
    one per level-3 attack kind, and every missing or malformed file named."""
    path = _root(require_folder(folder, "RWKU", "RWKU's process/data_process.py writes (Target/)"))
    folders = [path] if (path / "intro.json").is_file() else _target_folders(path)
    if not folders:
        return [], [f"no target folder ({{N}}_{{Name}} with intro.json) in {path}"]
    rel = (lambda f: f.name) if folders == [path] else (lambda f: f"{f.parent.name}/{f.name}")
    present = {FILES[f.stem].group for d in folders for f in d.glob("*.json") if f.stem in FILES}
    totals: dict[str, Counter] = {}
    kinds: Counter = Counter()
    missing, malformed = [], []
    for d in folders:
        intro = d / "intro.json"
        if not intro.is_file():  # a target folder without it: named, its other files unread
            missing.append(rel(intro))
            continue
        try:
            target = _target_of_folder(d)
        except DataError as exc:
            malformed.append(f"{rel(intro)} ({failure_reason(exc, intro)})")
            continue
        for entry in FILES.values():
            file = d / f"{entry.stem}.json"
            if not file.is_file():
                if entry.group == "eval" or entry.group in present:
                    missing.append(rel(file))
                continue
            try:
                records = [target] if entry.stem == "intro" else load_rwku(d, target, entry.stem)
            except DataError as exc:
                malformed.append(f"{rel(file)} ({failure_reason(exc, file)})")
                continue
            count = totals.setdefault(entry.stem, Counter())
            count.update(targets=1, items=len(records),
                         characters=sum(_characters(r) for r in records))  # fmt: skip
            kinds.update(r.kind for r in records if isinstance(r, ProbeRecord) and r.level == 3)
    rows = [{"file": f"{stem}.json", "kind": "", **counts} for stem, counts in totals.items()]
    rows += [{"file": "forget_level3.json", "kind": k, "targets": None, "items": n,
              "characters": None} for k, n in sorted(kinds.items())]  # fmt: skip
    return rows, survey_problems(missing, malformed)


RWKU_HINT = (
    "an RWKU folder is the Target folder RWKU's process/data_process.py writes ({N}_{Name} "
    "folders, each with intro.json, the probe, MIA and utility files and the forget corpora); "
    "rewrite or re-download the named files"
)


def require_rwku(folder: str | Path) -> list[dict[str, Any]]:
    """`rwku_stats`' rows, or one DataError naming every missing or malformed file."""
    rows, problems = rwku_stats(folder)
    if problems:
        raise problems_error("RWKU", Path(folder), problems, RWKU_HINT)
    return rows


def rwku_digest(folder: str | Path) -> str:
    """sha256 of every file of the layout under the folder (path and bytes, in path order):
    what `forgetbench eval` records beside its scores."""
    root = _root(Path(folder))
    digest = hashlib.sha256()
    for file in sorted(root.rglob("*.json")):
        if file.stem in FILES:
            digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def target_splits(folder: str | Path) -> list[str]:
    """The folder's targets as a study names its forget sets: each target's folder name
    (`1_Stephen_King`), in RWKU's order."""
    return [t.folder.name for t in load_targets(folder) if t.folder is not None]
