import math

import pytest
import torch

from forgetbench.errors import ConfigError, DataError
from forgetbench.methods._terms import answer_token_logprobs, per_sample_nll
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.encoding import collate, encode_prompt_answer, encode_text
from forgetbench.modeling.forward import forward_logits, hidden_states_at
from forgetbench.modeling.loading import load_model, save_model
from forgetbench.modeling.lora import apply_lora, merge_lora
from forgetbench.modeling.templates import PromptTemplate, resolve_template
from forgetbench.records import IGNORE_INDEX
from forgetbench.train.loop import train_loop
from forgetbench.train.loop_config import LoopConfig
from tofu_reference import tofu_reference_encoding
from toy import toy_examples, toy_qa, toy_tokenizer

CHAT = "{% for m in messages %}<|user|> {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|> {% endif %}"


TEMPLATE_NAMES = ["question_answer", "tofu_llama2", "tofu_question_answer", "chat"]
# TOFU's config/model_config.yaml, per family: question_start_tag, question_end_tag, answer_tag.
TOFU_TAGS = {
    "tofu_llama2": ("[INST] ", " [/INST]", ""),
    "tofu_question_answer": ("Question: ", "\n", "Answer: "),
    # The miniature's layout, written in TOFU's terms: the space opens the answer.
    "question_answer": ("Question: ", "\nAnswer:", " "),
}


