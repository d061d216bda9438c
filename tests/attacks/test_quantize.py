import pytest
import torch

from forgetbench.attacks.quantize import (
    nf4_levels,
    normal_float4,
    quantise_model,
    quantise_tensor,
    round_to_nearest,
)
from forgetbench.errors import ConfigError

# QLoRA's NF4 table (Dettmers et al. 2023, Appendix E), as bitsandbytes ships it.
PUBLISHED_NF4 = [
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
]  # fmt: skip


def test_int4_per_channel_rounds_a_hand_made_row():
    # absmax 1.4 -> scale 1.4 / 7 = 0.2; w / 0.2 = [3.1, -7, 1.25, 0.25] -> [3, -7, 1, 0].
    w = torch.tensor([[0.62, -1.4, 0.25, 0.05]])
    assert round_to_nearest(w, bits=4)[0].tolist() == pytest.approx([0.6, -1.4, 0.2, 0.0])


def test_int4_groups_of_two_have_their_own_scales():
    # Group [0.62, -1.4]: scale 0.2 -> [0.6, -1.4]. Group [0.25, 0.05]: scale 0.25 / 7;
    # 0.05 / (0.25 / 7) = 1.4 -> 1 -> 0.25 / 7 = 0.0357142...; 0.25 -> 7 -> 0.25.
    w = torch.tensor([[0.62, -1.4, 0.25, 0.05]])
    assert round_to_nearest(w, bits=4, group_size=2)[0].tolist() == pytest.approx(
        [0.6, -1.4, 0.25, 0.25 / 7]
    )


def test_int8_keeps_each_row_to_its_own_scale():
    # Row 1: scale 1.27 / 127 = 0.01 -> [127, -50, 0] steps. Row 2: scale 2 / 127.
    w = torch.tensor([[1.27, -0.5, 0.004], [2.0, 1.0, 0.0]])
    out = quantise_tensor(w, "int8")
    assert out[0].tolist() == pytest.approx([1.27, -0.5, 0.0])
    step = 2.0 / 127
    assert out[1].tolist() == pytest.approx([2.0, round(1.0 / step) * step, 0.0])


def test_rounding_twice_changes_nothing_and_zero_rows_stay_zero():
    w = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))
    w[3] = 0.0
    once = round_to_nearest(w, bits=4, group_size=4)
    assert torch.equal(round_to_nearest(once, bits=4, group_size=4), once)
    assert torch.equal(once[3], torch.zeros(16))
    assert all(len(set(row.tolist())) <= 15 for row in once.reshape(-1, 4))


def test_nf4_levels_are_qloras():
    assert list(nf4_levels()) == pytest.approx(PUBLISHED_NF4, abs=1e-6)


def test_nf4_rounds_each_block_to_the_nearest_level():
    # Block absmax 2: 1.0 / 2 = 0.5 lies between levels 0.4407 and 0.5626, nearer the first
    # (0.0593 vs 0.0626), so it becomes 0.4407 * 2; -2 stays -2 (level -1).
    block = torch.zeros(64)
    block[0], block[1] = 2.0, 1.0
    block[2] = -2.0
    out = normal_float4(block)
    assert out[:3].tolist() == pytest.approx([2.0, 2 * PUBLISHED_NF4[12], -2.0], abs=1e-5)
    assert torch.equal(out[3:], torch.zeros(61))


def test_a_group_size_that_does_not_divide_the_row_is_refused():
    with pytest.raises(ConfigError, match="attack.group_size=3"):
        round_to_nearest(torch.ones(2, 4), bits=4, group_size=3)


def test_the_model_loses_precision_in_its_linear_layers_only():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=32,
        tie_word_embeddings=False,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    names = quantise_model(model, "int4")
    after = model.state_dict()
    assert "lm_head" not in names and len(names) == 2 * 7  # q k v o gate up down per block
    assert torch.equal(after["lm_head.weight"], before["lm_head.weight"])
    assert torch.equal(after["model.embed_tokens.weight"], before["model.embed_tokens.weight"])
    q = after["model.layers.0.self_attn.q_proj.weight"]
    assert not torch.equal(q, before["model.layers.0.self_attn.q_proj.weight"])
    assert all(len(set(row.tolist())) <= 15 for row in q)  # 4 bits, symmetric: 15 levels a row
