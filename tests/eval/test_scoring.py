import math

import numpy as np
import pytest
import torch

from forgetbench.eval.outputs import (
    score_answers,
    score_answers_naive,
    score_candidates,
    shared_prefixes,
)
from forgetbench.methods._terms import per_sample_nll
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.encoding import collate, encode_prompt_answer
from forgetbench.modeling.forward import forward_logits
from forgetbench.modeling.templates import PromptTemplate
from toy import toy_qa, toy_tokenizer


@pytest.fixture(scope="module")
def model_and_pairs():
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, seed=5).eval()
    template = PromptTemplate("question_answer")
    pairs = [(template.prompt(q), template.answer(a)) for q, a in toy_qa()]
    return model, tokenizer, pairs


def test_scores_are_the_answer_token_log_probabilities(model_and_pairs):
    model, tokenizer, pairs = model_and_pairs
    scores = score_answers(model, tokenizer, pairs[:4])
    examples = [encode_prompt_answer(tokenizer, p, a, max_length=512) for p, a in pairs[:4]]
    batch = collate(examples, pad_id=tokenizer.pad_token_id)
    with torch.no_grad():
        expected = per_sample_nll(forward_logits(model, batch), batch["labels"]).tolist()
    for score, example, nll in zip(scores, examples, expected, strict=True):
        # answer tokens plus EOS: everything after the prompt
        assert score.tokens == len(example.input_ids) - example.prompt_length
        assert score.mean_loss == pytest.approx(nll, abs=1e-5)
        assert math.exp(score.logprob_sum) < 1.0


def test_scores_do_not_depend_on_batch_size_order_or_duplicates(model_and_pairs):
    model, tokenizer, pairs = model_and_pairs
    one = score_answers(model, tokenizer, pairs, batch_size=1)
    many = score_answers(model, tokenizer, pairs, batch_size=64)
    shuffled = score_answers(model, tokenizer, pairs[::-1] + pairs[:3], batch_size=5)
    # Padding changes the matmul shapes, so fp32 sums may differ in the last bits: the reported
    # per-question number (mean loss per token) must agree to 1e-6, the sums to a relative 1e-6.
    for a, b in zip(one, many, strict=True):
        assert a.tokens == b.tokens and a.mean_loss == pytest.approx(b.mean_loss, abs=1e-6)
        assert a.logprob_sum == pytest.approx(b.logprob_sum, rel=1e-6)
    for a, b in zip(one[::-1] + one[:3], shuffled, strict=True):
        assert a.mean_loss == pytest.approx(b.mean_loss, abs=1e-6)


def _groups(pairs):
    # Each prompt with its own answer and two other answers, like answer/paraphrase/perturbed.
    answers = [a for _, a in pairs]
    return [
        (p, [a, answers[(i + 1) % len(answers)], answers[(i + 5) % len(answers)]])
        for i, (p, a) in enumerate(pairs)
    ]


def test_shared_prompt_scoring_equals_independent_scoring(model_and_pairs):
    model, tokenizer, pairs = model_and_pairs
    groups = _groups(pairs)
    grouped = score_candidates(model, tokenizer, groups, batch_size=7)
    flat = score_answers(model, tokenizer, [(p, c) for p, cs in groups for c in cs], batch_size=3)
    _assert_grouped_equals_flat(grouped, flat)


def _assert_grouped_equals_flat(grouped, flat):
    flat_iter = iter(flat)
    for scores in grouped:
        for a in scores:
            b = next(flat_iter)
            assert a.tokens == b.tokens
            np.testing.assert_allclose(a.token_logps, b.token_logps, atol=1e-5)
            np.testing.assert_array_equal(a.argmax_matches, b.argmax_matches)
            np.testing.assert_allclose(a.token_mean, b.token_mean, atol=1e-5)
            np.testing.assert_allclose(a.token_std, b.token_std, atol=1e-5)
    assert next(flat_iter, None) is None


def test_shared_prompt_scoring_does_not_depend_on_batch_size(model_and_pairs):
    model, tokenizer, pairs = model_and_pairs
    groups = _groups(pairs)
    one = score_candidates(model, tokenizer, groups, batch_size=1)
    many = score_candidates(model, tokenizer, groups, batch_size=64)
    for xs, ys in zip(one, many, strict=True):
        for a, b in zip(xs, ys, strict=True):
            assert a.mean_loss == pytest.approx(b.mean_loss, abs=1e-6)