def metaspace_tokenizer():
    """A SentencePiece-style tokenizer (Llama's `▁` word marker and prefix space) trained here, so
    the boundary rule is checked on a second family of tokenizers without any download."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    # Llama's SentencePiece encodes a newline as its own byte token; isolate it likewise.
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split("\n", behavior="isolated"), pre_tokenizers.Metaspace()]
    )
    core.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<pad>", "<s>", "</s>"], show_progress=False
    )
    texts = [f"[INST] {q} [/INST] Question: {q}\nAnswer: {a}" for q, a in toy_qa()] * 3
    core.train_from_iterator(texts, trainer=trainer)
    core.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", core.token_to_id("<s>"))]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )


@pytest.mark.parametrize("make_tokenizer", [toy_tokenizer, metaspace_tokenizer])
@pytest.mark.parametrize("template", sorted(TOFU_TAGS))
def test_encoding_equals_tofus_data_code_token_for_token(template, make_tokenizer):
    tokenizer = make_tokenizer()
    t = PromptTemplate(template)
    for question, answer in toy_qa():
        encoded = encode_prompt_answer(
            tokenizer, t.prompt(question), t.answer(answer), max_length=128
        )
        ids, labels = tofu_reference_encoding(tokenizer, question, answer, TOFU_TAGS[template])
        assert encoded.input_ids == ids
        assert encoded.labels == labels


@pytest.mark.parametrize("template", TEMPLATE_NAMES)
def test_answer_mask_starts_exactly_at_the_answer(template):
    tokenizer = toy_tokenizer()
    tokenizer.chat_template = CHAT
    t = PromptTemplate(template)
    question, answer = toy_qa()[0]
    prompt = t.prompt(question, tokenizer)
    encoded = encode_prompt_answer(tokenizer, prompt, t.answer(answer), max_length=128)
    n = encoded.prompt_length
    assert all(label == IGNORE_INDEX for label in encoded.labels[:n])  # no prompt token is trained
    assert encoded.labels[n] == encoded.input_ids[n] != IGNORE_INDEX  # the first answer token is
    assert encoded.labels[n:] == encoded.input_ids[n:]
    assert encoded.input_ids[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(encoded.input_ids[n:], skip_special_tokens=True) == t.answer(answer)
    assert tokenizer.decode(encoded.input_ids[:n], skip_special_tokens=True) == prompt


def test_prompt_and_answer_share_their_tokens_as_one_text():
    tokenizer = toy_tokenizer()
    t = PromptTemplate("question_answer")
    prompt = t.prompt("Where was Alma Rook born?")
    encoded = encode_prompt_answer(tokenizer, prompt, " was born", max_length=64)
    first = tokenizer.convert_ids_to_tokens(encoded.input_ids[encoded.prompt_length])
    assert first == "Ġwas"  # the answer's first word keeps its space, as in running text


def test_a_token_across_the_prompt_boundary_is_an_error():
    # "Answer: " + "was": byte-level BPE makes " was" one token, half prompt and half answer.
    tokenizer = toy_tokenizer()
    with pytest.raises(DataError, match="spans the end of the prompt"):
        encode_prompt_answer(tokenizer, "Question: Where?\nAnswer: ", "was born", max_length=64)


def test_a_straddle_is_caught_when_offsets_are_trimmed():
    # GPT-2-style post-processors may trim a token's leading space from its offsets, so " was"
    # looks as if it started after the prompt's trailing space; the prompt's own tokens tell.
    from tokenizers import processors

    tokenizer = toy_tokenizer().__class__(tokenizer_object=toy_tokenizer().backend_tokenizer)
    tokenizer.backend_tokenizer.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=True),
            processors.TemplateProcessing(
                single="<s> $A", special_tokens=[("<s>", tokenizer.convert_tokens_to_ids("<s>"))]
            ),
        ]
    )
    tokenizer.add_special_tokens({"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"})
    with pytest.raises(DataError, match="spans the end of the prompt"):
        encode_prompt_answer(tokenizer, "Question: Where?\nAnswer: ", "was born", max_length=64)
    ok = encode_prompt_answer(tokenizer, "Question: Where?\nAnswer:", " was born", max_length=64)
    assert tokenizer.decode(ok.input_ids[ok.prompt_length : -1]) == " was born"


def test_a_chat_template_that_renders_bos_gets_no_second_bos():
    tokenizer = toy_tokenizer()
    tokenizer.chat_template = "{{ bos_token }}" + CHAT
    t = PromptTemplate("chat")
    prompt = t.prompt("Where was Alma Rook born?", tokenizer)
    assert prompt.startswith("<s>")
    encoded = encode_prompt_answer(tokenizer, prompt, "Alma Rook was born in Oslo.", max_length=64)
    assert encoded.input_ids.count(tokenizer.bos_token_id) == 1
    assert encode_text(tokenizer, prompt).count(tokenizer.bos_token_id) == 1
    plain = encode_prompt_answer(tokenizer, "Where?", " Oslo", max_length=64)
    assert plain.input_ids[0] == tokenizer.bos_token_id  # a plain prompt still gets its BOS


def test_prompt_texts_of_each_family():
    assert PromptTemplate("tofu_llama2").prompt("Q?") == "[INST] Q? [/INST]"
    assert PromptTemplate("tofu_llama2").answer("A.") == "A."
    assert PromptTemplate("tofu_question_answer").prompt("Q?") == "Question: Q?\n"
    assert PromptTemplate("tofu_question_answer").answer("A.") == "Answer: A."
    assert PromptTemplate("question_answer").prompt("Q?") == "Question: Q?\nAnswer:"
    assert PromptTemplate("question_answer").answer("A.") == " A."
    tokenizer = toy_tokenizer()
    tokenizer.chat_template = None
    for model_id, expected in [
        ("locuslab/tofu_ft_llama2-7b", "tofu_llama2"),
        ("NousResearch/Llama-2-7b-chat-hf", "tofu_llama2"),
        ("locuslab/tofu_ft_phi-1.5", "tofu_question_answer"),
        ("microsoft/phi-1_5", "tofu_question_answer"),
        ("stabilityai/stablelm-3b-4e1t", "tofu_question_answer"),
        ("EleutherAI/pythia-1.4b-deduped", "tofu_question_answer"),
        ("runs/demo/model", "question_answer"),
    ]:
        assert resolve_template("auto", tokenizer, model_id).name == expected, model_id
    assert resolve_template("llama2", tokenizer).name == "tofu_llama2"  # the old name still reads
    with pytest.raises(ConfigError, match="no chat template"):
        PromptTemplate("chat").prompt("Q?", tokenizer)


def test_collate_pads_with_the_pad_token_and_masks_it():
    tokenizer = toy_tokenizer()
    examples = toy_examples()[:3]
    for side in ("right", "left"):
        batch = collate(examples, pad_id=tokenizer.pad_token_id, padding_side=side)
        width = batch["input_ids"].shape[1]
        for row, e in enumerate(examples):
            pad = width - len(e.input_ids)
            real = slice(pad, width) if side == "left" else slice(0, len(e.input_ids))
            assert batch["input_ids"][row, real].tolist() == e.input_ids
            assert int(batch["attention_mask"][row].sum()) == len(e.input_ids)
            assert (batch["input_ids"][row] == tokenizer.pad_token_id).sum() == pad
        # EOS stays a trained label: padding never hides it
        assert (batch["labels"] == tokenizer.eos_token_id).sum() == 3


def test_per_sample_nll_by_hand():
    # vocab 2, uniform logits: every token has p = 1/2 -> mean NLL ln 2 whatever the length.
    logits = torch.zeros(2, 4, 2)
    labels = torch.tensor([[IGNORE_INDEX, 1, 0, 1], [IGNORE_INDEX, IGNORE_INDEX, 1, IGNORE_INDEX]])
    assert per_sample_nll(logits, labels).tolist() == pytest.approx([math.log(2)] * 2)
    # make token 1 certain at position 0 (predicting labels[1]): that token's NLL -> ~0
    logits[0, 0] = torch.tensor([-50.0, 50.0])
    logps, mask = answer_token_logprobs(logits, labels)
    assert mask.tolist() == [[True, True, True], [False, True, False]]
    assert per_sample_nll(logits, labels)[0].item() == pytest.approx(2 * math.log(2) / 3, abs=1e-6)
    assert logps[1, 0] == 0.0


def test_the_tiny_model_is_small_and_seeded():
    tokenizer = toy_tokenizer()
    a, b = build_tiny_model(tokenizer, seed=1), build_tiny_model(tokenizer, seed=1)
    assert 100_000 < sum(p.numel() for p in a.parameters()) < 1_000_000
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    with pytest.raises(ConfigError, match="unknown scale 'huge'"):
        build_tiny_model(tokenizer, scale="huge")


@torch.no_grad()
def test_hidden_states_are_each_blocks_own_output_the_last_before_the_final_norm():
    # Issue 32: HF's hidden_states[-1] is the last block's output *after* the model's final norm,
    # so reading hidden_states[layer + 1] steered a different tensor for the last block than the
    # WMDP code and open-unlearning, which hook the block itself.
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, seed=0).eval()
    ids = torch.tensor([[1, 5, 7, 9, 2], [1, 6, 3, 2, 0]])
    batch = {"input_ids": ids, "attention_mask": (ids != 0).long()}
    states = model(**batch, output_hidden_states=True).hidden_states
    last = model.config.num_hidden_layers - 1
    for layer in range(last):  # inner blocks: HF's entry is the block's output
        torch.testing.assert_close(hidden_states_at(model, batch, layer), states[layer + 1])
    own = hidden_states_at(model, batch, last)
    torch.testing.assert_close(model.model.norm(own), states[-1])
    assert (own - states[-1]).abs().max() > 0.1
    with pytest.raises(ConfigError, match=f"layer {last + 1} does not exist"):
        hidden_states_at(model, batch, last + 1)


def test_saved_models_load_with_plain_transformers_and_same_logits(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, seed=3).eval()
    path = save_model(model, tokenizer, tmp_path / "m")
    assert (path / "model.safetensors").is_file() and not list(path.glob("*.bin"))
    plain = AutoModelForCausalLM.from_pretrained(path).eval()
    plain_tokenizer = AutoTokenizer.from_pretrained(path)
    ours, _ = load_model(path)
    batch = collate(toy_examples()[:4], pad_id=tokenizer.pad_token_id)
    assert (
        plain_tokenizer("Where was Alma Rook born?")["input_ids"]
        == tokenizer("Where was Alma Rook born?")["input_ids"]
    )
    with torch.no_grad():
        expected = forward_logits(model, batch)
        assert torch.equal(forward_logits(plain, batch), expected)
        assert torch.equal(forward_logits(ours.eval(), batch), expected)


def test_load_model_errors_are_one_line(tmp_path):
    with pytest.raises(DataError, match="is not a saved model"):
        load_model(tmp_path)
    with pytest.raises(DataError, match="cannot load model 'nobody/no-such-model'"):
        load_model("nobody/no-such-model")


def test_lora_trains_only_adapters_and_merges(tmp_path):
    from transformers import AutoModelForCausalLM

    tokenizer = toy_tokenizer()
    base = build_tiny_model(tokenizer, seed=0)
    before = {k: v.clone() for k, v in base.state_dict().items()}
    model = apply_lora(base, rank=4, alpha=8)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)

    def loss_fn(m, batch):
        return per_sample_nll(forward_logits(m, batch), batch["labels"]).mean()

    config = LoopConfig(lr=1e-2, epochs=3, batch_size=8, per_device_batch_size=8, weight_decay=0.0)
    result = train_loop(
        model,
        toy_examples(),
        loss_fn=loss_fn,
        collate_fn=lambda b: collate(b, pad_id=tokenizer.pad_token_id),
        config=config,
        out_dir=tmp_path / "run",
        progress=False,
    )
    assert result.losses[-1] < result.losses[0]
    unchanged = model.get_base_model().state_dict()
    assert torch.equal(
        unchanged["model.layers.0.self_attn.k_proj.weight"],
        before["model.layers.0.self_attn.k_proj.weight"],
    )
    batch = collate(toy_examples()[:4], pad_id=tokenizer.pad_token_id)
    model.eval()
    with torch.no_grad():
        adapted = forward_logits(model, batch)
    merged = merge_lora(model)
    assert not torch.equal(
        merged.state_dict()["model.layers.0.self_attn.q_proj.weight"],
        before["model.layers.0.self_attn.q_proj.weight"],
    )
    save_model(merged, tokenizer, tmp_path / "merged")
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()
    with torch.no_grad():
        torch.testing.assert_close(forward_logits(reloaded, batch), adapted, rtol=1e-4, atol=1e-4)
