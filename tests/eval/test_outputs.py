import pytest

from forgetbench.eval.outputs import greedy_generate, shared_prefixes
from forgetbench.methods._terms import per_sample_nll
from forgetbench.metrics.rouge import rouge_recall
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.encoding import collate
from forgetbench.modeling.forward import forward_logits
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.train.loop import train_loop
from forgetbench.train.loop_config import LoopConfig
from toy import toy_examples, toy_qa, toy_tokenizer


@pytest.fixture(scope="module")
def memorised(tmp_path_factory):
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, seed=0)
    config = LoopConfig(lr=3e-3, epochs=60, batch_size=8, per_device_batch_size=8, weight_decay=0.0)
    train_loop(
        model,
        toy_examples(),
        loss_fn=lambda m, b: per_sample_nll(forward_logits(m, b), b["labels"]).mean(),
        collate_fn=lambda b: collate(b, pad_id=tokenizer.pad_token_id),
        config=config,
        out_dir=tmp_path_factory.mktemp("memorise"),
        progress=False,
    )
    return model, tokenizer


def test_greedy_generation_reproduces_memorised_answers(memorised):
    model, tokenizer = memorised
    template = PromptTemplate("question_answer")
    prompts = [template.prompt(q) for q, _ in toy_qa()]
    answers = [a for _, a in toy_qa()]
    generations = greedy_generate(model, tokenizer, prompts, max_new_tokens=24, batch_size=5)
    assert rouge_recall(generations, answers)["rougeL_recall"].mean() >= 0.9
    # left padding must not change what a prompt generates: batch of 1 == batch of 5
    singles = [greedy_generate(model, tokenizer, [p], max_new_tokens=24)[0] for p in prompts[:6]]
    assert singles == generations[:6]


def test_generation_stops_at_eos_and_honours_max_new_tokens(memorised):
    model, tokenizer = memorised
    template = PromptTemplate("question_answer")
    prompt = template.prompt(toy_qa()[0][0])
    full = greedy_generate(model, tokenizer, [prompt], max_new_tokens=40)[0]
    # stopped at EOS: nothing after the memorised answer, whose separating space it generates
    assert full == template.answer(toy_qa()[0][1])
    short = greedy_generate(model, tokenizer, [prompt], max_new_tokens=2)[0]
    assert len(tokenizer(short, add_special_tokens=False)["input_ids"]) <= 2


def test_prompts_sharing_a_passage_generate_as_if_alone(memorised):
    model, tokenizer = memorised
    template = PromptTemplate("question_answer")
    passage = " ".join(a for _, a in toy_qa()[:5])
    prompts = [template.prompt(f"{passage}\n\n{q}") for q, _ in toy_qa()[:6]]
    prompts += [template.prompt(q) for q, _ in toy_qa()[6:9]]  # unshared, in the same batch
    shared, _ = shared_prefixes([tokenizer(p)["input_ids"] for p in prompts])
    assert all(shared[:6]) and not any(shared[6:])
    batched = greedy_generate(model, tokenizer, prompts, max_new_tokens=16, batch_size=16)
    # A prompt alone has nothing to share, so it runs the plain path.
    singles = [greedy_generate(model, tokenizer, [p], max_new_tokens=16)[0] for p in prompts]
    assert batched == singles
    assert len(set(batched[:6])) > 1  # the questions after the passage still steer the answers


