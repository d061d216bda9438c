"""The generalisation probes (benchmarks/mini/probes.py): new evaluation files only, each question
answerable from facts the finetuned model was trained on."""

import hashlib

import pytest

from forgetbench.benchmarks.mini import build_files
from forgetbench.benchmarks.mini.generate import render
from forgetbench.benchmarks.mini.probes import PARAPHRASE_QUESTIONS, both_directions
from forgetbench.benchmarks.mini.scales import get_scale
from forgetbench.benchmarks.mini.world import build_world
from forgetbench.data.tofu import PROBE_KINDS

# sha256 over (path, sha256 of the file) of every tiny seed-0 file the generator wrote before the
# probes existed (generator version 2): the models train on these, so the tiny study's numbers
# stand only while they stay byte for byte the same.
BEFORE_PROBES = "5e147903b5e52e80ce509f27ab92f790e7b4956a5d0cb59356b90310241767d0"


def _is_probe(path: str) -> bool:
    return any(path.endswith(f"_{kind}_perturbed.json") for kind in PROBE_KINDS)


@pytest.fixture(scope="module")
def files():
    return build_files(scale="tiny", seed=0)


def test_the_probes_leave_every_other_file_as_it_was(files):
    digest = hashlib.sha256()
    for path in sorted(p for p in files if not _is_probe(p)):
        digest.update(path.encode() + hashlib.sha256(render(files[path]).encode()).digest())
    assert digest.hexdigest() == BEFORE_PROBES
    probes = sorted(p for p in files if _is_probe(p))
    assert len(probes) == 3 * len(PROBE_KINDS)  # four kinds per forget01/05/10


def test_every_probe_asks_what_training_stated_in_words_it_never_used(files):
    world = build_world(get_scale("tiny"), 0)
    trained = {row["question"] for row in files["tofu/full.json"]}
    forget = {p.name for p in world.forget(10)}
    retain = {p.name: p for p in world.retain(10)}
    facts = {p.name: p.facts for p in world.authors}
    for kind in PROBE_KINDS:
        rows = files[f"tofu/forget10_{kind}_perturbed.json"]
        assert 1 <= len(rows) <= 3, kind  # a few per forget author: every evaluation scores them
        for row in rows:
            fact = facts[row["author"]][row["relation"]]
            # The answer ends with the author's true fact; every perturbed one swaps it out.
            # (A sentence may open with the fact, capitalised.)
            fact = fact.lower()
            assert row["answer"].lower().endswith(f"{fact}.")
            assert fact in row["paraphrased_answer"].lower()
            assert len(set(row["perturbed_answer"])) == 5
            assert all(fact not in p.lower() for p in row["perturbed_answer"])
            if kind == "shared":
                # A retain author's own trained question, on a value a forget author holds too.
                assert row["author"] in retain and row["question"] in trained
                assert any(facts[f][row["relation"]].lower() == fact for f in forget)
            else:
                assert row["author"] in forget and row["question"] not in trained
    reverse = files["tofu/forget10_reverse_perturbed.json"]
    assert {r["relation"] for r in reverse} == {"name"}
    assert "Who is the author born in" in reverse[0]["question"]


def test_reverse_probes_use_only_facts_training_states_both_ways():
    # The `name` question asks the author from birthplace, birth date and genre; no other fact
    # is ever a cue for the author, so the others cannot be reversed fairly.
    assert both_directions() == ("birthplace", "birth_date", "genre")
    for relation, template in PARAPHRASE_QUESTIONS.items():
        assert template.endswith("?") and relation != "name"
