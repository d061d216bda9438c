"""MUSE's released layout, built by hand as the MUSE authors' load_data.py writes it."""

import json
from pathlib import Path

import pytest

from forgetbench.cli.main import main
from forgetbench.data import muse
from forgetbench.data.muse import (
    load_knowmem,
    load_muse_texts,
    load_raw_text,
    load_verbmem,
    muse_stats,
    require_muse,
)
from forgetbench.data.tofu import load_hub_rows
from forgetbench.errors import DataError, UnknownNameError

QA = {
    "forget_qa": [{"question": "Who won?", "answer": "Ada"}] * 3,
    "retain_qa": [{"question": "Where?", "answer": "Paris"}] * 2,
    "forget_qa_icl": [{"question": "When?", "answer": "1990"}] * 4,
    "retain_qa_icl": [{"question": "Why?", "answer": "rain"}],
}
DOCS = {
    "privleak": {"forget": ["f1", "f2"], "retain": ["r1"], "holdout": ["h1", "h2", "h3"]},
    "raw": {"forget": ["a", "b"], "retain1": ["c"], "retain2": ["d", "e"], "holdout": ["g"]},
}


def write_news(root: Path, *, folds: bool = True) -> Path:
    """A News folder of the released layout: every file, with counts chosen to differ."""
    for split, rows in QA.items():
        _write(root / "knowmem" / f"{split}.json", rows)
    _write(root / "verbmem" / "forget.json", [{"prompt": "Once", "gt": "upon a time"}] * 5)
    for subset, splits in DOCS.items():
        for split, texts in splits.items():
            _write(root / subset / f"{split}.json", texts)
    for split, texts in DOCS["raw"].items():
        (root / "raw" / f"{split}.txt").write_text("\n\n".join(texts))
    if folds:
        for crit in ("scal", "sust"):
            for n in range(1, 5):
                _write(root / crit / f"forget_{n}.json", [f"{crit}{n}"] * n)
                (root / crit / f"forget_{n}.txt").write_text("\n\n".join([f"{crit}{n}"] * n))
    return root


def _write(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))


def test_exact_counts_of_every_file(tmp_path):
    rows = {r["file"]: r for r in require_muse(write_news(tmp_path))}
    assert (
        len(rows) == 4 + 1 + 3 + 4 + 4 + 8 + 8
    )  # knowmem, verbmem, privleak, raw(.json, .txt), folds
    assert rows["knowmem/forget_qa_icl.json"]["items"] == 4
    assert rows["knowmem/retain_qa.json"]["items"] == 2
    assert rows["verbmem/forget.json"]["items"] == 5
    assert rows["privleak/holdout.json"]["items"] == 3
    assert rows["raw/retain2.json"]["items"] == 2
    assert rows["raw/retain2.txt"]["characters"] == len("d\n\ne")
    assert rows["scal/forget_3.json"]["items"] == 3 and rows["sust/forget_4.json"]["items"] == 4
    # Books has no scal/sust: not a problem.
    assert muse_stats(write_news(tmp_path / "books", folds=False))[1] == []


def test_loaders_read_records(tmp_path):
    root = write_news(tmp_path)
    (qa,) = load_knowmem(root, "retain_qa_icl")
    assert (qa.question, qa.answer, qa.split) == ("Why?", "rain", "retain_qa_icl")
    verbmem = load_verbmem(root)
    assert (
        len(verbmem) == 5 and verbmem[4].prefix == "Once" and verbmem[4].completion == "upon a time"
    )
    assert load_muse_texts(root, "privleak", "holdout") == ["h1", "h2", "h3"]
    assert load_raw_text(root, "raw", "retain2") == "d\n\ne"
    # MUSE's training code also reads documents as {"text": ...} objects.
    _write(root / "raw" / "forget.json", [{"text": "x"}, {"text": "y"}])
    assert load_muse_texts(root, "raw", "forget") == ["x", "y"]
    with pytest.raises(UnknownNameError, match="did you mean 'retain2'"):
        load_muse_texts(root, "raw", "retain3")


