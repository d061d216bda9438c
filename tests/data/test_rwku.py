"""RWKU's per-target layout, built by hand in RWKU's field names as its process/data_process.py
writes it, and its Hub configs through `datasets` on a local dataset repo."""

import json
from pathlib import Path

import pytest

from forgetbench.cli.main import main
from forgetbench.data import rwku
from forgetbench.data.rwku import (
    FILES,
    find_target,
    load_rwku,
    load_targets,
    require_rwku,
    rwku_stats,
)
from forgetbench.data.tofu import load_hub_rows
from forgetbench.errors import DataError, UnknownNameError


def probes(name: str, level: int, kinds: list[str]) -> list[dict]:
    return [
        {"query": f"q{i} about {name}?", "answer": f"a{i}", "level": str(level), "type": kind,
         "subject": name}
        for i, kind in enumerate(kinds)
    ]  # fmt: skip


def target_files(name: str, *, size: int) -> dict[str, list]:
    """Every file of one target, `size` setting how many rows each holds (so targets differ)."""
    files = {
        "intro": [{"target": name, "intro": f"Please forget {name}. {name} is famous."}],
        "forget_level1": probes(name, 1, ["fill in the blank"] * size),
        "forget_level2": probes(name, 2, ["simple question"] * (size + 1)),
        "forget_level3": probes(
            name,
            3,
            ["prefix injection", "context hint", "role play"][:size] + ["incontext learning"] * 2,
        ),  # fmt: skip
        "neighbor_level1": probes(name, 1, ["fill in the blank"] * 2),
        "neighbor_level2": probes(name, 2, ["simple question"] * size),
        "forget_mia": [{"text": f"{name} wrote{i}.", "subject": name} for i in range(size + 2)],
        "retain_mia": [{"text": "Paris is big.", "subject": name}],
        "retain_mmlu": [
            {
                "question": "2+2?",
                "choices": ["3", "4", "5", "6"],
                "answer": 1,
                "task": "elementary_mathematics",
                "subject": name,
                "examples": [{"question": "1+1?", "choices": ["2", "3", "4", "5"], "answer": 0}]
                * 2,
            }
        ],  # fmt: skip
        "retain_bbh": [
            {
                "question": "Is 3 odd?",
                "answer": "Yes",
                "task": "parity",
                "cot": "Q: Is 1 odd?\nA: so the answer is Yes.",
                "subject": name,
            }
        ],  # fmt: skip
        "truthful": [
            {
                "question": "Is the earth flat?",
                "subject": name,
                "mc1_targets": {"choices": ["No", "Yes"], "labels": [1, 0]},
                "mc2_targets": {"choices": ["No", "Not at all", "Yes"], "labels": [1, 1, 0]},
            }
        ],  # fmt: skip
        "triviaqa": [
            {"question": "Capital of France?", "answers": ["Paris", "paris"], "subject": name}
        ]
        * size,  # fmt: skip
        "fluency": [{"instruction": "Write a poem.", "subject": name}] * 3,
        "passage": [{"text": f"{name} was born.", "subject": name}],
    }
    for suffix in ("", "_phi"):
        files[f"positive{suffix}"] = [
            {"id": f"{name} {i}", "text": f"{name} is real{i}.", "subject": name, "intro": "x"}
            for i in range(size)
        ]
        files[f"negative{suffix}"] = [{"id": "0", "text": "made up", "subject": name, "intro": "x"}]
        files[f"pair{suffix}"] = [{"id": "0", "prompt": f"Bio of {name}.", "subject": name,
                                   "intro": "x", "response": ["made up", "real"]}]  # fmt: skip
        files[f"reject{suffix}"] = [
            {"instruction": f"Who is {name}?", "input": "", "output": "I do not know.",
             "subject": name, "intro": "x"}
        ] * 4  # fmt: skip
    return files


def write_target(root: Path, number: int, name: str, *, size: int, skip=()) -> Path:
    folder = root / f"{number}_{name.replace(' ', '_')}"
    folder.mkdir(parents=True)
    for stem, rows in target_files(name, size=size).items():
        if stem not in skip:
            (folder / f"{stem}.json").write_text(json.dumps(rows, indent=4))
    return folder


def write_rwku(root: Path) -> Path:
    write_target(root, 1, "Stephen King", size=3)
    write_target(root, 2, "Confucius", size=1)
    return root


def test_every_file_of_the_layout_is_read():
    assert len(FILES) == 1 + 3 + 2 + 2 + 5 + 1 + 8  # intro, probes, MIA, utility, passage, corpora


