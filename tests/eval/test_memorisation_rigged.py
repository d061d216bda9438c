"""Exact memorisation and extraction strength on a rigged model whose greedy choice is known at
every step: a bigram table forced onto a real tiny Llama's logits. The teacher-forced argmax
matches must give the hand-worked scores, and real greedy decoding must agree with extraction
strength's shortcut (from the k-token prefix the rest comes back, from k-1 it does not)."""

from __future__ import annotations

import pytest
import torch

from forgetbench.eval.outputs import greedy_generate, score_answers
from forgetbench.eval.tasks.tofu import memorisation_scores
from toy import toy_tokenizer

PROMPT = "Question: Where was the writer born?\nAnswer:"
ANSWER = " in the city"


@pytest.fixture(scope="module")
def rigged():
    """(model, tokenizer, answer ids + EOS): the model predicts `successor[current token]`.
    Untrained weights and the toy tokenizer: the forced logits decide every choice."""
    from forgetbench.modeling.builtin import build_tiny_model

    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, scale="tiny", seed=0).eval()
    prompt_ids = tokenizer(PROMPT)["input_ids"]
    answer_ids = tokenizer(PROMPT + ANSWER)["input_ids"][len(prompt_ids) :]
    assert tokenizer.decode(answer_ids) == ANSWER and len(set(answer_ids)) == len(answer_ids) >= 3
    target = [*answer_ids, tokenizer.eos_token_id]  # scored answers end with EOS
    wrong = next(t for t in range(tokenizer.vocab_size) if t not in target + prompt_ids)
    # Right after the prompt and at every answer token the model predicts the true next token,
    # except after the first answer token, where it predicts `wrong`: matches = [1, 0, 1, ..., 1].
    successor = {prompt_ids[-1]: target[0]}
    successor.update({a: b for a, b in zip(target[:-1], target[1:], strict=True)})
    successor[target[0]] = wrong
    table = torch.zeros(model.config.vocab_size, model.config.vocab_size)
    for current, following in successor.items():
        table[current, following] = 100.0

    def force(module, args, kwargs, output):
        ids = kwargs.get("input_ids", args[0] if args else None)
        keep = kwargs.get("logits_to_keep", 0)  # which positions the logits are for
        if isinstance(keep, torch.Tensor):
            ids = ids[:, keep]
        elif keep:
            ids = ids[:, -keep:]
        output.logits = output.logits + table[ids]
        return output

    model.register_forward_hook(force, with_kwargs=True)
    return model, tokenizer, target


def test_scores_match_the_rigged_pattern(rigged):
    model, tokenizer, target = rigged
    (score,) = score_answers(model, tokenizer, [(PROMPT, ANSWER)], batch_size=1)
    n = len(target)
    assert score.argmax_matches.tolist() == [True, False] + [True] * (n - 2)
    got = memorisation_scores([score.argmax_matches])
    # Scored over the n - 1 answer tokens without EOS, as open-unlearning does.
    assert got["exact_memorisation"] == pytest.approx((n - 2) / (n - 1))
    # The last mismatch is at index 1, so k = 2: greedy decoding needs two answer tokens.
    assert got["extraction_strength"] == pytest.approx(1 - 2 / (n - 1))


def test_greedy_decoding_agrees_with_extraction_strength(rigged):
    model, tokenizer, target = rigged
    answer_ids = target[:-1]
    prefix = lambda k: PROMPT + tokenizer.decode(answer_ids[:k])  # noqa: E731
    rest = lambda k: tokenizer.decode(answer_ids[k:])  # noqa: E731
    from_two, from_one, from_none = greedy_generate(
        model,
        tokenizer,
        [prefix(2), prefix(1), prefix(0)],
        max_new_tokens=len(target),
        batch_size=3,
    )
    assert from_two == rest(2)  # stops at EOS exactly after the answer
    assert from_one != rest(1) and from_none != rest(0)