def test_one_sentence_names_every_missing_and_malformed_file(tmp_path):
    root = write_news(tmp_path)
    (root / "knowmem" / "retain_qa.json").unlink()
    (root / "scal" / "forget_2.json").unlink()  # scal is there, so all four folds are expected
    _write(root / "verbmem" / "forget.json", [{"prompt": "a", "gt": "b"}, {"prompt": "c"}])
    (root / "privleak" / "retain.json").write_text("")
    _write(root / "raw" / "holdout.json", {"text": "not a list"})
    rows, problems = muse_stats(root)
    assert "verbmem/forget.json" not in {r["file"] for r in rows}
    assert rows[0]["file"] == "knowmem/forget_qa.json"
    with pytest.raises(DataError) as caught:
        require_muse(root)
    message = caught.value.what
    assert "\n" not in message
    assert "missing knowmem/retain_qa.json, scal/forget_2.json" in message
    assert "verbmem/forget.json (item 1: missing field 'gt')" in message
    assert "privleak/retain.json (is empty)" in message
    assert "raw/holdout.json (expected a JSON array, got dict)" in message


def test_cli_counts_then_fails_on_problems(tmp_path, capsys):
    root = write_news(tmp_path)
    assert main(["data", "stats", "--benchmark", "muse", "--path", str(root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert sum(r["items"] or 0 for r in out["rows"]) == 10 + 5 + 6 + 6 + 2 * 10
    (root / "raw" / "forget.json").unlink()
    assert main(["data", "stats", "--benchmark", "muse", "--path", str(root)]) == 2
    out, err = capsys.readouterr()
    assert "knowmem/forget_qa.json" in out  # what was found is still counted
    assert err.count("\n") == 1 and "missing raw/forget.json" in err
    assert main(["data", "stats", "--benchmark", "muse", "--path", str(tmp_path / "no")]) == 2
    assert "MUSE folder" in capsys.readouterr().err
    file = root / "knowmem" / "forget_qa.json"
    assert main(["data", "stats", "--benchmark", "muse", "--path", str(file)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_tofu_files_are_not_a_muse_folder(tmp_path):
    _write(tmp_path / "forget10.json", [{"question": "q", "answer": "a"}])
    with pytest.raises(DataError, match="missing knowmem/forget_qa.json, .*verbmem/forget.json"):
        require_muse(tmp_path)


def test_the_hub_path_through_datasets_on_a_local_dataset_repo(tmp_path, monkeypatch):
    # `muse-bench/MUSE-News` keeps each folder as a config and each file as a split; a local
    # dataset repo with that card exercises the same datasets.load_dataset(id, config, split).
    repo = tmp_path / "MUSE-News"
    for split, rows in QA.items():
        (repo / "knowmem").mkdir(parents=True, exist_ok=True)
        (repo / "knowmem" / f"{split}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows)
        )
    (repo / "privleak").mkdir()
    (repo / "privleak" / "holdout.jsonl").write_text(
        "".join(json.dumps({"text": t}) + "\n" for t in ["h1", "h2"])
    )
    card = "---\nconfigs:\n- config_name: knowmem\n  data_files:\n"
    card += "".join(f"  - split: {s}\n    path: knowmem/{s}.jsonl\n" for s in QA)
    card += "- config_name: privleak\n  data_files:\n  - split: holdout\n    path: privleak/holdout.jsonl\n---\n"
    (repo / "README.md").write_text(card)
    # The id resolves to this repo; everything after it is datasets' own loading.
    monkeypatch.setattr(
        muse, "load_hub_rows", lambda _, config, split: load_hub_rows(str(repo), config, split)
    )
    records = load_knowmem("muse-bench/MUSE-News", "forget_qa_icl")
    assert len(records) == 4 and records[3].answer == "1990"
    assert load_muse_texts("muse-bench/MUSE-News", "privleak", "holdout") == ["h1", "h2"]
    monkeypatch.undo()
    with pytest.raises(
        DataError,
        match="could not load config 'knowmem' split 'forget_qa' of dataset 'muse-bench/MUSE-News'",
    ):
        load_knowmem("muse-bench/MUSE-News", "forget_qa")
