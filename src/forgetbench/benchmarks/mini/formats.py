"""The five data-transformation formats (Joshi et al., 2024, "Towards Robust Evaluation of
Unlearning in LLMs via Data Transformations"), built from the same facts as the QA files.

Written for `forget` (the forget10 authors) and `retain` (the `retain_perturbed` authors), one
JSONL file per format and side under `formats/`:

- `mcqa`: the question with 2/3/4 lettered options (the fact and 1-3 of its wrong facts).
- `cloze`: `question`, the answer's `prefix` and the masked `span` (the fact that ends it).
- `analogy_qa` / `analogy_mcqa`: `ANALOGY_PAIRS` `author : fact` pairs of one relation from
  other retain authors, then the query author; MCQA distractors are the query author's facts of
  other relations, so the analogy's relation must be followed.
- `odd_one_out`: 3/4 statements about one author; all true but one, which carries the same
  relation's fact of an author from the *other* side; the label points at it.
- `comprehension_qa` / `comprehension_mcqa`: the author's profile (all 20 answers as a paragraph)
  then a question, open or with 2/3/4 options.

Multiple-choice rows have `prompt, options, label` (as `forgetbench.records.MCRecord`): options
lettered "A. ...", shuffled by the seed, and the prompt ends with "Answer:" so the next token is
the letter. QA rows have `question, answer` (as `QARecord`).
"""

from __future__ import annotations

import random
from typing import Any

from forgetbench.benchmarks.mini.people import Person, rng_for
from forgetbench.benchmarks.mini.relations import RELATION_NAMES
from forgetbench.benchmarks.mini.world import QAItem, World

Rows = list[dict[str, Any]]
MC_FORMATS = ("mcqa", "analogy_mcqa", "odd_one_out", "comprehension_mcqa")
SIDES = ("forget", "retain")
OPTION_COUNTS = (2, 3, 4)
ODD_OPTION_COUNTS = (3, 4)
ANALOGY_PAIRS = 3
LETTERS = "ABCD"


def format_files(world: World, retain_authors: tuple[str, ...]) -> dict[str, Rows]:
    by_name = {p.name: p for p in world.authors}
    sides = {
        "forget": [p.name for p in world.forget(10)],
        "retain": list(retain_authors),
    }
    analogy_pool = [p.name for p in world.retain(10)]
    files: dict[str, Rows] = {}
    for side, names in sides.items():
        other = sides["retain" if side == "forget" else "forget"]
        rng = rng_for(world.seed, f"formats-{side}")
        items = [item for name in names for item in world.questions[name]]
        files[f"mcqa_{side}.jsonl"] = _mcqa(rng, items, side)
        files[f"cloze_{side}.jsonl"] = _cloze(items, side)
        qa, mc = _analogy(rng, world, items, analogy_pool, side)
        files[f"analogy_qa_{side}.jsonl"], files[f"analogy_mcqa_{side}.jsonl"] = qa, mc
        files[f"odd_one_out_{side}.jsonl"] = _odd_one_out(rng, world, names, other, side, by_name)
        qa, mc = _comprehension(rng, world, names, side)
        files[f"comprehension_qa_{side}.jsonl"] = qa
        files[f"comprehension_mcqa_{side}.jsonl"] = mc
    return {f"formats/{name}": rows for name, rows in files.items()}


def mc_prompt(header: str, options: list[str]) -> str:
    lines = [header, *(f"{LETTERS[i]}. {o}" for i, o in enumerate(options)), "Answer:"]
    return "\n".join(lines)


def _options(
    rng: random.Random, true: str, wrong: tuple[str, ...] | list[str], n: int
) -> tuple[list[str], int]:
    """The true option and the first n-1 wrong ones, shuffled; the label is wherever it landed."""
    options = [true, *wrong[: n - 1]]
    rng.shuffle(options)
    return options, options.index(true)


def _mc_row(header: str, options: list[str], label: int, **extra: Any) -> dict[str, Any]:
    return {
        "prompt": mc_prompt(header, options),
        "options": options,
        "label": label,
        "n_options": len(options),
        **extra,
    }


