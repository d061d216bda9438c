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


def memorised_model(texts: list[str], *, seed: int):
    """A tiny model (`build_tiny_model` at `seed`, the toy tokenizer) trained until it has
    memorised `texts`: each text and an EOS, one full batch, 80 AdamW steps at 3e-3 (~3 s). Dropout
    is 0, so it is the same model every time."""
    import torch

    from forgetbench.modeling.builtin import build_tiny_model

    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, seed=seed)
    encoded = [tokenizer(t)["input_ids"] + [tokenizer.eos_token_id] for t in texts]
    width = max(map(len, encoded))
    ids = torch.full((len(encoded), width), tokenizer.pad_token_id)
    labels = torch.full((len(encoded), width), -100)
    for i, e in enumerate(encoded):
        ids[i, : len(e)] = labels[i, : len(e)] = torch.tensor(e)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    model.train()
    for _ in range(80):
        loss = model(input_ids=ids, attention_mask=(labels != -100).long(), labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.zero_grad(set_to_none=True)
    return model.eval()


def toy_split():
    """The toy facts as QA records: the first 6 the forget set, the other 10 the retain set."""
    from forgetbench.records import QARecord

    records = [QARecord(q, a) for q, a in toy_qa()]
    return records[:6], records[6:]


def toy_plan(*, seed: int = 0, epochs: int = 3, refusals: tuple[str, ...] | None = None):
    """The unlearning engine's plan of `toy_split` (`build_items`, one list of items per epoch) in
    the question_answer template, with the built-in refusals unless `refusals` is given."""
    from forgetbench.methods.refusals import REFUSALS
    from forgetbench.modeling.templates import PromptTemplate
    from forgetbench.train.items import build_items

    forget, retain = toy_split()
    return build_items(
        forget,
        retain,
        toy_tokenizer(),
        PromptTemplate("question_answer"),
        refusals=REFUSALS if refusals is None else refusals,
        seed=seed,
        max_length=128,  # the toy tokenizer spends ~1 token per character
        epochs=epochs,
    )
