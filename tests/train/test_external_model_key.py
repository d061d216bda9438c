"""A model folder forgetbench did not make is identified by what is in it, not by its path alone:
a user who saves another model to the same folder must not get the old one's cached finetuning
(found by following README section 3 twice with two models in ./my-model: the second run said
'reused cached finetune' with the first model's losses)."""

from __future__ import annotations

import os

from forgetbench.train.stages import external_fingerprint, model_fingerprint


def _save(folder, layers: int) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    GPT2LMHeadModel(GPT2Config(n_layer=layers, n_embd=16, n_head=2, vocab_size=32)).save_pretrained(
        folder
    )


def test_another_model_saved_to_the_same_folder_is_another_parent(tmp_path):
    folder = tmp_path / "my-model"
    _save(folder, layers=1)
    first = model_fingerprint(folder)
    assert first == model_fingerprint(folder)  # untouched: the same key, the cache is reused
    assert first.startswith(f"{folder}@")
    _save(folder, layers=2)  # another config
    second = model_fingerprint(folder)
    assert second != first
    # The same config with other weights: the weights file's size or time differs.
    weights = folder / "model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert model_fingerprint(folder) != second


def test_a_hub_id_is_its_name():
    assert external_fingerprint("locuslab/tofu_ft_llama2-7b") == "locuslab/tofu_ft_llama2-7b"