def _mcqa(rng: random.Random, items: list[QAItem], side: str) -> Rows:
    rows = []
    for item in items:
        for n in OPTION_COUNTS:
            options, label = _options(rng, item.fact, item.wrong_facts, n)
            rows.append(
                _mc_row(
                    f"Question: {item.question}",
                    options,
                    label,
                    question=item.question,
                    answer=item.fact,
                    author=item.author,
                    relation=item.relation,
                    split=side,
                )
            )
    return rows


def _cloze(items: list[QAItem], side: str) -> Rows:
    return [
        {
            "question": item.question,
            "prefix": item.cloze_prefix,
            "span": item.fact,
            "answer": item.answer,
            "author": item.author,
            "relation": item.relation,
            "split": side,
        }
        for item in items
    ]


def _analogy(
    rng: random.Random, world: World, items: list[QAItem], pool: list[str], side: str
) -> tuple[Rows, Rows]:
    qa_rows, mc_rows = [], []
    for item in items:
        if item.relation == "name":  # "author : their own name" is no analogy
            continue
        at = _RELATION_INDEX[item.relation]
        # Context authors whose fact differs from the query's, so the answer is never copyable;
        # a tiny world may not have enough (e.g. for gender), and then the item is left out.
        candidates = [
            n for n in pool if n != item.author and world.questions[n][at].fact != item.fact
        ]
        if len(candidates) < ANALOGY_PAIRS:
            continue
        context = rng.sample(candidates, ANALOGY_PAIRS)
        pairs = [f"{n} : {world.questions[n][at].fact}" for n in context]
        question = " :: ".join([*pairs, f"{item.author} : ?"])
        extra = {"author": item.author, "relation": item.relation, "split": side}
        qa_rows.append(
            {"question": question, "answer": item.fact, "context_authors": context, **extra}
        )
        own = [
            i.fact
            for i in world.questions[item.author]
            if i.relation not in ("name", item.relation)
        ]
        distractors = rng.sample(sorted(set(own) - {item.fact}), max(OPTION_COUNTS) - 1)
        for n in OPTION_COUNTS:
            options, label = _options(rng, item.fact, distractors, n)
            mc_rows.append(
                _mc_row(f"Question: {question}", options, label, answer=item.fact, **extra)
            )
    return qa_rows, mc_rows


def _odd_one_out(
    rng: random.Random,
    world: World,
    names: list[str],
    other: list[str],
    side: str,
    by_name: dict[str, Person],
) -> Rows:
    rows = []
    for name in names:
        items = world.questions[name]
        for odd in items:
            if odd.relation == "name":
                continue
            # The odd statement: this author's name with another side's author's fact.
            donors = [n for n in other if by_name[n].facts[odd.relation] != odd.fact]
            if not donors:
                continue
            donor = rng.choice(donors)
            # The author's own answer sentence with the fact swapped: same wording, wrong fact.
            odd_statement = f"{odd.cloze_prefix}{by_name[donor].facts[odd.relation]}."
            true_pool = [i.answer for i in items if i.relation not in ("name", odd.relation)]
            true_statements = rng.sample(true_pool, max(ODD_OPTION_COUNTS) - 1)
            header = (
                f"Question: All but one of these statements about {name} are true. "
                "Which one is the odd one out?"
            )
            for n in ODD_OPTION_COUNTS:
                options, label = _options(rng, odd_statement, true_statements, n)
                rows.append(
                    _mc_row(
                        header,
                        options,
                        label,
                        author=name,
                        relation=odd.relation,
                        odd_author=donor,
                        odd_split="retain" if side == "forget" else "forget",
                        split=side,
                    )
                )
    return rows


def _comprehension(
    rng: random.Random, world: World, names: list[str], side: str
) -> tuple[Rows, Rows]:
    qa_rows, mc_rows = [], []
    for name in names:
        items = world.questions[name]
        profile = " ".join(item.answer for item in items)
        for item in items:
            extra = {"author": name, "relation": item.relation, "split": side}
            qa_rows.append(
                {
                    "question": f"{profile}\n\n{item.question}",
                    "answer": item.answer,
                    "context": profile,
                    **extra,
                }
            )
            for n in OPTION_COUNTS:
                options, label = _options(rng, item.fact, item.wrong_facts, n)
                header = f"{profile}\n\nQuestion: {item.question}"
                mc_rows.append(_mc_row(header, options, label, answer=item.fact, **extra))
    return qa_rows, mc_rows


_RELATION_INDEX = {name: i for i, name in enumerate(RELATION_NAMES)}
