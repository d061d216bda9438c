"""The two backends answer every kind of request alike, and `serve` hands each request its own
answer whatever the mix; a task run on a fake backend sees exactly the requests it built."""

import numpy as np
import pytest

from forgetbench.eval.backend import FastBackend, NaiveBackend, serve
from forgetbench.eval.requests import Generate, Score
from forgetbench.eval.tasks import run_task
from forgetbench.eval.tasks.mia import MembershipTask
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.templates import PromptTemplate
from toy import toy_qa, toy_tokenizer

TEMPLATE = PromptTemplate("question_answer")


@pytest.fixture(scope="module")
def model_and_requests():
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, seed=2).eval()
    qa = toy_qa()
    prompts = [TEMPLATE.prompt(q) for q, _ in qa]
    answers = [TEMPLATE.answer(a) for _, a in qa]
    requests = [
        Score(prompts[0], (answers[0], answers[1], answers[2])),  # shared prompt
        Generate(prompts[1], 6),
        Score(prompts[2], (answers[2],), add_eos=False),  # one answer, no EOS
        Score("", (f"{qa[3][0]} {qa[3][1]}",), add_eos=False, max_length=None),  # a document
        Generate(prompts[4], 3),
        Score(prompts[5], (answers[5], answers[6])),
        Score(prompts[6], (answers[6],)),
    ]
    return model, tokenizer, requests


def test_fast_and_naive_backends_answer_alike(model_and_requests):
    model, tokenizer, requests = model_and_requests
    fast = serve(FastBackend(model, tokenizer, batch_size=3), requests)
    naive = serve(NaiveBackend(model, tokenizer), requests)
    for request, a, b in zip(requests, fast, naive, strict=True):
        if isinstance(request, Generate):
            assert isinstance(a, str) and a == b
            continue
        assert len(a) == len(b) == len(request.answers)
        for x, y in zip(a, b, strict=True):
            assert x.tokens == y.tokens
            np.testing.assert_allclose(x.token_logps, y.token_logps, atol=1e-5)
            np.testing.assert_array_equal(x.argmax_matches, y.argmax_matches)
    # add_eos reaches the scorer: the same answer scored with EOS has one token more.
    with_eos = serve(
        NaiveBackend(model, tokenizer), [Score(requests[2].prompt, requests[2].answers)]
    )
    assert with_eos[0][0].tokens == fast[2][0].tokens + 1


def test_serve_answers_each_request_with_its_own_answer(model_and_requests):
    model, tokenizer, requests = model_and_requests
    backend = FastBackend(model, tokenizer, batch_size=4)
    together = serve(backend, requests)
    alone = [serve(backend, [r])[0] for r in requests]
    for request, a, b in zip(requests, together, alone, strict=True):
        if isinstance(request, Generate):
            assert a == b
        else:
            assert [s.tokens for s in a] == [s.tokens for s in b]
            for x, y in zip(a, b, strict=True):
                assert x.mean_loss == pytest.approx(y.mean_loss, abs=1e-5)
    assert serve(backend, []) == []


class _Recorder:
    """A backend that answers without a model and keeps every request it was asked."""

    def __init__(self):
        self.asked = []

    def score(self, requests):
        from forgetbench.eval.outputs import AnswerScore

        self.asked += requests
        logps = np.array([-1.0, -2.0])
        answer = AnswerScore(logps, logps > -1.5, np.zeros(2), np.ones(2))
        return [tuple(answer for _ in r.answers) for r in requests]

    def generate(self, requests):
        self.asked += requests
        return ["" for _ in requests]


def test_a_task_asks_only_what_it_built_and_aggregates_per_item_values():
    backend = _Recorder()
    members, nonmembers = [("Q1", " a"), ("Q2", " b")], [("Q3", " c")]
    result = run_task(MembershipTask(members, nonmembers, k=0.5), backend)
    assert backend.asked == [Score(p, (a,)) for p, a in [*members, *nonmembers]]
    # Every item scores alike, so no attack tells members apart: AUC 0.5 (ties count one half).
    # One non-member resolves no low FPR (1% needs 100): the TPRs are None.
    expected = {"mia/members": 2, "mia/nonmembers": 1}
    for name in ("loss", "zlib", "min_k", "min_k_plus_plus"):
        expected |= {f"mia/{name}": 0.5, f"mia/{name}/tpr@1%fpr": None}
        expected[f"mia/{name}/tpr@0.1%fpr"] = None
    assert result.scores == expected
    assert [item["member"] for item in result.items] == [True, True, False]


def test_auto_batch_size_halves_after_out_of_memory_and_keeps_what_fits(model_and_requests):
    # A GPU that holds at most 3 sequences per forward pass, played on the CPU: `auto` starts at
    # eval.batch_size's default (16 on the CPU; 256 on a GPU), halves on each out-of-memory error
    # until every pass fits, and gives the answers of a plain batch of the size it kept.
    import torch

    model, tokenizer, requests = model_and_requests
    widths = []

    def small_gpu(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        widths.append(ids.shape[0])
        if ids.shape[0] > 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (played)")

    handle = model.register_forward_pre_hook(small_gpu, with_kwargs=True)
    try:
        auto = FastBackend(model, tokenizer, batch_size="auto")
        answered = serve(auto, requests)
    finally:
        handle.remove()
    assert 1 < auto.batch_size < 16 and any(w > 3 for w in widths)
    expected = serve(FastBackend(model, tokenizer, batch_size=auto.batch_size), requests)
    for request, a, b in zip(requests, answered, expected, strict=True):
        if isinstance(request, Generate):
            assert a == b
        else:
            for x, y in zip(a, b, strict=True):
                np.testing.assert_allclose(x.token_logps, y.token_logps, atol=1e-6)
    with pytest.raises(torch.cuda.OutOfMemoryError):  # a fixed batch size is the user's choice
        handle = model.register_forward_pre_hook(small_gpu, with_kwargs=True)
        try:
            serve(FastBackend(model, tokenizer, batch_size=16), requests)
        finally:
            handle.remove()
