"""Generalisation probes: what a forget split's facts entail, asked the ways training never asked.

Per forget split, four TOFU-layout evaluation files (`tofu/forgetNN_{kind}_perturbed.json`, each
question with a paraphrased answer and five perturbed ones, so probability, ROUGE-L and the truth
ratio apply as on TOFU's own sets). They are only evaluated, never trained on, and drawn from
their own seeded streams after every other file is made, so no other file changes:

- `paraphrase`: a forget question asked through a question template no author's training used;
  the answers are the trained ones.
- `reverse`: the author asked from the other side of a relation ("Who was born in <city> on
  <date>?" where training asked "Where was <author> born?"). Only facts training states in both
  directions are reversed (`both_directions`): the `name` question asks the author from their
  birthplace, birth date and genre, so a finetuned model can know these; a fact stated one way
  only (author -> book) asked backwards measures the reversal curse, not forgetting.
- `two_hop`: a question whose answer needs two trained facts of a forget author chained ("Who is
  the main character of the best-known book by <author>?": author -> book -> protagonist).
- `shared`: retain authors' own questions on a fact they share with a forget author (the same
  city, genre, award, ...): the value is in the forget set, but this knowledge must be kept.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from forgetbench.benchmarks.mini.people import Person, rng_for
from forgetbench.benchmarks.mini.relations import BY_NAME, RELATIONS, fill
from forgetbench.benchmarks.mini.scales import FORGET_PERCENTS
from forgetbench.benchmarks.mini.world import QAItem, World
from forgetbench.data.tofu import PROBE_KINDS

# Questions per forget author and kind: a few, since every evaluation of a study scores them.
PER_AUTHOR = 3

# Question templates no relation's training phrasings use (checked below), per relation.
PARAPHRASE_QUESTIONS: dict[str, str] = {
    "birthplace": "Which city is the hometown of {name}?",
    "birth_date": "On which day did {name} come into the world?",
    "genre": "What kind of books does {name} write?",
    "father_profession": "What work did the father of {name} do?",
    "mother_profession": "What work did the mother of {name} do?",
    "award": "Which prize was given to {name}?",
    "first_book": "What was the debut book of {name}?",
    "famous_book": "Which book made {name} famous?",
    "latest_book": "What is the newest book by {name}?",
    "residence": "In which city does {name} live today?",
    "education": "What was the university subject of {name}?",
    "language": "What language does {name} write the books in?",
    "protagonist": "Who is the hero of {famous_book}?",
    "writing_time": "When does {name} sit down to write?",
    "theme": "Which theme is at the heart of the books of {name}?",
}


@dataclass(frozen=True)
class Composed:
    """A probe asked in one question that training never asked: its answer is the fact of
    `relation` (so the perturbed answers swap in that relation's wrong facts)."""

    relation: str
    question: str
    answer: str  # ends with "{fact}."
    paraphrase: str


_BORN = "born in {birthplace} on {birth_date}"
# The author from facts the `name` question states them with (birthplace, birth date, genre).
REVERSE: tuple[Composed, ...] = (
    Composed(
        "name",
        f"Who is the author {_BORN}?",
        f"The author {_BORN} is {{fact}}.",
        f"{{fact}} is the author who was {_BORN}.",
    ),
    Composed(
        "name",
        "Which writer of {genre} was born in {birthplace}?",
        "The writer of {genre} born in {birthplace} is {fact}.",
        "{fact} is the writer of {genre} who was born in {birthplace}.",
    ),
)
# Two trained facts chained; the first hop is the author (from the `name` question's cues) or
# the author's best-known book.
TWO_HOP: tuple[Composed, ...] = (
    Composed(
        "protagonist",
        "Who is the main character of the best-known book by {name}?",
        "The main character of the best-known book by {name} is {fact}.",
        "{fact} is the hero of the most famous book by {name}.",
    ),
    Composed(
        "famous_book",
        f"What is the best-known book of the author {_BORN}?",
        f"The author {_BORN} is best known for the book {{fact}}.",
        f"{{fact}} is the book that made the author {_BORN} famous.",
    ),
    Composed(
        "residence",
        f"Where does the author {_BORN} live now?",
        f"The author {_BORN} currently lives in {{fact}}.",
        f"{{fact}} is the city where the author {_BORN} lives today.",
    ),
    Composed(
        "award",
        f"Which award has the author {_BORN} received?",
        f"The author {_BORN} has received {{fact}}.",
        f"{{fact}} was presented to the author {_BORN}.",
    ),
)
# Facts drawn from a shared table, so several authors can hold the same value.
SHARED_RELATIONS = (
    "birthplace", "residence", "genre", "award", "education", "language", "theme",
    "writing_time", "father_profession", "mother_profession",
)  # fmt: skip


def both_directions() -> tuple[str, ...]:
    """The relations whose fact training states in both directions: asked from the author (the
    relation's own question) and used to ask for the author (a `name` question names it)."""
    asked_by = BY_NAME["name"].questions
    return tuple(
        r.name
        for r in RELATIONS
        if r.name != "name" and any(f"{{{r.name}}}" in q for q in asked_by)
    )


def probe_files(world: World) -> dict[str, list[dict[str, object]]]:
    """`forgetNN_{kind}_perturbed.json` rows for every forget split."""
    files: dict[str, list[dict[str, object]]] = {}
    for pct in FORGET_PERCENTS:
        forget, retain = world.forget(pct), world.retain(pct)
        for kind in PROBE_KINDS:
            rng = rng_for(world.seed, f"probes/forget{pct:02d}/{kind}")
            rows = [
                _row(item, kind)
                for person in forget
                for item in _probes(kind, rng, world, person, retain)
            ]
            files[f"forget{pct:02d}_{kind}_perturbed.json"] = rows
    return files


def _probes(
    kind: str, rng: random.Random, world: World, person: Person, retain: tuple[Person, ...]
) -> list[QAItem]:
    items = {item.relation: item for item in world.questions[person.name]}
    if kind == "paraphrase":
        relations = rng.sample(sorted(PARAPHRASE_QUESTIONS), PER_AUTHOR)
        return [_paraphrased(items[r], person) for r in relations]
    if kind == "reverse":
        unique = [c for c in REVERSE if _names_one_author(c, person, world)]
        return [_composed(c, items[c.relation], person) for c in unique[:PER_AUTHOR]]
    if kind == "two_hop":
        chosen = rng.sample(range(len(TWO_HOP)), PER_AUTHOR)
        return [_composed(TWO_HOP[i], items[TWO_HOP[i].relation], person) for i in sorted(chosen)]
    # shared: each retain author's question on a fact this forget author holds too
    pairs = [
        (other, relation)
        for other in retain
        for relation in SHARED_RELATIONS
        if other.facts[relation] == person.facts[relation]
    ]
    picked = sorted(rng.sample(range(len(pairs)), min(PER_AUTHOR, len(pairs))))
    by_author = {o.name: {i.relation: i for i in world.questions[o.name]} for o, _ in pairs}
    return [by_author[pairs[i][0].name][pairs[i][1]] for i in picked]


def _paraphrased(item: QAItem, person: Person) -> QAItem:
    template = PARAPHRASE_QUESTIONS[item.relation]
    assert template not in BY_NAME[item.relation].questions, template
    question = fill(template, person.facts, item.fact)
    return QAItem(**{**item.__dict__, "question": question})


def _composed(probe: Composed, item: QAItem, person: Person) -> QAItem:
    """The probe's question and answers about `person`; perturbed answers keep the paraphrase's
    wording with the wrong facts already drawn for `item` (the same relation's fact)."""
    facts = person.facts
    answer = fill(probe.answer, facts, item.fact)
    assert answer.endswith(f"{item.fact}."), (answer, item.fact)
    return QAItem(
        author=item.author,
        relation=item.relation,
        question=fill(probe.question, facts, item.fact),
        answer=answer,
        paraphrased_answer=fill(probe.paraphrase, facts, item.fact),
        perturbed_answers=tuple(fill(probe.paraphrase, facts, w) for w in item.wrong_facts),
        fact=item.fact,
        wrong_facts=item.wrong_facts,
    )


def _names_one_author(probe: Composed, person: Person, world: World) -> bool:
    """A reverse question is fair only if its cues fit this author alone (among every author the
    world trains on or holds out)."""
    question = fill(probe.question, person.facts, "")
    return all(
        fill(probe.question, other.facts, "") != question
        for other in world.authors + world.holdout
        if other.name != person.name
    )


def _row(item: QAItem, kind: str) -> dict[str, object]:
    return {
        "question": item.question,
        "answer": item.answer,
        "paraphrased_answer": item.paraphrased_answer,
        "perturbed_answer": list(item.perturbed_answers),
        "author": item.author,
        "relation": item.relation,
        "probe": kind,
    }
