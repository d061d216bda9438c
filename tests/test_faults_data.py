"""Damaged input files: every command that reads a user's file ends in one line naming it.

A table of commands (each reads its file before any model or training work) times a table of
damage (deep nesting, non-UTF-8 bytes, truncation, binary noise, an integer Python refuses, a
row missing a field, ...). Each case must exit 2 with one `error:` line on stderr that names the
file, no traceback, and must leave every file that was there before unchanged (checksums).
Huge rows (a 5 MB question, a 10 MB row) are accepted: they load and are counted, quickly.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from file_tree import snapshot
from forgetbench.cli import main

TOFU_ROW = {"question": "Who wrote it?", "answer": "Ana did.", "paraphrased_answer": "Ana."}
LUME_ROWS = {
    "forget": {"id": "doc1sc1", "input": "Once upon", "output": "a time", "task": "Task1"},
    "retain": {"id": "doc2qa1", "input": "Who?", "output": "Ana", "task": "Task2"},
}
_SET = {
    "avg_gt_loss": {"0": 1.0, "1": 2.0},
    "avg_paraphrased_loss": {"0": 1.5, "1": 2.5},
    "average_perturb_loss": {"0": [2.0, 3.0], "1": [2.5, 3.5]},
    "rougeL_recall": {"0": 0.5, "1": 0.25},
}
EVAL_LOG = {"eval_log_forget.json": _SET, "eval_log.json": _SET}
RESULTS = {"rows": [{"split": "forget10", "method": "npo", "forget/truth_ratio": 0.6}]}
CONFIG_YAML = "seed: 3\ntrain:\n  lr: 1.0e-5\n"


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


# --- damage: a valid file's bytes -> damaged bytes ------------------------------------------

DEEP = 100_000


def _deep_open(_: bytes) -> bytes:
    return b"[" * DEEP


def _deep_closed(_: bytes) -> bytes:
    return b"[" * DEEP + b"]" * DEEP


def _deep_object(_: bytes) -> bytes:  # the JSON Lines path: a line that opens with "{"
    return b'{"a": ' * DEEP + b"1" + b"}" * DEEP + b"\n"


def _deep_but_readable(_: bytes) -> bytes:  # below Python's recursion limit, above ours
    return b'{"a": ' * 500 + b"1" + b"}" * 500 + b"\n"


def _non_utf8(valid: bytes) -> bytes:
    return valid[:7] + b"\xff\xfe" + valid[7:]


def _latin1(valid: bytes) -> bytes:  # a file saved in the wrong encoding
    return valid.decode().replace("e", "é").encode("latin-1")


def _truncated(valid: bytes) -> bytes:
    return valid[: len(valid) // 2]


def _binary(_: bytes) -> bytes:
    return random.Random(16).randbytes(4096)


def _empty(_: bytes) -> bytes:
    return b""


def _nul_bytes(_: bytes) -> bytes:
    return b"\x00" * 64


def _huge_integer(_: bytes) -> bytes:  # int() refuses more than 4300 digits (ValueError)
    return b'{"question": ' + b"7" * 5000 + b"}\n"


def _bare_value(_: bytes) -> bytes:
    return b"42\n"


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "deep nesting (unclosed)": _deep_open,
    "deep nesting (closed)": _deep_closed,
    "deep object": _deep_object,
    "nesting deeper than 100": _deep_but_readable,
    "non-UTF-8 bytes": _non_utf8,
    "latin-1 text": _latin1,
    "truncated": _truncated,
    "binary noise": _binary,
    "empty": _empty,
    "NUL bytes": _nul_bytes,
    "5000-digit integer": _huge_integer,
    "a bare number": _bare_value,
}
YAML_DAMAGE = {
    "deep nesting (unclosed)": _deep_open,
    "deep nesting (closed)": _deep_closed,
    "non-UTF-8 bytes": _non_utf8,
    "latin-1 text": _latin1,
    "binary noise": _binary,
    "NUL bytes": _nul_bytes,
    "alias bomb": lambda _: (
        b"a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + b"".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n".encode()
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        )
    ),
}


# --- commands: (argv with FILE for the damaged file, where that file goes, its valid bytes) ----


@dataclass(frozen=True)
class Reader:
    argv: list[str]
    file: str  # relative to the case folder
    valid: bytes
    others: dict[str, bytes]  # valid files beside it


READERS: dict[str, Reader] = {
    "data stats tofu": Reader(
        ["data", "stats", "--benchmark", "tofu", "--path", "tofu"],
        "tofu/forget10.json",
        _jsonl([TOFU_ROW] * 3),
        {"tofu/full.json": _jsonl([TOFU_ROW] * 4)},
    ),
    "data stats lume": Reader(
        ["data", "stats", "--benchmark", "lume", "--path", "lume"],
        "lume/forget.jsonl",
        _jsonl([LUME_ROWS["forget"]]),
        {"lume/retain.jsonl": _jsonl([LUME_ROWS["retain"]])},
    ),
    "compare": Reader(
        ["compare", "--reference", "FILE", "--candidate", "good/eval_log_aggregated.json"],
        "bad/eval_log_aggregated.json",
        json.dumps(EVAL_LOG).encode(),
        {"good/eval_log_aggregated.json": json.dumps(EVAL_LOG).encode()},
    ),
    "eval --retain-log": Reader(
        ["eval", "--model", "no-such-model", "--data", "no-such-data", "--out", "out"]
        + ["--retain-log", "FILE"],
        "retain/eval_log_aggregated.json",
        json.dumps(EVAL_LOG).encode(),
        {},
    ),
    "finetune --data": Reader(
        ["finetune", "--model", "no-such-model", "--data", "FILE", "--out", "out"],
        "data/full.json",
        _jsonl([TOFU_ROW] * 3),
        {},
    ),
    "report": Reader(["report", "run"], "run/results.json", json.dumps(RESULTS).encode(), {}),
}


def _earlier_results(root: Path) -> None:
    (root / "earlier").mkdir()
    (root / "earlier" / "results.json").write_text('{"forget/truth_ratio": 0.61}\n')


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_line(code: int, err: str, names: str) -> str:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "internal error" not in lines[0], lines[0]
    assert names in lines[0], f"the message should name {names}: {lines[0]}"
    assert code == 2, (code, lines[0])
    return lines[0]


def _setup(root: Path, reader: Reader, damaged: bytes) -> Path:
    for rel, data in {**reader.others, reader.file: damaged}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    _earlier_results(root)
    return root / reader.file


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("command", list(READERS))
def test_damaged_file_is_one_line_naming_it(capsys, tmp_path, monkeypatch, command, damage):
    reader = READERS[command]
    monkeypatch.chdir(tmp_path)
    bad = _setup(tmp_path, reader, DAMAGE[damage](reader.valid))
    before = snapshot(tmp_path)
    argv = [reader.file if a == "FILE" else a for a in reader.argv]
    code, _, err = _run(argv, capsys)
    _assert_one_line(code, err, bad.name)
    after = snapshot(tmp_path)
    assert {k: after.get(k) for k in before} == before, "a file that was there changed"


@pytest.mark.parametrize("damage", list(YAML_DAMAGE))
def test_damaged_config_yaml_is_one_line_naming_it(capsys, tmp_path, damage):
    path = tmp_path / "run.yaml"
    path.write_bytes(YAML_DAMAGE[damage](CONFIG_YAML.encode()))
    code, _, err = _run(["config", "--config", str(path)], capsys)
    line = _assert_one_line(code, err, str(path))
    if "UTF-8" in damage or "latin" in damage:
        assert "byte " in line


def test_non_utf8_config_names_the_byte(capsys, tmp_path):
    path = tmp_path / "run.yaml"
    path.write_bytes(b"seed: 3\n# caf\xe9\n")
    code, _, err = _run(["config", "--config", str(path)], capsys)
    assert "byte 13" in _assert_one_line(code, err, str(path))


def test_non_utf8_refusals_file_names_file_and_byte(tmp_path):
    # `unlearn` reads the refusals file only after pretraining and finetuning (study/unlearn.py),
    # so the loader is checked here rather than through the CLI.
    from forgetbench.errors import DataError
    from forgetbench.methods.refusals import load_refusals

    path = tmp_path / "refusals.txt"
    path.write_bytes(b"I don't know.\nNo id\xe9a.\n")
    with pytest.raises(DataError, match=r"refusals.txt is not UTF-8 text \(byte 19"):
        load_refusals(path)


# --- the miniature benchmark's files, edited by hand -----------------------------------------


@pytest.fixture(scope="module")
def mini_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mini") / "data"
    assert main(["data", "generate", "--scale", "tiny", "--out", str(out), "--json"]) == 0
    return out


def _edit_first_row(path: Path, edit: Callable[[dict], None]) -> None:
    lines = path.read_text().splitlines()
    row = json.loads(lines[0])
    edit(row)
    path.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n")


def _set(key, value):
    return lambda row: row.__setitem__(key, value)


def _drop(key):
    return lambda row: row.pop(key)


# (file, edit of its first row, what the message must say)
MINI_EDITS = {
    "format row without its prompt": ("formats/mcqa_forget.jsonl", _drop("prompt"), "'prompt'"),
    "format label a string": ("formats/mcqa_forget.jsonl", _set("label", "0"), "'label'"),
    "format label true": ("formats/mcqa_forget.jsonl", _set("label", True), "'label'"),
    "format options of numbers": ("formats/mcqa_forget.jsonl", _set("options", [1, 2]), "options"),
    "cloze author a list": ("formats/cloze_forget.jsonl", _set("author", ["x"]), "'author'"),
    "TOFU answer a number": ("tofu/forget10.json", _set("answer", 7), "'answer'"),
    "TOFU row without question": ("tofu/full.json", _drop("question"), "'question'"),
    "LUME task a number": ("lume/forget.jsonl", _set("task", 1), "'task'"),
    "pretraining kind a list": ("pretrain.jsonl", _set("kind", ["bio"]), "'kind'"),
    "pretraining row without text": ("pretrain.jsonl", _drop("text"), "'text'"),
}


@pytest.mark.parametrize("case", list(MINI_EDITS))
def test_hand_edited_miniature_file_names_file_line_and_field(capsys, tmp_path, mini_folder, case):
    import shutil

    folder = tmp_path / "data"
    shutil.copytree(mini_folder, folder)
    rel, edit, field = MINI_EDITS[case]
    _edit_first_row(folder / rel, edit)
    before = snapshot(tmp_path)
    code, _, err = _run(["data", "stats", "--benchmark", "mini", "--path", str(folder)], capsys)
    line = _assert_one_line(code, err, str(folder / rel))
    assert field in line and ("line 1" in line or "row 0" in line), line
    assert snapshot(tmp_path) == before


MANIFEST_EDITS = {
    "deep nesting": lambda text: "[" * DEEP,
    "not an object": lambda text: "[1, 2]",
    "no files table": lambda text: '{"benchmark": "mini"}',
    "an entry without sha256": lambda text: json.dumps(
        {"files": {"pretrain.jsonl": {"records": 3}}}
    ),
    "a path outside the folder": lambda text: json.dumps(
        {"files": {"../../etc/passwd": {"records": 1, "sha256": "0" * 64}}}
    ),
    "non-UTF-8": lambda text: text[:5] + "\udcff" + text[5:],
    "truncated": lambda text: text[: len(text) // 2],
}


@pytest.mark.parametrize("case", list(MANIFEST_EDITS))
@pytest.mark.parametrize("command", ["stats", "generate"])
def test_damaged_miniature_manifest(capsys, tmp_path, mini_folder, command, case):
    import shutil

    folder = tmp_path / "data"
    shutil.copytree(mini_folder, folder)
    manifest = folder / "manifest.json"
    manifest.write_bytes(
        MANIFEST_EDITS[case](manifest.read_text()).encode("utf-8", "surrogateescape")
    )
    before = snapshot(tmp_path)
    argv = (
        ["data", "stats", "--benchmark", "mini", "--path", str(folder)]
        if command == "stats"
        else ["data", "generate", "--scale", "tiny", "--out", str(folder)]
    )
    code, _, err = _run(argv, capsys)
    _assert_one_line(code, err, str(manifest))
    assert snapshot(tmp_path) == before


# --- huge rows: accepted, counted, in bounded time --------------------------------------------


def test_a_5mb_question_and_a_10mb_row_are_accepted(capsys, tmp_path):
    """Decision: forgetbench puts no size limit on a row. A long question loads like any other
    (training truncates it to `train.max_length` tokens); the reader is linear in the file."""
    tofu, lume = tmp_path / "tofu", tmp_path / "lume"
    tofu.mkdir()
    lume.mkdir()
    big_question = {**TOFU_ROW, "question": "Who? " * 1_000_000}  # 5 MB
    (tofu / "full.json").write_bytes(_jsonl([big_question, TOFU_ROW]))
    big_row = {**LUME_ROWS["forget"], "output": "x" * 10_000_000}  # 10 MB
    (lume / "forget.jsonl").write_bytes(_jsonl([big_row]))
    (lume / "retain.jsonl").write_bytes(_jsonl([LUME_ROWS["retain"]]))
    started = time.perf_counter()
    assert main(["data", "stats", "--benchmark", "tofu", "--path", str(tofu), "--json"]) == 0
    tofu_rows = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rows"]
    assert main(["data", "stats", "--benchmark", "lume", "--path", str(lume), "--json"]) == 0
    lume_rows = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rows"]
    assert time.perf_counter() - started < 20
    assert tofu_rows[0]["questions"] == 2
    assert sum(r["count"] for r in lume_rows if r["split"] == "forget") == 1


def test_a_10mb_field_is_not_quoted_whole_in_an_error(capsys, tmp_path):
    lume = tmp_path / "lume"
    lume.mkdir()
    (lume / "forget.jsonl").write_bytes(_jsonl([{**LUME_ROWS["forget"], "id": "y" * 10_000_000}]))
    (lume / "retain.jsonl").write_bytes(_jsonl([LUME_ROWS["retain"]]))
    code, _, err = _run(["data", "stats", "--benchmark", "lume", "--path", str(lume)], capsys)
    line = _assert_one_line(code, err, "forget.jsonl line 1")
    assert len(line) < 500


def test_eval_names_every_missing_tofu_file_before_loading_the_model(capsys, tmp_path, shared_data):
    # A user holding only TOFU's sample files: forget10_perturbed and retain_perturbed are not
    # among them. Both are named in one sentence, before the model (which does not even exist
    # here) is looked at; a holdout-less folder turns membership inference off with a note.
    data = tmp_path / "tofu"
    data.mkdir()
    for name in ("real_authors_perturbed.jsonl", "world_facts_perturbed.jsonl"):
        (data / name).symlink_to(shared_data / "tofu" / name)
    (data / "forget10.jsonl").symlink_to(shared_data / "tofu" / "forget10_sample.jsonl")
    capsys.readouterr()
    code = main(["eval", "--model", str(tmp_path / "no-model"), "--data", str(data),
                 "--split", "forget10", "--out", str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "forget10_perturbed.json(l), retain_perturbed.json(l)" in err
    assert "no holdout10.json(l)" in err and "membership inference is skipped" in err
    assert "no-model" not in err.split("error:")[1]  # refused before the model was looked at
    assert not (tmp_path / "out").exists()


def test_a_jsonl_holdout_counts_for_membership_inference(tmp_path):
    from forgetbench.data.tofu import split_file

    (tmp_path / "holdout10.jsonl").write_text("{}\n")
    assert split_file(tmp_path, "holdout10") == tmp_path / "holdout10.jsonl"
    assert split_file(tmp_path, "holdout05") is None