def test_exact_counts_of_every_file(tmp_path):
    rows = require_rwku(write_rwku(tmp_path / "Target"))
    files = {r["file"]: r for r in rows if not r["kind"]}
    assert len(files) == len(FILES)
    assert files["intro.json"]["items"] == 2 and files["intro.json"]["targets"] == 2
    assert files["forget_level1.json"]["items"] == 3 + 1
    assert files["forget_level2.json"]["items"] == 4 + 2
    assert files["forget_level3.json"]["items"] == 5 + 3
    assert files["neighbor_level2.json"]["items"] == 3 + 1
    assert files["forget_mia.json"]["items"] == 5 + 3
    assert files["triviaqa.json"]["items"] == 3 + 1
    assert files["reject_phi.json"]["items"] == 8
    assert files["retain_mia.json"]["characters"] == 2 * len("Paris is big.")
    kinds = {r["kind"]: r["items"] for r in rows if r["kind"]}
    assert kinds == {"prefix injection": 2, "context hint": 1, "role play": 1,
                     "incontext learning": 4}  # fmt: skip
    # The folder holding Target/ (data/RWKU) and one target's folder are read alike.
    assert require_rwku(tmp_path) == rows
    one = {r["file"]: r["items"] for r in require_rwku(tmp_path / "Target" / "2_Confucius")
           if not r["kind"]}  # fmt: skip
    assert one["forget_level3.json"] == 3 and one["intro.json"] == 1


def test_loaders_read_typed_records(tmp_path):
    root = write_rwku(tmp_path)
    king, confucius = load_targets(root)
    assert (king.name, king.number, confucius.number) == ("Stephen King", 1, 2)
    assert king.intro == "Please forget Stephen King. Stephen King is famous."
    assert find_target(root, "2_Confucius") == find_target(root, "Confucius") == confucius
    level3 = load_rwku(root, "Stephen King", "forget_level3")
    assert [p.kind for p in level3] == ["prefix injection", "context hint", "role play",
                                        "incontext learning", "incontext learning"]  # fmt: skip
    assert (level3[1].level, level3[1].split, level3[1].answer, level3[1].index) == (
        3, "forget", "a1", 1)  # fmt: skip
    assert load_rwku(root, king, "neighbor_level1")[0].split == "neighbor"
    (mmlu,) = load_rwku(root, king, "retain_mmlu")
    assert (mmlu.label, mmlu.options[mmlu.label], mmlu.task) == (1, "4", "elementary_mathematics")
    assert len(mmlu.shots) == 2 and mmlu.shots[0].options[mmlu.shots[0].label] == "2"
    (truthful,) = load_rwku(root, king, "truthful")
    assert truthful.mc2_labels == (1, 1, 0) and truthful.mc1_choices[0] == "No"
    assert load_rwku(root, king, "triviaqa")[0].answers == ("Paris", "paris")
    assert load_rwku(root, king, "fluency") == ["Write a poem."] * 3
    (pair,) = load_rwku(root, king, "pair_phi")
    assert (pair.chosen, pair.rejected) == ("made up", "real")
    refusal = load_rwku(root, king, "reject")[0]
    assert (refusal.question, refusal.answer) == ("Who is Stephen King?", "I do not know.")
    assert load_rwku(root, king, "positive")[2].text == "Stephen King is real2."
    (bbh,) = load_rwku(root, confucius, "retain_bbh")
    assert (bbh.answer, bbh.task) == ("Yes", "parity")
    # The Hub's own Target folders hold intro.json as an object, not a one-row array.
    (root / "1_Stephen_King" / "intro.json").write_text(json.dumps({"target": "Stephen King",
                                                                     "intro": "x"}))  # fmt: skip
    assert load_targets(root / "1_Stephen_King")[0].intro == "x"
    with pytest.raises(UnknownNameError, match="did you mean 'forget_level3'"):
        load_rwku(root, king, "forget_level4")
    with pytest.raises(UnknownNameError, match="unknown RWKU target 'Stephen Kong'"):
        find_target(root, "Stephen Kong")


def _write(path: Path, value) -> None:
    path.write_text(json.dumps(value))


def test_one_sentence_names_every_missing_and_malformed_file(tmp_path):
    root = write_rwku(tmp_path)
    king, confucius = root / "1_Stephen_King", root / "2_Confucius"
    (king / "retain_bbh.json").unlink()
    (confucius / "pair_phi.json").unlink()  # the Phi-3 corpora are there, so all are expected
    rows = target_files("Stephen King", size=1)
    _write(king / "forget_level2.json", [{**rows["forget_level2"][0], "level": "3"}])
    _write(king / "neighbor_level1.json", [{**rows["neighbor_level1"][0], "subject": "Bruce Lee"}])
    _write(king / "retain_mmlu.json", [{**rows["retain_mmlu"][0], "answer": 4}])
    _write(confucius / "pair.json", [{"prompt": "p", "response": ["only one"]}])
    (confucius / "truthful.json").write_text("")
    _write(confucius / "forget_mia.json", {"text": "not a list"})
    found, problems = rwku_stats(root)
    assert {r["file"]: r["targets"] for r in found}["forget_level2.json"] == 1  # Confucius's
    with pytest.raises(DataError) as caught:
        require_rwku(root)
    message = caught.value.what
    assert "\n" not in message
    assert "missing 1_Stephen_King/retain_bbh.json, 2_Confucius/pair_phi.json" in message
    assert "1_Stephen_King/forget_level2.json (item 0: level '3' in the level-2 file)" in message
    assert (
        "1_Stephen_King/neighbor_level1.json (item 0: subject 'Bruce Lee' is not the target "
        "'Stephen King')"
    ) in message
    assert "retain_mmlu.json (item 0: field 'answer' must index one of the 4 choices, got 4)" in (
        message
    )
    assert "2_Confucius/pair.json (item 0: field 'response' must be [chosen, rejected])" in message
    assert "2_Confucius/truthful.json (is empty)" in message
    assert "2_Confucius/forget_mia.json (expected a JSON array, got dict)" in message
    # A target folder whose intro.json is gone is named; its other files are not read.
    (confucius / "intro.json").unlink()
    assert "missing 1_Stephen_King/retain_bbh.json, 2_Confucius/intro.json" in "; ".join(
        rwku_stats(root)[1]
    )


