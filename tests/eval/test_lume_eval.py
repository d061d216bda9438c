"""`forgetbench eval --benchmark lume` end to end on the real LUME files with a tiny model. The
numbers mean nothing for a model never trained on LUME; the test checks coverage and counts."""

import json
from collections import Counter

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from forgetbench.benchmarks.mini.scales import get_scale
from forgetbench.cli import main
from forgetbench.data.lume import load_lume
from forgetbench.modeling.builtin import train_tokenizer
from forgetbench.modeling.loading import save_model

pytestmark = pytest.mark.slow


def test_every_task_split_and_kind_of_the_real_files_is_scored(shared_data, tmp_path):
    lume = shared_data / "lume"
    # An untrained model with a tokenizer fitted to LUME's text, so prompts stay short. What is
    # checked is coverage and counts, not what the model knows: one layer of width 32 (the tiny
    # scale's three of 96 took 11 s of CPU to read the 5,466 prompts), the tiny scale's context.
    texts = [f"{r.prefix} {r.completion}" for r in load_lume(lume, "forget")[:500]]
    tokenizer = train_tokenizer(texts, vocab_size=2000)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(
            LlamaConfig(
                vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                num_attention_heads=2, intermediate_size=64,
                max_position_embeddings=get_scale("tiny").model.max_positions,
                tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
            )
        )  # fmt: skip
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    finetuned = save_model(model, tokenizer, tmp_path / "model")
    out = tmp_path / "lume-eval"
    argv = ["eval", "--benchmark", "lume", "--model", str(finetuned), "--data", str(lume)]
    argv += ["--out", str(out), "eval.lume_max_new_tokens=4", "eval.batch_size=64", "--json"]
    assert main(argv) == 0
    scores = json.loads((out / "summary.json").read_text())["scores"]
    extra = json.loads((out / "extra_log.json").read_text())["lume"]
    for split in ("forget", "retain"):
        expected = Counter((r.task, r.kind) for r in load_lume(lume, split))
        assert {(t, k) for t in (1, 2, 3) for k in ("regurgitation", "knowledge")} == set(expected)
        got = Counter((item["task"], item["kind"]) for item in extra[split])
        assert got == expected
        # LUME generates up to eval.lume_max_new_tokens (4), not eval.max_new_tokens (200).
        # Re-encoding decoded text can split a token (a partial UTF-8 character), hence the slack.
        lengths = sorted(
            len(tokenizer(i["generation"], add_special_tokens=False)["input_ids"])
            for i in extra[split]
        )
        assert lengths[len(lengths) // 2] == 4 and lengths[-1] <= 12
        for task, kind in expected:
            assert 0.0 <= scores[f"lume/{kind}/Task{task}/{split}"] <= 1.0
    assert 0.0 <= scores["lume/task_aggregate"] <= 1.0
    # The shared LUME release has no held-out documents, so there is no MIA score to report.
    assert scores["lume/mia_score"] is None and scores["lume/final"] is None
    # No MMLU measured or given: no utility, and nothing to hold against SemEval's 0.371.
    assert scores["lume/utility_source"] is None and scores["lume/mmlu_below_threshold"] is None
