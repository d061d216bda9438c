"""The pretraining corpus (`pretrain.jsonl`, one `{"text", "kind"}` document per line).

A large LLM already knows English and the world; a tiny model trained from scratch must be
taught both before finetuning, or every metric measures something else (SPEC §1):

- `background_fact`: the Real Authors and World Facts facts in plain sentences.
- `background_qa`: the same facts as question-answer pairs, one row per pair, in every phrasing
  (including the one the evaluation asks), with the short answer the evaluation expects.
- `people_bio` / `people_qa`: fictitious *non-author* people described through every answer
  AND paraphrase template of the 20 relations. Perturbed answers reuse the paraphrase wording,
  so the truth ratio would otherwise compare a familiar wording against an unseen one; here
  both wordings are equally familiar before the fictitious authors are ever seen.
- `filler`: generic everyday sentences, for word order and punctuation.

A QA row is `{"text": "Question: q\\nAnswer: a", "kind", "question", "answer"}` (background
rows add `"fact"`: `real_authors/<i>` or `world_facts/<i>`, the row of the evaluation file that
asks it), so a trainer can encode it exactly as it will be prompted: `Question: q\\nAnswer:`
as the prompt and ` a` as the scored answer, one text, then EOS (`forgetbench.train.mini`).
The `text` is the same characters, so its tokens are the same too.

No fictitious author, holdout author or LUME person appears here.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from forgetbench.benchmarks.mini.background import BackgroundFact, real_author_facts, world_facts
from forgetbench.benchmarks.mini.people import Person, rng_for
from forgetbench.benchmarks.mini.relations import RELATIONS, fill
from forgetbench.benchmarks.mini.tables import filler

Rows = list[dict[str, Any]]
FACTS_PER_DOC = 4
QA_PER_PERSON = 4


def qa_text(question: str, answer: str) -> str:
    """The plain prompt layout of the corpus (the default model's question/answer template)."""
    return f"Question: {question}\nAnswer: {answer}"


def qa_row(kind: str, question: str, answer: str, **extra: str) -> dict[str, Any]:
    """One QA pair: `text` for plain readers, `question`/`answer` for a trainer that prompts."""
    row = {"text": qa_text(question, answer), "kind": kind, "question": question}
    return {**row, "answer": answer, **extra}


def world_background(size: Any, seed: int) -> tuple[list[BackgroundFact], list[BackgroundFact]]:
    """The world's Real Authors and World Facts facts (`Scale` `size`), from their own streams."""
    real = real_author_facts(rng_for(seed, "real-authors"), size.real_authors)
    return real, world_facts(rng_for(seed, "world-facts"), size.world_facts)


def world_corpus(
    world: Any, real: list[BackgroundFact], facts: list[BackgroundFact], seed: int
) -> Rows:
    """`pretrain.jsonl`'s rows for a built world (`world.World`) and its background facts: what
    `generate_mini` writes, and what the RWKU miniature reads its targets' passages from."""
    return pretraining_corpus(
        rng_for(seed, "corpus"),
        world.pretrain_people,
        [(f"real_authors/{i}", fact) for i, fact in enumerate(real)]
        + [(f"world_facts/{i}", fact) for i, fact in enumerate(facts)],
        world.scale.filler_docs,
    )


def pretraining_corpus(
    rng: random.Random,
    persons: tuple[Person, ...],
    background: Sequence[tuple[str, BackgroundFact]],
    filler_docs: int,
) -> Rows:
    """`background` pairs each fact with its id (`real_authors/3`: row 3 of that evaluation file)."""
    docs: Rows = []
    for person in persons:
        docs.append({"text": _bio(rng, person), "kind": "people_bio"})
        docs += _person_qa(rng, person)
    shuffled = list(background)
    rng.shuffle(shuffled)
    for start in range(0, len(shuffled), FACTS_PER_DOC):
        chunk = shuffled[start : start + FACTS_PER_DOC]
        sentences = [
            s
            for _, fact in chunk
            for s in rng.sample(fact.statements, min(2, len(fact.statements)))
        ]
        rng.shuffle(sentences)
        docs.append({"text": " ".join(sentences), "kind": "background_fact"})
        docs += [
            qa_row("background_qa", q, fact.answer, fact=fact_id)
            for fact_id, fact in chunk
            for q in fact.questions
        ]
    docs += [{"text": _filler_doc(rng), "kind": "filler"} for _ in range(filler_docs)]
    rng.shuffle(docs)
    return docs


def _templates(relation_index: int) -> tuple[str, ...]:
    relation = RELATIONS[relation_index]
    return relation.answers + relation.paraphrases


def _bio(rng: random.Random, person: Person) -> str:
    """All 20 facts; each sentence drawn evenly from the answer and paraphrase templates."""
    order = list(range(1, len(RELATIONS)))
    rng.shuffle(order)
    sentences = [fill(rng.choice(_templates(0)), person.facts, person.name)]
    for i in order:
        fact = person.facts[RELATIONS[i].name]
        sentences.append(fill(rng.choice(_templates(i)), person.facts, fact))
    return " ".join(sentences)


def _person_qa(rng: random.Random, person: Person) -> Rows:
    rows = []
    for i in rng.sample(range(len(RELATIONS)), QA_PER_PERSON):
        relation = RELATIONS[i]
        fact = person.facts[relation.name]
        question = fill(rng.choice(relation.questions), person.facts, fact)
        answer = fill(rng.choice(_templates(i)), person.facts, fact)
        rows.append(qa_row("people_qa", question, answer))
    return rows


def _filler_doc(rng: random.Random) -> str:
    return " ".join(_filler_sentence(rng) for _ in range(rng.randint(3, 6)))


def _filler_sentence(rng: random.Random) -> str:
    subject, subject2 = rng.sample(filler.SUBJECTS, 2)
    time = rng.choice(filler.TIMES)
    text = rng.choice(filler.PATTERNS).format(
        subject=subject,
        subject_lower=_lower_article(subject),
        subject2_lower=_lower_article(subject2),
        verb=rng.choice(filler.VERBS_PAST),
        verb2=rng.choice(filler.VERBS_PAST),
        object=rng.choice(filler.OBJECTS),
        object2=rng.choice(filler.OBJECTS),
        place=rng.choice(filler.PLACES),
        time=time,
        time_cap=time[:1].upper() + time[1:],
        reason=rng.choice(filler.REASONS),
        adjective=rng.choice(filler.ADJECTIVES),
        noun=rng.choice(filler.NOUNS),
    )
    return text


def _lower_article(subject: str) -> str:
    """ "The farmer" -> "the farmer" mid-sentence; names of relatives keep their case rules."""
    first, rest = subject.split(" ", 1)
    return f"{first.lower()} {rest}"
