"""Issue 8's acceptance at tiny scale: the finetuned model reproduces its training answers while
the retain model does not know the forget authors."""

import pytest

from forgetbench.data.tofu import load_tofu
from forgetbench.eval.outputs import greedy_generate
from forgetbench.metrics.rouge import rouge_recall
from forgetbench.modeling.loading import load_model
from forgetbench.train.mini import TEMPLATE, finetune_mini

pytestmark = pytest.mark.slow


def _rouge(model_dir, data, split):
    model, tokenizer = load_model(model_dir)
    records = load_tofu(data / "tofu", split)
    prompts = [TEMPLATE.prompt(r.question) for r in records]
    generations = greedy_generate(model, tokenizer, prompts, max_new_tokens=48, batch_size=32)
    return float(rouge_recall(generations, [r.answer for r in records])["rougeL_recall"].mean())


def test_finetuned_reproduces_answers_and_retain_model_does_not_know_forget_authors(tiny_study):
    _, data, base, finetuned, retain = tiny_study
    assert base.losses[-1] < base.losses[0]
    assert _rouge(finetuned.model_dir, data, "full") >= 0.9
    retain_on_forget = _rouge(retain.model_dir, data, "forget10")
    assert _rouge(retain.model_dir, data, "retain90") >= 0.9
    assert retain_on_forget < 0.6


def test_stages_are_reused_and_chained(tiny_study):
    run, data, base, finetuned, _ = tiny_study
    again = finetune_mini(run, data, base.model_dir, split="full", scale="tiny", progress=False)
    assert again.cached and again.model_dir == finetuned.model_dir
    assert finetuned.model_dir.parent.name.startswith("finetune-")


def test_finetune_command_on_the_builtin_benchmark_reuses_the_study(tiny_study, capsys):
    import json

    from forgetbench.cli import main

    run, _, _, finetuned, retain = tiny_study
    argv = ["finetune", "--benchmark", "mini", "--scale", "tiny", "--out", str(run), "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["cached"] and result["model_dir"] == str(finetuned.model_dir)
    assert main([*argv, "--split", "retain90"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["cached"] and result["model_dir"] == str(retain.model_dir)


def test_base_knows_the_background_facts_and_finetuning_keeps_them(tiny_study):
    # TOFU's model utility needs Real Authors / World Facts answered by the base model and still
    # by the finetuned one (measured: 1.0 for both at tiny scale; 0.0 without rehearsal).
    _, data, base, finetuned, _ = tiny_study
    for model_dir in (base.model_dir, finetuned.model_dir):
        for split in ("real_authors_perturbed", "world_facts_perturbed"):
            assert _rouge(model_dir, data, split) >= 0.6, (model_dir, split)


def test_pretraining_qa_is_encoded_as_evaluated_and_rehearsal_avoids_evaluated_phrasings(
    tiny_study,
):
    from collections import Counter

    from transformers import AutoTokenizer

    from forgetbench.io import read_json_records
    from forgetbench.modeling.encoding import encode_prompt_answer
    from forgetbench.records import IGNORE_INDEX
    from forgetbench.train.mini import pretraining_examples, rehearsal_examples

    _, data, base, _, _ = tiny_study
    tokenizer = AutoTokenizer.from_pretrained(base.model_dir)
    rows = read_json_records(data / "pretrain.jsonl")
    qa = next(r for r in rows if r["kind"] == "background_qa")
    bio = next(r for r in rows if r["kind"] == "people_bio")
    examples = pretraining_examples(
        [qa, bio], tokenizer, max_length=256, chunk_tokens=48, background_qa_repeats=2
    )
    asked = encode_prompt_answer(
        tokenizer, TEMPLATE.prompt(qa["question"]), TEMPLATE.answer(qa["answer"]), max_length=256
    )
    assert examples[:2] == [asked, asked]  # the prompt the evaluation uses, loss on the answer
    assert asked.labels[asked.prompt_length - 1] == IGNORE_INDEX != asked.labels[-1]
    chunks = examples[2:]  # the bio, cut at sentence ends into pieces of <= 48 tokens + BOS/EOS
    assert len(chunks) > 1 and all(len(c.input_ids) <= 50 for c in chunks)
    texts = [tokenizer.decode(c.input_ids, skip_special_tokens=True) for c in chunks]
    assert " ".join(texts) == bio["text"]

    rehearsed = rehearsal_examples(data, tokenizer, per_fact=1, seed=0, max_length=256)
    evaluated = {
        tuple(tokenizer(TEMPLATE.prompt(r.question))["input_ids"])
        for split in ("real_authors_perturbed", "world_facts_perturbed")
        for r in load_tofu(data / "tofu", split)
    }
    phrasings = Counter(r["fact"] for r in rows if r["kind"] == "background_qa")
    assert len(rehearsed) == sum(n > 1 for n in phrasings.values())  # one per fact asked 2+ ways
    assert not {tuple(e.input_ids[: e.prompt_length]) for e in rehearsed} & evaluated