def test_generation_stops_at_a_stop_string_and_cuts_it(memorised):
    model, tokenizer = memorised
    template = PromptTemplate("question_answer")
    question, answer = toy_qa()[0]
    full = greedy_generate(model, tokenizer, [template.prompt(question)], max_new_tokens=40)[0]
    words = full.split()
    stop = " " + words[len(words) // 2]  # a word in the middle of the memorised answer
    cut = greedy_generate(
        model, tokenizer, [template.prompt(question)], max_new_tokens=40, stop_strings=[stop]
    )[0]
    assert cut == full[: full.index(stop)] and len(cut) < len(full)


def test_a_batch_wider_than_the_context_whose_rows_fit_generates_without_a_warning(memorised):
    # Two shared passages in one batch: one long with short questions, one short with long
    # questions. The tensor is the longest prefix plus the longest rest, wider than any row, so
    # transformers' length check (on the tensor's width) would warn although every row's positions,
    # read from the mask, stay inside the model's context.
    import logging

    from transformers.utils import logging as transformers_logging

    model, tokenizer = memorised
    template = PromptTemplate("question_answer")
    qa = toy_qa()
    long_passage = " ".join(a for _, a in qa[:6])
    short_passage = " ".join(a for _, a in qa[6:9])
    prompts = [template.prompt(f"{long_passage}\n\n{q}") for q, _ in qa[9:12]]
    prompts += [
        template.prompt(f"{short_passage}\n\n{' '.join(a for _, a in qa[k : k + 3])} {qa[k][0]}")
        for k in (9, 11, 13)
    ]
    encoded = [tokenizer(p)["input_ids"] for p in prompts]
    shared, cluster = shared_prefixes(encoded)
    assert all(shared) and len(set(cluster)) == 2
    heads = max(shared)
    tails = max(len(e) - s for e, s in zip(encoded, shared, strict=True))
    longest = max(len(e) for e in encoded)
    new_tokens = 4
    assert heads + tails > longest + new_tokens  # the batch is wider than any row needs

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    log = transformers_logging.get_logger("transformers.generation.stopping_criteria")
    log.addHandler(handler)
    transformers_logging.warning_once.cache_clear()  # an earlier test may have warned already
    context = model.config.max_position_embeddings
    model.config.max_position_embeddings = longest + new_tokens  # every row fits, the batch not
    try:
        batched = greedy_generate(
            model, tokenizer, prompts, max_new_tokens=new_tokens, batch_size=len(prompts)
        )
        singles = [
            greedy_generate(model, tokenizer, [p], max_new_tokens=new_tokens)[0] for p in prompts
        ]
    finally:
        model.config.max_position_embeddings = context
        log.removeHandler(handler)
    assert batched == singles
    assert not [r for r in records if "maximum length" in r.getMessage()]


def test_a_static_kv_cache_generates_the_same_strings(memorised, monkeypatch):
    # eval.cache_implementation=static changes how the cache is held, not what greedy decoding
    # picks: the same strings as the growing cache, batches continuing a shared passage
    # included, and the option reaches generate() from the evaluation's config.
    from forgetbench.config_sections import EvalConfig
    from forgetbench.eval.backend import evaluation_backend
    from forgetbench.eval.requests import Generate

    model, tokenizer = memorised
    template = PromptTemplate("question_answer")
    passage = " ".join(a for _, a in toy_qa()[:5])
    prompts = [template.prompt(f"{passage}\n\n{q}") for q, _ in toy_qa()[:3]]
    prompts += [template.prompt(q) for q, _ in toy_qa()]
    dynamic = greedy_generate(model, tokenizer, prompts, max_new_tokens=24, batch_size=5)
    caches = []
    generate = model.generate

    def recorded(*args, **kwargs):
        caches.append(kwargs.get("cache_implementation", "dynamic"))
        return generate(*args, **kwargs)

    monkeypatch.setattr(model, "generate", recorded)
    static = greedy_generate(
        model, tokenizer, prompts, max_new_tokens=24, batch_size=5, cache_implementation="static"
    )
    assert static == dynamic
    assert rouge_recall(static[3:], [a for _, a in toy_qa()])["rougeL_recall"].mean() >= 0.9
    assert "static" in caches and "dynamic" in caches  # the shared passage's batch keeps its own
    caches.clear()
    backend = evaluation_backend(model, tokenizer, EvalConfig(cache_implementation="static"))
    assert backend.generate([Generate(prompts[3], 24)]) == [dynamic[3]]
    assert caches == ["static"]