def test_naive_reference_path_gives_the_same_numbers(model_and_pairs):
    model, tokenizer, pairs = model_and_pairs
    fast = score_answers(model, tokenizer, pairs, batch_size=8)
    naive = score_answers_naive(model, tokenizer, pairs)
    for a, b in zip(fast, naive, strict=True):
        np.testing.assert_allclose(a.token_logps, b.token_logps, atol=1e-5)


def test_token_statistics_match_a_direct_computation(model_and_pairs):
    model, tokenizer, pairs = model_and_pairs
    (score,) = score_answers(model, tokenizer, pairs[:1])
    example = encode_prompt_answer(tokenizer, *pairs[0], max_length=512)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([example.input_ids])).logits[0].double()
    logps = torch.log_softmax(logits, -1)[example.prompt_length - 1 : -1]  # predicts answer tokens
    answer = torch.tensor(example.input_ids[example.prompt_length :])
    np.testing.assert_allclose(score.token_logps, logps[range(len(answer)), answer], atol=1e-5)
    np.testing.assert_array_equal(score.argmax_matches, (logps.argmax(-1) == answer).numpy())
    p = logps.exp()
    mu = (p * logps).sum(-1)
    sigma = ((p * (logps - mu[:, None]) ** 2).sum(-1)).sqrt()
    np.testing.assert_allclose(score.token_mean, mu, atol=1e-5)
    np.testing.assert_allclose(score.token_std, sigma, atol=1e-4)


def test_shared_prefixes_cluster_sequences_by_their_common_opening():
    passage = list(range(100, 140))  # 40 tokens
    sequences = [passage + [7], passage + [8, 9], [5, 6], passage, [5, 6, 1]]
    shared, cluster = shared_prefixes(sequences, min_tokens=32)
    # The bare passage is a member too, so the cluster keeps one token of it to predict from.
    assert shared == [39, 39, 0, 39, 0]
    assert cluster[0] == cluster[1] == cluster[3]
    assert len({cluster[0], cluster[2], cluster[4]}) == 3
    # Two tokens in common is below the threshold: [5, 6] and [5, 6, 1] stay unshared.
    assert shared_prefixes(sequences, min_tokens=41)[0] == [0, 0, 0, 0, 0]


def _passage_groups(pairs):
    # Comprehension-style prompts: a long passage asked about several times, mixed with prompts
    # that share nothing, so batches hold both kinds.
    facts = " ".join(a for _, a in pairs[:5])
    other = " ".join(a for _, a in pairs[5:10])
    groups = _groups(pairs)
    return [
        (f"{facts if i % 3 else other}\n\n{p}" if i % 4 else p, cs)
        for i, (p, cs) in enumerate(groups)
    ]


def test_prompts_sharing_a_passage_score_as_if_independent(model_and_pairs):
    model, tokenizer, pairs = model_and_pairs
    groups = _passage_groups(pairs)
    encoded = [tokenizer(p)["input_ids"] for p, _ in groups]
    shared, _ = shared_prefixes(encoded)
    assert sum(n > 0 for n in shared) >= 8 and shared.count(0) >= 4  # both kinds present
    flat = score_answers(model, tokenizer, [(p, c) for p, cs in groups for c in cs], batch_size=4)
    for batch_size in (1, 5, 64):
        grouped = score_candidates(model, tokenizer, groups, batch_size=batch_size)
        _assert_grouped_equals_flat(grouped, flat)


def test_a_prompt_that_fills_max_length_is_refused_by_every_scorer(model_and_pairs):
    """A prompt that leaves no room for its answer is a one-sentence DataError naming
    eval.max_length, from the shared-prompt, independent and naive paths alike; with room, the
    answer is scored (cut to the room left, as in training)."""
    from forgetbench.errors import DataError

    model, tokenizer, pairs = model_and_pairs
    prompt, answer = pairs[0]
    tokens = encode_prompt_answer(tokenizer, prompt, answer, max_length=512).prompt_length
    calls = [
        lambda n: score_candidates(model, tokenizer, [(prompt, [answer, "x"])], max_length=n),
        lambda n: score_answers(model, tokenizer, [(prompt, answer)], max_length=n),
        lambda n: score_answers_naive(model, tokenizer, [(prompt, answer)], max_length=n),
    ]
    for call in calls:
        with pytest.raises(DataError) as info:
            call(tokens)
        message = str(info.value)
        assert f"an evaluation prompt of {tokens} tokens" in message
        assert f"within max_length={tokens} tokens (eval.max_length" in message
        assert "\n" not in message
        first = call(tokens + 1)[0]
        first = first[0] if isinstance(first, list) else first
        assert first.tokens == 1  # one answer token fits
