"""LUME-shaped tasks (Ramakrishna et al., 2025): Task1 template stories, Task2 PII biographies.

Written as `lume/forget.jsonl`, `lume/retain.jsonl` (what `forgetbench.data.lume.load_lume`
reads) and `lume/holdout.jsonl` (documents of the same kind that no model is trained on: the
non-members for membership inference, rebuilt from their `sc` prompts). Rows are LUME's `{id, input, output, task}`; each
document gives one regurgitation prompt (`<doc>sc1`: the text up to a word boundary in its second
half -> the rest) and knowledge prompts (`<doc>qa0`, `qa1`, ...: question -> short answer).
As in LUME, a knowledge answer may be a reformatting of the text (an SSN asked as digits only).
"""

from __future__ import annotations

import random
from typing import Any

from forgetbench.benchmarks.mini.people import PeopleSource, rng_for
from forgetbench.benchmarks.mini.tables import people, stories

Rows = list[dict[str, Any]]
LUME_SPLITS = ("forget", "retain", "holdout")
STORY_QUESTIONS = 2  # LUME's stories ask one; two give the knowledge metric more items


def lume_files(seed: int, docs_per_task: int, source: PeopleSource) -> dict[str, Rows]:
    files = {}
    for split in LUME_SPLITS:
        rng = rng_for(seed, f"lume-{split}")
        rows: Rows = []
        for _ in range(docs_per_task):
            text, qa = _story(rng)
            rows += _prompts(rng, text, qa, "Task1")
        for _ in range(docs_per_task):
            text, qa = _biography(rng, source)
            rows += _prompts(rng, text, qa, "Task2")
        files[f"lume/{split}.jsonl"] = rows
    return files


def _prompts(rng: random.Random, text: str, qa: list[tuple[str, str]], task: str) -> Rows:
    doc = _doc_id(rng)
    words = text.split(" ")
    # The cut lies in the second half, so the prompt carries most of the document (as LUME's do).
    cut = rng.randint((len(words) + 1) // 2, max((len(words) * 3) // 4, (len(words) + 1) // 2))
    rows = [
        {
            "id": f"{doc}sc1",
            "input": " ".join(words[:cut]),
            "output": " ".join(words[cut:]),
            "task": task,
        }
    ]
    rows += [
        {"id": f"{doc}qa{n}", "input": q, "output": a, "task": task} for n, (q, a) in enumerate(qa)
    ]
    return rows


def _doc_id(rng: random.Random) -> str:
    """A UUID-shaped hex id like LUME's; hex never contains "sc"/"qa", so the suffix is unambiguous."""
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _story(rng: random.Random) -> tuple[str, list[tuple[str, str]]]:
    a, b, c = rng.sample(people.FIRST_NAMES_FEMALE + people.FIRST_NAMES_MALE, 3)
    role_a, role_b, role_c = rng.sample(stories.ROLES, 3)
    landmark, landmark2 = rng.sample(stories.LANDMARKS, 2)
    obj = rng.choice(stories.OBJECTS)
    town = rng.choice(stories.TOWN_HEADS) + rng.choice(stories.TOWN_TAILS)
    values = {
        "A": a,
        "B": b,
        "C": c,
        "role_a": role_a,
        "role_b": role_b,
        "role_c": role_c,
        "town": town,
        "adjective": rng.choice(stories.TOWN_ADJECTIVES),
        "landmark": landmark,
        "landmark2": landmark2,
        "season": rng.choice(stories.SEASONS),
        "object": obj,
        "object_short": "the " + obj.split(" ", 1)[1],
        "hiding_place": rng.choice(stories.HIDING_PLACES),
        "goal": rng.choice(stories.GOALS),
        "terrain": rng.choice(stories.TERRAINS),
        "warning": rng.choice(stories.WARNINGS),
        "ending": rng.choice(stories.ENDINGS).format(landmark=landmark),
    }
    sentences = [rng.choice(slot).format(**values) for slot in stories.STORY_SLOTS]
    questions = [
        (f"In the story, in which town does {a} live?", town),
        (f"In the story, who is the {role_b} that {a} turns to?", b),
        (f"What did {a} find {values['hiding_place']}?", obj),
        (f"In the story, who warned {a} and {b}?", c),
    ]
    return " ".join(sentences), rng.sample(questions, STORY_QUESTIONS)


def _biography(rng: random.Random, source: PeopleSource) -> tuple[str, list[tuple[str, str]]]:
    gender = rng.choice(("male", "female"))
    name = source.name(rng, gender)
    first, last = name.split(" ")
    year, month, day = rng.randint(1950, 2000), rng.randint(1, 12), rng.randint(1, 28)
    ssn = f"900-{rng.randint(10, 99)}-{rng.randint(1000, 9999)}"
    phone = f"{rng.randint(201, 989)}-{rng.randint(200, 999)}-{rng.randint(1000, 9999)}"
    email = f"{first}_{last}@me.com".lower()
    city, state = rng.choice(stories.US_CITIES)
    unit = (
        f", #{rng.randint(1, 30)}{rng.randint(0, 9)}{rng.randint(1, 9)}"
        if rng.random() < 0.4
        else ""
    )
    street = f"{rng.randint(100, 19999)} {rng.choice(stories.STREET_NAMES)} {rng.choice(stories.STREET_TYPES)}"
    address = f"{street}{unit}, {city}, {state}, {rng.randint(10000, 99999)}"
    values = {
        "name": name,
        "birthday_text": f"{people.MONTHS[month - 1]} {day}, {year}",
        "pronoun": "He" if gender == "male" else "She",
        "possessive": "His" if gender == "male" else "Her",
        "possessive_lower": "his" if gender == "male" else "her",
        "ssn": ssn,
        "phone": phone,
        "email": email,
        "address": address,
    }
    middle = ["contact", "ssn"]
    rng.shuffle(middle)
    text = " ".join(
        rng.choice(stories.BIO_SENTENCES[part]).format(**values)
        for part in ("born", *middle, "address")
    )
    answers = {
        "birthday": f"{year:04d}-{month:02d}-{day:02d}",
        "ssn": ssn.replace("-", ""),
        "phone": phone.replace("-", ""),
        "email": email,
        "address": address,
    }
    qa = [(stories.BIO_QUESTIONS[k].format(name=name), v) for k, v in answers.items()]
    return text, qa
