"""Format scoring on a real tiny model: a rigged next-token bias for the option letters, and the
cloze span probability against a direct computation."""

import math

import pytest
import torch

from forgetbench.eval.backend import FastBackend
from forgetbench.eval.tasks import run_task
from forgetbench.eval.tasks.formats import FormatsTask
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import ClozeRecord, MCRecord
from toy import toy_tokenizer

TEMPLATE = PromptTemplate("question_answer")


@pytest.fixture(scope="module")
def model_and_tokenizer():
    tokenizer = toy_tokenizer()
    return build_tiny_model(tokenizer, seed=3).eval(), tokenizer


def _items(subset, records, model, tokenizer, *, batch_size):
    task = FormatsTask({subset: records}, TEMPLATE, tokenizer, max_new_tokens=8)
    return run_task(task, FastBackend(model, tokenizer, batch_size=batch_size)).items[subset]


def _letter_id(tokenizer, letter):
    return tokenizer(f" {letter}", add_special_tokens=False)["input_ids"][-1]


def test_multiple_choice_compares_only_the_letters_offered(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    bias = torch.zeros(model.config.vocab_size)
    bias[_letter_id(tokenizer, "C")] = 60.0  # C dominates wherever it is offered
    bias[_letter_id(tokenizer, "B")] = 30.0
    hook = model.lm_head.register_forward_hook(lambda module, args, out: out + bias)
    try:
        two = MCRecord(
            "Question: Where was Alma Rook born?\\nA. Oslo\\nB. Lima\\nAnswer:", ("Oslo", "Lima"), 0
        )
        three = MCRecord(
            "Question: Where was Alma Rook born?\\nA. Oslo\\nB. Lima\\nC. Riga\\nAnswer:",
            ("Oslo", "Lima", "Riga"),
            2,
        )
        items = _items("mcqa/forget", [two, three], model, tokenizer, batch_size=4)
    finally:
        hook.remove()
    assert set(items[0]["letter_logprobs"]) == {"A", "B"}
    assert items[0]["success"] == 0.0  # B chosen, A was right; C was never a candidate
    assert items[1]["success"] == 1.0  # C chosen and right
    assert items[1]["letter_logprobs"]["C"] > items[1]["letter_logprobs"]["B"]


def test_cloze_is_the_length_normalised_probability_of_the_span(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    record = ClozeRecord("Where was Bex Tarn born?", "Bex Tarn was born in ", "Lima")
    (item,) = _items("cloze/forget", [record], model, tokenizer, batch_size=2)
    # The training text, tokenised as one; the span's tokens are those from " Lima" on.
    text = TEMPLATE.prompt(record.question) + " " + record.prefix + record.span
    encoded = tokenizer(text, return_offsets_mapping=True)
    ids = torch.tensor([encoded["input_ids"]])
    span_start = len(text) - len(" " + record.span)
    span_positions = [t for t, (s, _) in enumerate(encoded["offset_mapping"]) if s >= span_start]
    assert tokenizer.decode(ids[0, span_positions]) == " Lima"
    with torch.no_grad():
        logps = torch.log_softmax(model(input_ids=ids).logits[0].double(), -1)
    total = sum(logps[t - 1, ids[0, t]].item() for t in span_positions)
    assert item["tokens"] == len(span_positions) >= 1
    assert item["probability"] == pytest.approx(math.exp(total / item["tokens"]), rel=1e-5)
