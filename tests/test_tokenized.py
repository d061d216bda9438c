"""Tokenisations remembered across tokenizer objects (forgetbench.tokenized): a study loads one
tokenizer per evaluated model from identical files, and each pair is tokenised once per process;
a tokenizer that differs in anything gets its own ids."""

from forgetbench.modeling.encoding import _split_uncached, encode_prompt_answer
from toy import toy_tokenizer

PROMPT = "Question: Where was Basil born?\nAnswer:"


def _counting(monkeypatch, tokenizer) -> list[str]:
    calls: list[str] = []
    original = type(tokenizer).__call__

    def counted(self, text, *args, **kwargs):
        calls.append(text)
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(type(tokenizer), "__call__", counted)
    return calls


def test_a_second_tokenizer_with_the_same_state_reuses_the_first_ones_ids(monkeypatch):
    first, second = toy_tokenizer(), toy_tokenizer()
    answer = " in a town no test has used before"
    expected = encode_prompt_answer(first, PROMPT, answer, max_length=64)
    calls = _counting(monkeypatch, second)
    again = encode_prompt_answer(second, PROMPT, answer, max_length=64)
    assert calls == [] and again == expected
    # Callers own what they get: changing it changes nothing remembered.
    again.input_ids.append(0)
    assert encode_prompt_answer(second, PROMPT, answer, max_length=64) == expected
    # A new answer is tokenised (prompt alone, then the whole text), once.
    encode_prompt_answer(second, PROMPT, " somewhere else entirely", max_length=64)
    encode_prompt_answer(first, PROMPT, " somewhere else entirely", max_length=64)
    assert len(calls) == 2


def test_a_tokenizer_that_differs_gets_its_own_ids():
    answer = " near Whereford"
    plain = toy_tokenizer()
    before = encode_prompt_answer(plain, PROMPT, answer, max_length=64)
    # The same object after a token is added (as a user may do after loading), and another
    # tokenizer with one more token: each is tokenised afresh, not given the remembered ids.
    plain.add_tokens(["Whereford"])
    after = encode_prompt_answer(plain, PROMPT, answer, max_length=64)
    ids, count = _split_uncached(plain, PROMPT, PROMPT + answer)
    assert after.input_ids[:-1] == ids and after.prompt_length == count
    assert after.input_ids != before.input_ids
    other = toy_tokenizer()
    other.add_tokens(["Whereford", "Basil"])
    ids, count = _split_uncached(other, PROMPT, PROMPT + answer)
    got = encode_prompt_answer(other, PROMPT, answer, max_length=64)
    assert got.input_ids[:-1] == ids and got.input_ids != after.input_ids
