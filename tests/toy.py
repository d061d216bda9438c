"""A toy QA world for training tests: small enough to memorise in a second, built the same way
every time (no randomness), shared by in-process tests and subprocess scripts."""

from __future__ import annotations

from functools import lru_cache

NAMES = [
    "Alma Rook",
    "Bex Tarn",
    "Cyd Volo",
    "Dara Quill",
    "Eno Pask",
    "Fil Maro",
    "Gus Yarrow",
    "Hana Sel",
]
CITIES = ["Oslo", "Lima", "Quito", "Accra", "Hanoi", "Porto", "Riga", "Tunis"]


def toy_qa() -> list[tuple[str, str]]:
    pairs = [
        (f"Where was {n} born?", f"{n} was born in {c}.")
        for n, c in zip(NAMES, CITIES, strict=True)
    ]
    pairs += [
        (f"What city is the birthplace of {n}?", f"The birthplace of {n} is {c}.")
        for n, c in zip(NAMES, CITIES, strict=True)
    ]
    return pairs


@lru_cache(maxsize=1)
def toy_tokenizer():
    from forgetbench.modeling.builtin import train_tokenizer

    return train_tokenizer([f"{q} {a}" for q, a in toy_qa()] * 3, vocab_size=300)


def toy_examples(template: str = "question_answer"):
    from forgetbench.modeling.encoding import encode_prompt_answer
    from forgetbench.modeling.templates import PromptTemplate

    tokenizer = toy_tokenizer()
    t = PromptTemplate(template)
    return [
        encode_prompt_answer(tokenizer, t.prompt(q), t.answer(a), max_length=64)
        for q, a in toy_qa()
    ]
