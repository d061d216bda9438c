"""WMDP's released files, built by hand: questions as .jsonl, .json and the Hub's parquet, and
the corpora."""

import json
import shutil
from pathlib import Path

import pytest

from forgetbench.cli.main import main
from forgetbench.data import wmdp
from forgetbench.data.tofu import load_hub_rows
from forgetbench.data.wmdp import (
    load_wmdp,
    load_wmdp_corpus,
    require_wmdp,
    wmdp_notes,
    wmdp_stats,
)
from forgetbench.errors import DataError


def question(n: int) -> dict:
    return {"question": f"Q{n}?", "choices": ["w", "x", "y", "z"], "answer": n % 4}


def write_wmdp(root: Path) -> Path:
    """bio as JSON Lines, cyber as a JSON array, chem as the Hub's parquet; the four corpora."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root.mkdir(parents=True, exist_ok=True)
    (root / "wmdp-bio.jsonl").write_text("".join(json.dumps(question(n)) + "\n" for n in range(5)))
    (root / "wmdp-cyber.json").write_text(json.dumps([question(n) for n in range(7)]))
    (root / "wmdp-chem").mkdir()
    pq.write_table(
        pa.Table.from_pylist([question(n) for n in range(3)]),
        root / "wmdp-chem" / "test-00000-of-00001.parquet",
    )
    (root / "wmdp-corpora").mkdir()
    for i, name in enumerate(wmdp.CORPORA):
        rows = [{"text": f"{name} {j}"} for j in range(i + 1)]
        (root / "wmdp-corpora" / f"{name}-corpus.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows)
        )
    return root


def test_exact_counts_in_each_file_form(tmp_path):
    rows = {r["set"]: r for r in require_wmdp(write_wmdp(tmp_path))}
    assert {s: rows[s]["items"] for s in wmdp.SUBSETS} == {
        "wmdp-bio": 5,
        "wmdp-cyber": 7,
        "wmdp-chem": 3,
    }
    assert rows["wmdp-chem"]["file"] == "wmdp-chem/test-00000-of-00001.parquet"
    assert [rows[c]["items"] for c in wmdp.CORPORA] == [1, 2, 3, 4]
    records = load_wmdp(tmp_path, "wmdp-cyber")
    assert records[6].prompt == "Q6?" and records[6].label == 2
    assert records[6].options == ("w", "x", "y", "z") and records[6].split == "wmdp-cyber"
    assert load_wmdp_corpus(tmp_path, "cyber-retain") == [f"cyber-retain {j}" for j in range(4)]
    # Questions alone are a whole WMDP folder (the corpora serve unlearning only).
    for file in (tmp_path / "wmdp-corpora").iterdir():
        file.unlink()
    assert wmdp_stats(tmp_path)[1] == []


def test_one_sentence_names_every_missing_and_malformed_file(tmp_path):
    root = write_wmdp(tmp_path)
    (root / "wmdp-cyber.json").unlink()
    (root / "wmdp-corpora" / "bio-forget-corpus.jsonl").unlink()
    bad = question(0) | {"choices": ["only", "three", "options"]}
    (root / "wmdp-bio.jsonl").write_text(json.dumps(question(1)) + "\n" + json.dumps(bad) + "\n")
    (root / "wmdp-chem" / "test-00000-of-00001.parquet").write_bytes(b"not parquet")
    (root / "wmdp-corpora" / "cyber-forget-corpus.jsonl").write_text('{"title": "no text"}\n')
    with pytest.raises(DataError) as caught:
        require_wmdp(root)
    message = caught.value.what
    assert "\n" not in message
    # A subset missing is no problem (many studies report bio and cyber only); a corpus is.
    assert "missing wmdp-corpora/bio-forget-corpus.jsonl;" in message and "cyber (" not in message
    assert "wmdp-bio.jsonl (row 1: field 'choices' has 3 options, not 4)" in message
    assert "wmdp-chem/test-00000-of-00001.parquet (is not a readable parquet file" in message
    assert "cyber-forget-corpus.jsonl (row 0: missing field 'text')" in message


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (question(0) | {"answer": 4}, "field 'answer' must be an option index 0-3, got 4"),
        (question(0) | {"answer": True}, "got True"),
        (question(0) | {"choices": "abcd"}, "field 'choices' must be a list of 4 strings"),
        ({"choices": ["a", "b", "c", "d"], "answer": 0}, "missing field 'question'"),
    ],
)
def test_malformed_questions(tmp_path, row, message):
    (tmp_path / "wmdp-bio.json").write_text(json.dumps([row]))
    with pytest.raises(DataError, match=message):
        load_wmdp(tmp_path, "wmdp-bio")


def test_cli_stats(tmp_path, capsys):
    root = write_wmdp(tmp_path)
    assert main(["data", "stats", "--benchmark", "wmdp", "--path", str(root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert sum(r["items"] for r in out["rows"]) == 5 + 7 + 3 + 1 + 2 + 3 + 4
    # TOFU's files are no WMDP folder.
    tofu = tmp_path / "tofu"
    tofu.mkdir()
    (tofu / "forget10.json").write_text(json.dumps([{"question": "q", "answer": "a"}]))
    assert main(["data", "stats", "--benchmark", "wmdp", "--path", str(tofu)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and (
        "missing every question subset (wmdp-bio, wmdp-cyber, wmdp-chem: at least one)" in err
    )


def test_a_folder_without_chem_is_scored_on_the_subsets_it_has(tmp_path, capsys):
    root = write_wmdp(tmp_path)
    shutil.rmtree(root / "wmdp-chem")
    assert [r["set"] for r in require_wmdp(root) if r["kind"] == "questions"] == [
        "wmdp-bio",
        "wmdp-cyber",
    ]
    (note,) = wmdp_notes(root)
    assert note == (
        f"WMDP folder {root} has no wmdp-chem: scoring wmdp-bio and wmdp-cyber only (wmdp/all "
        "is their accuracy)"
    )
    # eval says so before the model loads (here it cannot: 'no/model' is not there).
    argv = ["eval", "--benchmark", "wmdp", "--model", str(tmp_path / "no/model"), "--data",
            str(root), "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 2
    first, error = capsys.readouterr().err.strip().splitlines()
    assert first == f"note: {note}" and "no/model" in error
    assert wmdp_notes(write_wmdp(tmp_path / "whole")) == []


def test_the_hub_path_through_datasets(tmp_path, monkeypatch):
    # cais/wmdp keeps each subset as a config with a `test` split of parquet files.
    repo = write_wmdp(tmp_path / "wmdp")
    (repo / "README.md").write_text(
        "---\nconfigs:\n- config_name: wmdp-chem\n  data_files:\n  - split: test\n"
        "    path: wmdp-chem/test-00000-of-00001.parquet\n---\n"
    )
    monkeypatch.setattr(
        wmdp, "load_hub_rows", lambda _, config, split: load_hub_rows(str(repo), config, split)
    )
    records = load_wmdp("cais/wmdp", "wmdp-chem")
    assert [r.label for r in records] == [0, 1, 2] and records[0].options[3] == "z"
    monkeypatch.undo()
    with pytest.raises(DataError, match="could not load config 'wmdp-bio' split 'test'"):
        load_wmdp("cais/wmdp", "wmdp-bio")
