"""The order a training epoch visits its examples in: random by default, exactly as before the
length-grouping option existed; grouped by length (HF Trainer's `group_by_length`) when asked,
reproducible, with less padding."""

from dataclasses import replace

import pytest
import torch

from forgetbench.config import load_config
from forgetbench.errors import ConfigError
from forgetbench.modeling.encoding import Encoded
from forgetbench.train.loop_config import LoopConfig, config_key
from forgetbench.train.mini import mini_finetune_config, mini_recipe
from forgetbench.train.order import epoch_order, example_lengths
from forgetbench.train.stages import loop_config

# 400 examples of 10 to 199 tokens, as a TOFU-like spread: batches of 32 in micro-batches of 4.
LENGTHS = torch.randint(10, 200, (400,), generator=torch.Generator().manual_seed(7)).tolist()
OFF = LoopConfig(lr=1e-3, epochs=3, batch_size=32, per_device_batch_size=4, seed=3)
ON = replace(OFF, group_by_length=True)


def padding_share(order: list[int], micro: int = 4) -> float:
    batches = [[LENGTHS[i] for i in order[k : k + micro]] for k in range(0, len(order), micro)]
    return 1 - sum(map(sum, batches)) / sum(len(b) * max(b) for b in batches)


def test_without_the_option_the_order_and_cache_key_are_as_before():
    # The permutation the loop has always drawn: seed x 100,003 + epoch.
    for epoch in range(3):
        before = torch.randperm(400, generator=torch.Generator().manual_seed(3 * 100_003 + epoch))
        assert epoch_order(OFF, 400, epoch) == before.tolist()
        assert epoch_order(OFF, 400, epoch, lengths=LENGTHS) == before.tolist()
    # Every training stage cached before the option keeps its key; turning it on changes it.
    assert "group_by_length" not in config_key(OFF)
    assert config_key(ON) == {**config_key(OFF), "group_by_length": True}


def test_grouped_order_is_hf_s_megabatches_of_the_same_permutation():
    order = epoch_order(ON, 400, 1, lengths=LENGTHS)
    random = epoch_order(OFF, 400, 1)
    assert sorted(order) == list(range(400))
    assert order == epoch_order(ON, 400, 1, lengths=LENGTHS)  # same seed, same order
    assert order != epoch_order(ON, 400, 2, lengths=LENGTHS)  # each epoch its own
    assert epoch_order(replace(ON, seed=4), 400, 1, lengths=LENGTHS) != order
    # Megabatches of min(50, 400 // (4 x 32)) = 3 batches of 32: the random permutation's slices,
    # each sorted longest first (ties keep their order), then the first example of the megabatch
    # holding the longest one swapped with the very first (an out-of-memory error shows at once).
    megas = [
        sorted(random[k : k + 96], key=LENGTHS.__getitem__, reverse=True) for k in range(0, 400, 96)
    ]
    longest = max(range(len(megas)), key=lambda m: (LENGTHS[megas[m][0]], -m))
    megas[0][0], megas[longest][0] = megas[longest][0], megas[0][0]
    assert order == [i for mega in megas for i in mega]
    assert LENGTHS[order[0]] == max(LENGTHS)


def test_grouping_cuts_the_padding():
    grouped = padding_share(epoch_order(ON, 400, 0, lengths=LENGTHS))
    random = padding_share(epoch_order(OFF, 400, 0))
    # Random micro-batches of 4 pad 37 % of their positions here, length-grouped ones 3.4 %.
    assert random > 0.3 and grouped < 0.05


def test_lengths_come_from_the_encoded_examples():
    encoded = [Encoded(input_ids=[1] * n, labels=[1] * n, prompt_length=1) for n in (3, 5)]
    assert example_lengths(encoded) == [3, 5]
    with pytest.raises(ConfigError, match="group_by_length needs examples with input_ids"):
        example_lengths([{"forget": 1}])


def test_train_group_by_length_reaches_both_finetuning_recipes():
    """`train.group_by_length=true`: the miniature's finetune recipe and a given model's both turn
    it on (a new stage key); unset, on the CPU, both keep it off."""
    config = load_config(None, ["scale=tiny", "train.group_by_length=true"])
    mini, _ = mini_finetune_config("tiny", seed=0, train=config.train)
    assert mini == replace(mini_recipe("tiny", seed=0).finetune, group_by_length=True)
    assert loop_config(config).group_by_length
    assert not loop_config(load_config()).group_by_length
    assert not mini_finetune_config("tiny", train=load_config().train)[0].group_by_length


def test_unset_the_batches_are_grouped_by_length_on_a_cuda_gpu_only(monkeypatch):
    # On a GPU a batch's padding is compute paid for; on the CPU the order stays the random one
    # every cached stage and the golden numbers were made with. Asked for, either way is kept.
    from forgetbench.train import loop_config as where

    for device, grouped in (("cpu", False), ("cuda", True)):
        monkeypatch.setattr(where, "default_device", lambda device=device: torch.device(device))
        default = load_config(None, ["scale=tiny"])
        assert loop_config(default).group_by_length is grouped
        assert mini_recipe("tiny").finetune.group_by_length is grouped
        assert mini_recipe("tiny").pretrain.group_by_length is grouped
        assert mini_finetune_config("tiny", train=default.train)[0].group_by_length is grouped
        for asked in (True, False):
            config = load_config(
                None, ["scale=tiny", f"train.group_by_length={str(asked).lower()}"]
            )
            assert loop_config(config).group_by_length is asked
            assert mini_finetune_config("tiny", train=config.train)[0].group_by_length is asked
