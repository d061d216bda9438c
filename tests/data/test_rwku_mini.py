"""The RWKU miniature (`benchmarks/mini/rwku_layout.py`): RWKU's per-target layout, read by the
RWKU loader as it reads RWKU's own folders, its targets people the base model was pretrained on,
and every probe, neighbour and MIA passage drawn from what the pretraining corpus says."""

import json

from forgetbench.benchmarks.mini.corpus import world_background, world_corpus
from forgetbench.benchmarks.mini.released import released_texts, write_released
from forgetbench.benchmarks.mini.rwku_layout import ATTACK_TYPES, rwku_targets
from forgetbench.benchmarks.mini.scales import get_scale
from forgetbench.benchmarks.mini.world import build_world
from forgetbench.data.rwku import load_rwku, load_targets, require_rwku


def test_the_miniature_is_rwkus_layout_with_exact_counts(tmp_path):
    counts = write_released(tmp_path / "Target", "rwku", scale="tiny", seed=0)
    assert sorted({path.split("/")[0] for path in counts}) == [
        "1_Eilidh_Rosenqvist", "2_Leila_Mansour", "pretraining.jsonl"
    ]  # fmt: skip
    # A biography and 4 questions of each of the 10 people asked of (the 2 targets, their 2
    # neighbours each and the retain members: the two targets' sets overlap) and of 4 more.
    assert counts["pretraining.jsonl"] == 5 * 14
    rows = {(r["file"], r["kind"]): r for r in require_rwku(tmp_path)}  # nothing named bad
    # Per target 12 fill-in-the-blank probes and 12 questions, 2 of each of the 9 attacks.
    assert rows["forget_level1.json", ""]["items"] == 24
    assert rows["forget_level2.json", ""]["items"] == 24
    assert rows["forget_level3.json", ""]["items"] == 36
    assert {kind for _, kind in rows if kind} == set(ATTACK_TYPES)
    assert all(rows["forget_level3.json", k]["items"] == 4 for k in ATTACK_TYPES)
    assert (
        rows["neighbor_level1.json", ""]["items"] == rows["neighbor_level2.json", ""]["items"] == 16
    )
    assert rows["forget_mia.json", ""]["items"] == rows["retain_mia.json", ""]["items"] == 8
    for stem in ("passage", "positive", "negative", "pair", "reject"):  # RWKU's forget corpora
        assert rows[f"{stem}.json", ""]["targets"] == 2
    # The same scale and seed: the same bytes.
    assert released_texts("rwku", scale="tiny", seed=0) == released_texts(
        "rwku", scale="tiny", seed=0
    )


def test_targets_are_pretraining_people_and_probes_say_what_the_corpus_says(tmp_path):
    write_released(tmp_path / "Target", "rwku", scale="tiny", seed=0)
    size = get_scale("tiny")
    world = build_world(size, 0)
    corpus = world_corpus(world, *world_background(size, 0), 0)
    targets = load_targets(tmp_path)
    assert [t.name for t in targets] == [p.name for p in world.pretrain_people[:2]]
    assert [p.name for p in rwku_targets("tiny", 0)] == [t.name for t in targets]
    for target in targets:
        (bio,) = [
            r["text"] for r in corpus if r["kind"] == "people_bio" and target.name in r["text"]
        ]
        level1 = load_rwku(tmp_path, target, "forget_level1")
        # Each blank is about a fact of the biography; most are its very sentences with the fact
        # taken out (one opening with its fact is asked in a template's words instead).
        for probe in level1:
            assert probe.query.count("___") == 1 and probe.answer in bio
        assert sum(p.query.replace("___", p.answer) in bio for p in level1) >= 8
        # The forget-member passages are the biography the base model read, whole.
        fm = [r.text for r in load_rwku(tmp_path, target, "forget_mia")]
        assert " ".join(fm) == bio
        # Neighbours are other people, retain members other people's pretraining text.
        neighbours = load_rwku(tmp_path, target, "neighbor_level2")
        assert all(target.name not in p.query for p in neighbours)
        for text in (r.text for r in load_rwku(tmp_path, target, "retain_mia")):
            assert target.name not in text and any(text in r["text"] for r in corpus)
        reverse = [
            p for p in load_rwku(tmp_path, target, "forget_level3") if p.kind == "reverse query"
        ]
        assert reverse and all(p.answer == target.name for p in reverse)
    # Beside the folders, the pretraining rows of every person they ask about, as the corpus has
    # them: the targets' biographies and question-answer rows among them.
    knowledge = [json.loads(line) for line in (tmp_path / "Target/pretraining.jsonl").open()]
    rows = [{k: v for k, v in r.items() if k not in ("subject", "role")} for r in knowledge]
    assert all(row in corpus for row in rows)
    assert {r["subject"] for r in knowledge} >= {t.name for t in targets}
    # Unlearning's retain set is the people no probe or MIA passage is about.
    asked = {p.query for t in targets for stem in ("forget_level1", "forget_level2",
             "neighbor_level1", "neighbor_level2") for p in load_rwku(tmp_path, t, stem)}  # fmt: skip
    members = " ".join(r.text for t in targets for r in load_rwku(tmp_path, t, "retain_mia"))
    kept = {r["subject"] for r in knowledge if r["role"] == "retain"}
    assert len(kept) == 4
    assert not any(name in text for name in kept for text in [*asked, members])
    first = json.loads((targets[0].folder / "pair.json").read_text())[0]
    chosen, rejected = first["response"]
    assert first["prompt"] and rejected != chosen  # DPO: the made-up answer preferred
