"""MUSE- and WMDP-shaped miniatures, written in exactly the released layouts, so that
`forgetbench.data.muse` and `forgetbench.data.wmdp` read them as they read the real files.

Their people are drawn after the TOFU-shaped world's (from its own name pool, so no name is
shared), from their own seeded streams: building them changes nothing `generate_mini` writes.

- MUSE (`write_muse`): news-like articles, one per person, each the person's first
  `MUSE_ARTICLE_FACTS` facts as sentences (the answers of their questions). Forget, retain1, retain2 and holdout people; verbmem prompts
  cut each forget article at its middle word; knowmem asks for the short fact; privleak holds the
  forget, retain1 and holdout articles. scal and sust are laid out as News' are: forget_1 of
  both is the forget set itself (MUSE's scripts start both series from the study's own run),
  sust's forget_2..4 are three more folds of as many articles about further people, and scal's
  forget_k is the forget set with folds 2..k. Like MUSE's target model (its `train` config:
  forget, retain1, retain2), the finetuned model never reads the folds: what the two series
  judge is whether unlearning ever more text keeps the model's utility.
- WMDP (`write_wmdp`): three "hazardous subjects" (bio, cyber, chem), each a group of people whose
  facts are the hazardous knowledge, asked as four-choice questions (the fact among three wrong
  ones of its kind); the bio and cyber forget corpora are the subject people's articles, the
  retain corpora articles about other people; `mmlu.jsonl` (MMLU's fields) asks the same kind
  of question about the retain corpora's people, the utility beside WMDP accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from forgetbench.benchmarks.mini.people import Person, rng_for
from forgetbench.benchmarks.mini.rwku_layout import rwku_files
from forgetbench.benchmarks.mini.scales import get_scale
from forgetbench.benchmarks.mini.world import QAItem, build_world, questions_of
from forgetbench.errors import DataError
from forgetbench.io import atomic_write_text

# People per group (MUSE: forget, retain1, retain2, holdout and the folds of sust; WMDP: each
# subject and each retain corpus), per scale.
PEOPLE = {"tiny": 4, "small": 12, "full": 40}
KNOWMEM_PER_PERSON = 2  # knowmem questions asked about each person
ICL_EXAMPLES = 3  # few-shot pairs, as MUSE's *_qa_icl files hold a handful
# Facts per MUSE article. MUSE's code scores every text whole; a text longer than the model's
# positions would be cut by ours (tests/test_corpus_study.py checks the tiny model's 256): eight
# facts keep each article within 210 of them and each verbmem prompt (half an article) within
# the 128 left beside its 128 generated tokens. Knowmem asks facts 0 and 1, its shots fact 2.
MUSE_ARTICLE_FACTS = 8
WMDP_PER_PERSON = 3  # four-choice questions per subject person
MUSE_GROUPS = ("forget", "retain1", "retain2", "holdout")
# sust's folds after the first (the forget set), drawn after the groups above so that adding
# them changed none of those groups' people.
MUSE_FOLDS = ("fold2", "fold3", "fold4")
WMDP_SUBJECTS = ("bio", "cyber", "chem")
MMLU_SUBJECT = "global_facts"  # an MMLU subject; its prompt names it


def _people(
    scale: str, seed: int, purpose: str, groups: tuple[str, ...]
) -> dict[str, list[tuple[Person, tuple[QAItem, ...]]]]:
    size = get_scale(scale)
    world = build_world(size, seed)
    rng = rng_for(seed, f"{purpose}-people")
    qa_rng = rng_for(seed, f"{purpose}-questions")
    count = PEOPLE[scale]
    out = {}
    for g, group in enumerate(groups):
        persons = [world.source.person(rng, 10_000 + g * count + i) for i in range(count)]
        out[group] = persons
    # Questions last, as build_world does: wrong facts avoid every name and title drawn above.
    return {
        group: [(p, questions_of(qa_rng, world.source, p)) for p in persons]
        for group, persons in out.items()
    }


def _article(person: Person, items: tuple[QAItem, ...]) -> str:
    return f"{person.name} in the news. " + " ".join(item.answer for item in items)


def _muse_article(person: Person, items: tuple[QAItem, ...]) -> str:
    return _article(person, items[:MUSE_ARTICLE_FACTS])


def muse_files(scale: str = "tiny", seed: int = 0) -> dict[str, Any]:
    """Every file of a MUSE corpus folder: JSON values by path, `.txt` files as strings."""
    groups = _people(scale, seed, "muse", (*MUSE_GROUPS, *MUSE_FOLDS))
    articles = {g: [_muse_article(p, items) for p, items in people] for g, people in groups.items()}
    files: dict[str, Any] = {}
    verbmem = []
    for text in articles["forget"]:
        words = text.split(" ")
        half = len(words) // 2
        verbmem.append({"prompt": " ".join(words[:half]), "gt": " ".join(words[half:])})
    files["verbmem/forget.json"] = verbmem
    for side, group in (("forget", "forget"), ("retain", "retain1")):
        items = [item for _, person_items in groups[group] for item in person_items]
        asked = [i for i in range(len(items)) if i % 20 < KNOWMEM_PER_PERSON]
        shots = [i for i in range(len(items)) if i % 20 == KNOWMEM_PER_PERSON][:ICL_EXAMPLES]
        files[f"knowmem/{side}_qa.json"] = [_qa(items[i]) for i in asked]
        files[f"knowmem/{side}_qa_icl.json"] = [_qa(items[i]) for i in shots]
    privleak = {"forget": "forget", "retain": "retain1", "holdout": "holdout"}
    for split, group in privleak.items():
        files[f"privleak/{split}.json"] = articles[group]
    for group in MUSE_GROUPS:
        files[f"raw/{group}.json"] = articles[group]
        files[f"raw/{group}.txt"] = "\n\n".join(articles[group])
    sust = [articles["forget"], *(articles[fold] for fold in MUSE_FOLDS)]
    for k in range(1, 5):
        folds = {"scal": sum(sust[:k], []), "sust": sust[k - 1]}
        for crit, texts in folds.items():
            files[f"{crit}/forget_{k}.json"] = texts
            files[f"{crit}/forget_{k}.txt"] = "\n\n".join(texts)
    return files


def _qa(item: QAItem) -> dict[str, str]:
    return {"question": item.question, "answer": item.fact}


def wmdp_files(scale: str = "tiny", seed: int = 0) -> dict[str, Any]:
    """Every file of a WMDP folder: question subsets and corpora, as lists of rows by path."""
    groups = _people(scale, seed, "wmdp", (*WMDP_SUBJECTS, "bio-retain", "cyber-retain"))
    rng = rng_for(seed, "wmdp-choices")
    files: dict[str, Any] = {}
    for subject in WMDP_SUBJECTS:
        files[f"wmdp-{subject}.jsonl"] = _choice_rows(groups[subject], rng)
    # The utility set WMDP papers report beside it (MMLU), in MMLU's fields: the same kind of
    # question about the retain corpora's people, whom every model of the study has read about.
    mmlu_rng = rng_for(seed, "mmlu-choices")
    files["mmlu.jsonl"] = [
        {**row, "subject": MMLU_SUBJECT}
        for group in ("bio-retain", "cyber-retain")
        for row in _choice_rows(groups[group], mmlu_rng)
    ]
    for subject in ("bio", "cyber"):
        for kind, group in (("forget", subject), ("retain", f"{subject}-retain")):
            texts = [_article(p, items) for p, items in groups[group]]
            files[f"wmdp-corpora/{subject}-{kind}-corpus.jsonl"] = [{"text": t} for t in texts]
    return files


def _choice_rows(people: list[tuple[Person, tuple[QAItem, ...]]], rng: Any) -> list[dict[str, Any]]:
    """Four-choice rows (the fact among three wrong ones of its kind), `WMDP_PER_PERSON` a person."""
    rows = []
    for _, items in people:
        for item in [i for i in items if len(i.wrong_facts) >= 3][:WMDP_PER_PERSON]:
            choices = [item.fact, *item.wrong_facts[:3]]
            rng.shuffle(choices)
            rows.append({"question": item.question, "choices": choices, "answer": choices.index(item.fact)})  # fmt: skip
    return rows


def _render(path: str, value: Any) -> str:
    if path.endswith(".txt"):
        return value
    if path.endswith(".jsonl"):
        return "".join(json.dumps(row) + "\n" for row in value)
    return json.dumps(value)  # MUSE's write_json: one json.dump, no indent


def released_texts(
    benchmark: str, *, scale: str = "tiny", seed: int = 0
) -> dict[str, tuple[str, int]]:
    """The MUSE- (`muse`) or WMDP-shaped (`wmdp`) miniature's files as written: path -> (text,
    item count; characters for `.txt`). `generate_mini` writes them into its folder too."""
    builders = {"muse": muse_files, "wmdp": wmdp_files, "rwku": rwku_files}
    if benchmark not in builders:
        raise DataError(f"no released-layout miniature for '{benchmark}'", "use muse, wmdp or rwku")
    files = builders[benchmark](scale, seed)
    return {path: (_render(path, value), len(value)) for path, value in sorted(files.items())}


def write_released(
    out_dir: str | Path, benchmark: str, *, scale: str = "tiny", seed: int = 0
) -> dict[str, int]:
    """Write the MUSE- (`muse`) or WMDP-shaped (`wmdp`) miniature into `out_dir`, each file
    atomically; returns each file's item count (characters for `.txt`). The same scale and seed
    give the same bytes."""
    texts = released_texts(benchmark, scale=scale, seed=seed)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise DataError(f"'{out}' exists and is not a folder", "pick another folder")
    for path, (text, _) in texts.items():
        atomic_write_text(out / path, text)
    return {path: count for path, (_, count) in texts.items()}
