"""A generated world: its fictitious authors, their 20 questions each, and the pretraining people.

Everything downstream (TOFU files, formats, corpus) reads facts from here, so an option, a label
or a cloze span is right by construction.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from forgetbench.benchmarks.mini.people import PeopleSource, Person, rng_for
from forgetbench.benchmarks.mini.relations import RELATIONS, fill
from forgetbench.benchmarks.mini.scales import FORGET_PERCENTS, Scale, forget_authors


@dataclass(frozen=True)
class QAItem:
    """One question about one author, with everything every format needs."""

    author: str
    relation: str
    question: str
    answer: str
    paraphrased_answer: str
    perturbed_answers: tuple[str, ...]
    fact: str
    wrong_facts: tuple[str, ...]

    @property
    def cloze_prefix(self) -> str:
        """The answer up to its fact: answer templates end with "{fact}." (checked on build)."""
        return self.answer[: len(self.answer) - len(self.fact) - 1]


@dataclass(frozen=True)
class World:
    scale: Scale
    seed: int
    authors: tuple[Person, ...]  # TOFU's `full`, in order; forgetNN is the tail
    holdout: tuple[Person, ...]  # same distribution, never in `full` (MIA non-members)
    pretrain_people: tuple[Person, ...]  # fill the templates in the pretraining corpus only
    questions: dict[str, tuple[QAItem, ...]]  # author name -> 20 items, relation order
    source: PeopleSource

    def forget(self, percent: int) -> tuple[Person, ...]:
        return self.authors[len(self.authors) - forget_authors(self.scale, percent) :]

    def retain(self, percent: int) -> tuple[Person, ...]:
        return self.authors[: len(self.authors) - forget_authors(self.scale, percent)]

    def holdout_split(self, percent: int) -> tuple[Person, ...]:
        return self.holdout[: forget_authors(self.scale, percent)]

    def items(self, persons: tuple[Person, ...]) -> list[QAItem]:
        return [item for p in persons for item in self.questions[p.name]]


def build_world(scale: Scale, seed: int) -> World:
    source = PeopleSource(seed)
    rng = rng_for(seed, "authors")
    authors = tuple(source.person(rng, i) for i in range(scale.authors))
    holdout_count = forget_authors(scale, max(FORGET_PERCENTS))
    holdout = tuple(source.person(rng, scale.authors + i) for i in range(holdout_count))
    pretrain_rng = rng_for(seed, "pretrain-people")
    pretrain = tuple(source.person(pretrain_rng, i) for i in range(scale.pretrain_people))
    # Wrong facts last: they must avoid every name and title the world's people already hold.
    qa_rng = rng_for(seed, "questions")
    questions = {p.name: questions_of(qa_rng, source, p) for p in authors + holdout}
    return World(scale, seed, authors, holdout, pretrain, questions, source)


def questions_of(rng: random.Random, source: PeopleSource, person: Person) -> tuple[QAItem, ...]:
    items = []
    for relation in RELATIONS:
        fact = person.facts[relation.name]
        answer_template = rng.choice(relation.answers)
        paraphrase_template = rng.choice(relation.paraphrases)
        wrong = source.wrong_facts(rng, person, relation.name)
        answer = fill(answer_template, person.facts, fact)
        assert answer.endswith(f"{fact}."), (answer, fact)
        items.append(
            QAItem(
                author=person.name,
                relation=relation.name,
                question=fill(rng.choice(relation.questions), person.facts, fact),
                answer=answer,
                paraphrased_answer=fill(paraphrase_template, person.facts, fact),
                # TOFU keeps the paraphrase's wording and swaps the fact, so the truth ratio
                # compares facts under one wording.
                perturbed_answers=tuple(fill(paraphrase_template, person.facts, w) for w in wrong),
                fact=fact,
                wrong_facts=wrong,
            )
        )
    return tuple(items)
