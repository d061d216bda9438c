"""A model whose context is shorter than the texts (a GPT-2-style model with 40 positions, where
TOFU's defaults ask for 512-token texts and 200 new tokens): finetune, unlearn and eval cut every
text to the context instead of indexing past the position embeddings (an IndexError before)."""

from __future__ import annotations

import json

import pytest

from forgetbench.cli import main
from toy import toy_qa, toy_tokenizer

CONTEXT = 40


@pytest.fixture(scope="module")
def short(tmp_path_factory):
    from transformers import GPT2Config, GPT2LMHeadModel

    root = tmp_path_factory.mktemp("short-context")
    tokenizer = toy_tokenizer()
    config = GPT2Config(
        n_layer=1, n_embd=32, n_head=2, vocab_size=len(tokenizer), n_positions=CONTEXT,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    GPT2LMHeadModel(config).save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    (root / "tofu").mkdir()
    rows = [
        {"question": q, "answer": a, "paraphrased_answer": a, "perturbed_answer": [a[::-1], a]}
        for q, a in toy_qa()
    ]
    for name in ("forget10_perturbed", "retain_perturbed", "real_authors_perturbed",
                 "world_facts_perturbed", "forget10", "retain90", "holdout10"):  # fmt: skip
        (root / "tofu" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def test_every_command_fits_its_texts_to_a_short_context(short, capsys):
    model, data = str(short / "model"), str(short / "tofu")
    common = ["--model", model, "--data", data, "--no-progress", "--json"]
    assert main(["finetune", *common, "--split", "retain90", "--out", str(short / "run"),
                 "--epochs", "1"]) == 0  # fmt: skip
    assert main(["unlearn", *common, "--split", "forget10", "--method", "grad_diff",
                 "--out", str(short / "run"), "--epochs", "1"]) == 0  # fmt: skip
    assert main(["eval", *common, "--split", "forget10", "--out", str(short / "eval")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0 <= summary["scores"]["model_utility"] <= 1
    assert "Traceback" not in capsys.readouterr().err