def test_corpora_are_optional_but_come_together(tmp_path):
    root = tmp_path / "Target"
    corpora = [s for s, f in FILES.items() if f.group != "eval"]
    write_target(root, 1, "Stephen King", size=1, skip=corpora)
    assert rwku_stats(root)[1] == []  # evaluation only: no corpus expected
    write_target(root, 2, "Confucius", size=1, skip=["forget_level1", *corpora[1:]])
    # An evaluation file is missing; Confucius's passage.json makes Stephen King's expected.
    with pytest.raises(DataError, match=r"missing 1_Stephen_King/passage.json, "
                       r"2_Confucius/forget_level1.json —"):  # fmt: skip
        require_rwku(root)


def test_cli_counts_then_fails_on_problems(tmp_path, capsys):
    root = write_rwku(tmp_path)
    argv = ["data", "stats", "--benchmark", "rwku", "--path", str(root)]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    items = {r["file"]: r["items"] for r in out["rows"] if not r["kind"]}
    assert items["forget_level3.json"] == 8 and items["fluency.json"] == 6
    (root / "2_Confucius" / "fluency.json").unlink()
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "forget_level1.json" in out  # what was found is still counted
    assert err.count("\n") == 1 and "missing 2_Confucius/fluency.json" in err
    assert main([*argv[:-1], str(tmp_path / "no")]) == 2
    assert "RWKU folder" in capsys.readouterr().err
    assert main([*argv[:-1], str(tmp_path / "1_Stephen_King" / "intro.json")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_a_folder_without_targets(tmp_path):
    (tmp_path / "notes").mkdir()
    assert rwku_stats(tmp_path)[1] == [
        f"no target folder ({{N}}_{{Name}} with intro.json) in {tmp_path}"
    ]
    with pytest.raises(DataError, match="holds no target folder"):
        load_targets(tmp_path)


def test_the_hub_configs_through_datasets_on_a_local_dataset_repo(tmp_path, monkeypatch):
    # jinzhuoran/RWKU keeps each config's rows for all 200 targets in one file of All/; a local
    # dataset repo with that card exercises the same datasets.load_dataset(id, config, split).
    repo = tmp_path / "RWKU"
    (repo / "All").mkdir(parents=True)
    king, bruce = target_files("Stephen King", size=3), target_files("Bruce Lee", size=1)
    card = "---\nconfigs:\n"
    for stem in ("intro", "forget_level3", "retain_mmlu", "pair"):
        entry = FILES[stem]
        # Each config's JSON holds every target's rows; intro.json holds the bare objects.
        _write(repo / "All" / f"{stem}.json", king[stem] + bruce[stem])
        card += f"- config_name: {entry.config}\n  data_files:\n  - split: {entry.split}\n"
        card += f"    path: All/{stem}.json\n"
    (repo / "README.md").write_text(card + "---\n")
    monkeypatch.setattr(
        rwku, "load_hub_rows", lambda _, config, split: load_hub_rows(str(repo), config, split)
    )
    targets = load_targets("jinzhuoran/RWKU")
    assert [(t.name, t.number, t.folder) for t in targets] == [
        ("Stephen King", 1, None), ("Bruce Lee", 2, None)]  # fmt: skip
    level3 = load_rwku("jinzhuoran/RWKU", "Bruce Lee", "forget_level3")
    assert [p.kind for p in level3] == ["prefix injection", "incontext learning",
                                        "incontext learning"]  # fmt: skip
    assert all(p.subject == "Bruce Lee" for p in level3)
    (mmlu,) = load_rwku("jinzhuoran/RWKU", "Stephen King", "retain_mmlu")
    assert mmlu.label == 1 and len(mmlu.shots) == 2
    assert load_rwku("jinzhuoran/RWKU", "Stephen King", "pair")[0].rejected == "real"
    monkeypatch.undo()
    with pytest.raises(DataError, match="could not load config 'forget_target' of dataset"):
        load_targets("jinzhuoran/RWKU")
