"""Models, tokenizers and prompt templates. With `eval/outputs/`, the only code that calls a model.

Any Hugging Face causal LM loads by id or path (safetensors only; `trust_remote_code` only when
asked). The offline default is a small Llama-architecture model built from a config with a BPE
tokenizer trained on the miniature corpus, saved with `save_pretrained` so plain `transformers`
loads it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
import transformers
from huggingface_hub import constants as hf_constants
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from torch import Tensor
from transformers import (
    CONFIG_MAPPING,
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

from forgetbench.benchmarks.mini.scales import SCALES, ModelShape
from forgetbench.config_names import MODEL_SIZES
from forgetbench.device import DTYPES, place_model, precision, to_model_device
from forgetbench.errors import ConfigError, DataError, ForgetbenchError, ModelError
from forgetbench.io import read_json
from forgetbench.records import IGNORE_INDEX

TemplateName = Literal["question_answer", "tofu_llama2", "tofu_question_answer", "chat"]
TEMPLATES: tuple[str, ...] = ("question_answer", "tofu_llama2", "tofu_question_answer", "chat")
# Older names kept readable: `llama2` was always TOFU's Llama-2 format.
TEMPLATE_ALIASES = {"llama2": "tofu_llama2"}

BOS, EOS, PAD = "<s>", "</s>", "<pad>"


# The sizes people run, as `model.size` for the built-in model (the world and its tokenizer stay
# the scale's, so the vocabulary is the scale's): GPT-2-small-like ~125M, and the block shapes of
# Llama-3.2-1B and Llama-3-8B (grouped-query attention). Without their 128k-token vocabularies
# they hold ~0.11 B, ~0.97 B and ~6.98 B parameters outside the embeddings.
LLAMA_SHAPES: dict[str, ModelShape] = {
    "125m": ModelShape(
        hidden=768, layers=12, heads=12, intermediate=3072, vocab=0, max_positions=2048
    ),
    "1b": ModelShape(
        hidden=2048, layers=16, heads=32, intermediate=8192, vocab=0, max_positions=2048,
        kv_heads=8,
    ),
    "8b": ModelShape(
        hidden=4096, layers=32, heads=32, intermediate=14336, vocab=0, max_positions=2048,
        kv_heads=8,
    ),
}  # fmt: skip
assert set(MODEL_SIZES) == {"auto", *SCALES, *LLAMA_SHAPES}


@dataclass(frozen=True)
class PromptTemplate:
    """How a model family lays out a question and its answer as one text: `prompt(q)` then
    `answer(a)`, tokenised together. Every token of `answer(a)` is scored (plus the final EOS);
    the prompt is masked out of every loss and metric and is what generation continues from.

    Token for token as the checkpoints were trained (TOFU's `config/model_config.yaml` and
    `data_module.convert_raw_data_to_model_format`: question_start_tag + q + question_end_tag,
    then answer_tag + a, one tokenizer call):
    - `question_answer` (the miniature's): `Question: {q}\nAnswer:` + ` {a}`. The separating
      space belongs to the answer, so the text is natural and no token straddles the boundary.
    - `tofu_llama2` (TOFU's Llama-2-7b-chat, `locuslab/tofu_ft_llama2-7b`): `[INST] {q} [/INST]`
      + `{a}` (answer tag "", no space: TOFU trained on `[/INST]Umar ...`).
    - `tofu_question_answer` (TOFU's phi-1.5, stablelm, pythia): `Question: {q}\n` +
      `Answer: {a}`; TOFU scores the answer tag `Answer: ` as part of the answer, and so do we.
    - `chat`: the tokenizer's chat template with the generation prompt, then `{a}`.
    """

    name: TemplateName

    def prompt(self, question: str, tokenizer: object | None = None) -> str:
        if self.name == "question_answer":
            return f"Question: {question}\nAnswer:"
        if self.name == "tofu_llama2":
            return f"[INST] {question} [/INST]"
        if self.name == "tofu_question_answer":
            return f"Question: {question}\n"
        apply = getattr(tokenizer, "apply_chat_template", None)
        if apply is None or not getattr(tokenizer, "chat_template", None):
            raise ConfigError(
                "model.template=chat but the tokenizer has no chat template",
                "use model.template=question_answer, tofu_llama2 or tofu_question_answer",
            )
        messages = [{"role": "user", "content": question}]
        return apply(messages, tokenize=False, add_generation_prompt=True)

    def answer(self, answer: str) -> str:
        """The text that follows the prompt: answer tag and separator, then the answer."""
        if self.name == "question_answer":
            return f" {answer}"
        if self.name == "tofu_question_answer":
            return f"Answer: {answer}"
        return answer


def resolve_template(name: str, tokenizer: object, model_name: str = "") -> PromptTemplate:
    """`auto`: TOFU's own format for TOFU's finetuned checkpoints (`locuslab/tofu_ft_llama2-7b`,
    `locuslab/tofu_ft_phi-1.5`, and their Llama-2-chat / phi / stablelm / pythia bases), the
    tokenizer's chat template if it has one, else `question_answer`."""
    name = TEMPLATE_ALIASES.get(name, name)
    if name == "auto":
        lowered = str(model_name).lower().replace("_", "-")
        llama2 = "llama-2" in lowered or "llama2" in lowered
        if llama2 and ("chat" in lowered or "tofu" in lowered):
            return PromptTemplate("tofu_llama2")
        if any(family in lowered for family in ("phi-1", "stablelm", "pythia")):
            return PromptTemplate("tofu_question_answer")
        if getattr(tokenizer, "chat_template", None):
            return PromptTemplate("chat")
        return PromptTemplate("question_answer")
    if name not in TEMPLATES:
        raise ConfigError(
            f"unknown model.template '{name}'", f"use auto or one of {', '.join(TEMPLATES)}"
        )
    return PromptTemplate(name)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Encoded:
    input_ids: list[int]
    labels: list[int]  # IGNORE_INDEX on prompt tokens; answer tokens and the final EOS are trained
    prompt_length: int


def adds_bos(tokenizer: object, text: str) -> bool:
    """Whether to let the tokenizer add its special tokens: not when the text already opens with
    BOS (a rendered chat template), so BOS is never doubled."""
    bos = getattr(tokenizer, "bos_token", None)
    return not (bos and text.startswith(bos))


def encode_text(tokenizer: object, text: str) -> list[int]:
    """A prompt's ids as the model sees them before its answer (generation, prompt caches)."""
    return tokenizer(text, add_special_tokens=adds_bos(tokenizer, text))["input_ids"]  # type: ignore[operator]


def _split_prompt_answer(tokenizer: object, prompt: str, text: str) -> tuple[list[int], int]:
    """`text` = prompt + answer tokenised once: its ids, and how many leading ones belong to the
    prompt, i.e. end at or before the prompt's last character (by character offsets). A token
    that starts in the prompt and ends in the answer makes the split ambiguous, and is an error."""
    boundary = len(prompt)
    special = adds_bos(tokenizer, text)
    head = tokenizer(prompt, add_special_tokens=special)["input_ids"]  # type: ignore[operator]
    try:
        encoded = tokenizer(text, add_special_tokens=special, return_offsets_mapping=True)  # type: ignore[operator]
    except NotImplementedError:  # slow (Python) tokenizers have no offsets: compare prefixes
        ids = tokenizer(text, add_special_tokens=special)["input_ids"]  # type: ignore[operator]
        if ids[: len(head)] != head:
            raise _straddle_error(tokenizer, prompt, text) from None
        return ids, len(head)
    count = 0
    for start, end in encoded["offset_mapping"]:
        if end <= boundary or (start == end == 0 and count == 0):
            count += 1
        elif start < boundary:
            raise _straddle_error(tokenizer, prompt, text)
        else:
            break
    # Offsets alone can hide a straddle: byte-level tokenizers with trim_offsets report " Umar"
    # without its space. The prompt tokenised alone must be exactly the counted tokens.
    ids = encoded["input_ids"]
    if ids[:count] != head:
        raise _straddle_error(tokenizer, prompt, text)
    return ids, count


def _straddle_error(tokenizer: object, prompt: str, text: str) -> DataError:
    return DataError(
        f"a token spans the end of the prompt {prompt[-20:]!r} and the start of its answer "
        f"{text[len(prompt) : len(prompt) + 20]!r}, so the scored tokens are ambiguous",
        "use a template whose prompt ends where a token ends (put the separating space on the "
        "answer side, as model.template=question_answer does)",
    )


def encode_prompt_answer(
    tokenizer: object, prompt: str, answer: str, *, max_length: int, add_eos: bool = True
) -> Encoded:
    """Tokenise prompt + answer as ONE text, as TOFU's and open-unlearning's data code do (the
    published checkpoints were trained that way); the answer's tokens are those after the prompt's
    last character. The answer keeps an EOS so the model learns to stop, and it is scored, as
    TOFU's labels score it."""
    ids, n_prompt = _split_prompt_answer(tokenizer, prompt, prompt + answer)
    if add_eos:
        ids = [*ids, tokenizer.eos_token_id]  # type: ignore[attr-defined]
    ids = ids[:max_length]
    labels = ([IGNORE_INDEX] * n_prompt + ids[n_prompt:])[:max_length]
    return Encoded(ids, labels, n_prompt)


def encode_chunk(tokenizer: object, text: str, *, max_length: int) -> Encoded:
    """A document chunk as plain language modelling: every token a label (the BOS the tokenizer
    adds is a label too, and never predicted), no EOS since a chunk may end mid-document, as MUSE's
    and WMDP's training code label their chunks."""
    return encode_prompt_answer(tokenizer, "", text, max_length=max_length, add_eos=False)


def collate(
    examples: Sequence[Encoded], *, pad_id: int, padding_side: str = "right"
) -> dict[str, Tensor]:
    """Pad a batch with the real pad token (never by reusing EOS, whose labels must stay)."""
    width = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, e in enumerate(examples):
        n = len(e.input_ids)
        cols = slice(width - n, width) if padding_side == "left" else slice(0, n)
        ids[row, cols] = torch.tensor(e.input_ids)
        labels[row, cols] = torch.tensor(e.labels)
        mask[row, cols] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def train_tokenizer(texts: Iterable[str], *, vocab_size: int):  # -> PreTrainedTokenizerFast
    """Byte-level BPE trained on our corpus: no unknown characters, no download."""
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer=trainer)
    bos_id = core.token_to_id(BOS)
    core.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", special_tokens=[(BOS, bos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD
    )


def build_tiny_model(
    tokenizer: object, *, scale: str = "tiny", seed: int = 0, size: str = "auto"
):  # -> LlamaForCausalLM
    """A Llama-architecture model from a config, initialised from `seed`: the scale's own shape,
    or `size` (`model.size`: another scale's, or 125m / 1b / 8b). Dropout stays 0 so a run is a
    deterministic function of seed and data (and resume reproduces it exactly)."""
    if scale not in SCALES:
        raise ConfigError(
            f"unknown scale '{scale}' for the tiny model", f"use one of {', '.join(SCALES)}"
        )
    if size not in MODEL_SIZES:
        raise ConfigError(f"model.size must be one of {', '.join(MODEL_SIZES)}, got {size!r}")
    shape = LLAMA_SHAPES.get(size) or SCALES[scale if size == "auto" else size].model
    config = LlamaConfig(
        vocab_size=len(tokenizer),  # type: ignore[arg-type]
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads or shape.heads,
        intermediate_size=shape.intermediate,
        max_position_embeddings=shape.max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,  # type: ignore[attr-defined]
        eos_token_id=tokenizer.eos_token_id,  # type: ignore[attr-defined]
        pad_token_id=tokenizer.pad_token_id,  # type: ignore[attr-defined]
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id  # type: ignore[attr-defined]
    return model


# Files a saved tokenizer leaves in its folder (any one is enough for AutoTokenizer).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "vocab.json",
    "vocab.txt",
    "spiece.model",
)
_LOAD_HINT = (
    "check the id or path (weights must be safetensors; HF_HUB_OFFLINE=1 forbids downloads)"
)


def check_model_source(name_or_path: str | Path, *, trust_remote_code: bool = False) -> None:
    """Refuse, before anything is loaded or trained, a model folder that cannot work: no folder,
    no config.json (or one that is not JSON), code it needs but may not run, an architecture
    transformers does not know, no tokenizer, truncated or corrupt safetensors. Cheap: reads
    config.json and each weights file's header, never the weights. A Hub id is left to
    transformers (its files are checked there)."""
    source = str(name_or_path)
    folder = Path(source).expanduser()
    if not folder.exists():
        if source.startswith(("/", ".", "~")) or source.count("/") > 1:
            raise ModelError(
                f"model folder '{source}' does not exist", "check the path passed as --model"
            )
        return  # a Hugging Face id
    if not (folder / "config.json").is_file():
        raise ModelError(
            f"'{source}' is not a saved model (no config.json)", "pass a save_pretrained folder"
        )
    config = read_json(folder / "config.json", what="model config")
    if not isinstance(config, dict):
        raise ModelError(f"{folder / 'config.json'} is not a JSON object", "re-save the model")
    auto_map = config.get("auto_map")
    if auto_map and not trust_remote_code:
        classes = ", ".join(
            sorted(map(str, auto_map.values() if isinstance(auto_map, dict) else []))
        )
        raise ModelError(
            f"model '{source}' needs its own Python code to load (config.json auto_map: "
            f"{classes or auto_map})",
            "pass model.trust_remote_code=true if you trust that code",
        )
    model_type = config.get("model_type")
    if isinstance(model_type, str) and not auto_map and model_type not in CONFIG_MAPPING:
        raise ModelError(
            f"model '{source}' has model_type '{model_type}', which transformers "
            f"{transformers.__version__} does not know",
            "upgrade transformers, or use a model of a known architecture",
        )
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ModelError(
            f"model folder '{source}' has no tokenizer (none of {', '.join(TOKENIZER_FILES)})",
            "save the tokenizer beside the model (tokenizer.save_pretrained(folder)), "
            "e.g. copied from the model it was trained from",
        )
    weights = sorted(folder.glob("*.safetensors"))
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = read_json(index, what="safetensors index").get("weight_map", {})
        for shard in sorted(set(weight_map.values()) if isinstance(weight_map, dict) else []):
            if not (folder / str(shard)).is_file():
                raise ModelError(
                    f"model '{source}': weights file {shard} named in {index.name} is missing",
                    "re-download or re-save the model",
                )
    for path in weights:
        _check_safetensors(source, path)


def _check_safetensors(source: str, path: Path) -> None:
    """A safetensors file is an 8-byte header length, a JSON header, then the tensors; the
    header's largest end offset must be exactly where the file ends."""
    size = path.stat().st_size
    hint = "an interrupted download or save? re-download or re-save the model"
    with path.open("rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if n < 0 or n > size - 8:
            raise ModelError(
                f"model '{source}': {path.name} is not a safetensors file or is truncated "
                f"({size} bytes)",
                hint,
            )
        try:
            header = json.loads(f.read(n))
            end = max(
                (int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"),
                default=0,
            )
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            raise ModelError(f"model '{source}': {path.name} has a corrupt header", hint) from None
    if 8 + n + end != size:
        raise ModelError(
            f"model '{source}': {path.name} is truncated or corrupt "
            f"({size} bytes, its header describes {8 + n + end})",
            hint,
        )


def _load_failure(source: str, exc: Exception, part: str) -> ModelError:
    """One line for a transformers / huggingface_hub / tokenizers / safetensors failure."""
    first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    if "custom code" in first or "trust_remote_code" in first:
        return ModelError(
            f"model '{source}' needs its own Python code to load",
            "pass model.trust_remote_code=true if you trust that code",
        )
    if not Path(source).exists():
        if hf_constants.HF_HUB_OFFLINE:
            return ModelError(
                f"cannot load model '{source}': it is not a local folder, and not in the "
                "Hugging Face cache (HF_HUB_OFFLINE=1 forbids downloading it)",
                "pass a saved model folder, or download it first (unset HF_HUB_OFFLINE)",
            )
        return ModelError(
            f"cannot load model '{source}': {first}",
            "check the Hugging Face id (a private or gated model needs 'hf auth login')",
        )
    return ModelError(f"cannot load the {part} of model '{source}': {first}", _LOAD_HINT)


def load_tokenizer(name_or_path: str | Path, *, trust_remote_code: bool = False):
    """The tokenizer of a model by Hugging Face id or folder, after `check_model_source` (so a
    command that reads the tokenizer first also refuses broken weights before any work)."""
    source = str(name_or_path)
    check_model_source(source, trust_remote_code=trust_remote_code)
    try:
        return AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    except (ForgetbenchError, MemoryError):
        raise
    except Exception as exc:  # transformers, tokenizers and the Hub raise many kinds
        raise _load_failure(source, exc, "tokenizer") from None


def load_model(
    name_or_path: str | Path,
    *,
    dtype: str | None = None,
    device: str | None = None,
    trust_remote_code: bool = False,
):  # -> (PreTrainedModel, PreTrainedTokenizerBase)
    """Any causal LM by Hugging Face id or local folder; weights only from safetensors, placed on
    `device` (default: the configured `model.device`). Every way a user's model can fail to load
    is a ModelError naming it."""
    source = str(name_or_path)
    tokenizer = load_tokenizer(source, trust_remote_code=trust_remote_code)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source,
            dtype=DTYPES[dtype or precision().dtype],
            use_safetensors=True,
            trust_remote_code=trust_remote_code,
        )
    except (ForgetbenchError, MemoryError):
        raise
    except Exception as exc:
        raise _load_failure(source, exc, "weights") from None
    if tokenizer.pad_token_id is None:
        # Decoder-only checkpoints often ship without a pad token; add a real one rather than
        # aliasing EOS, whose positions must stay visible to the loss and to stopping.
        tokenizer.add_special_tokens({"pad_token": PAD})
        model.resize_token_embeddings(len(tokenizer))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return place_model(model, device), tokenizer


def save_model(model: object, tokenizer: object, path: str | Path) -> Path:
    """save_pretrained (safetensors) into a temp folder, then rename: a half-written model
    folder never exists under its final name."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        if is_lora(model):  # a snapshot mid-run: the merged weights, as every evaluator loads
            base = model.get_base_model()  # type: ignore[attr-defined]
            base.save_pretrained(tmp, state_dict=merged_state_dict(model), safe_serialization=True)
        else:
            model.save_pretrained(tmp, safe_serialization=True)  # type: ignore[attr-defined]
        tokenizer.save_pretrained(tmp)  # type: ignore[attr-defined]
        if path.exists():
            shutil.rmtree(path)
        tmp.rename(path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def model_context(model: object) -> int | None:
    """The longest sequence the model (or its config) has positions for
    (`max_position_embeddings`; GPT-2's `n_positions` maps to it), or None when it does not say."""
    config = getattr(model, "config", model)
    context = getattr(config, "max_position_embeddings", None)
    return context if isinstance(context, int) and context > 0 else None


def position_limit(model: object) -> int | None:
    """The size of the model's learned table of absolute positions (GPT-2's `wpe`, OPT's and
    BART's `embed_positions`), past which a sequence indexes out of it; None for rotary or ALiBi
    models (Llama, Mistral, Qwen, the built-in one), which have no table to run off."""
    for name, module in getattr(model, "named_modules", lambda: ())():
        leaf = name.rsplit(".", 1)[-1]
        if isinstance(module, torch.nn.Embedding) and leaf in ("wpe", "embed_positions"):
            offset = getattr(module, "offset", 0)  # OPT keeps two extra rows at the front
            return module.num_embeddings - offset
    return None


def forward_logits(model: object, batch: dict[str, Tensor]) -> Tensor:
    """(B, T, V) next-token logits. The single place training code runs the model; the batch
    goes to the model's device first (a frozen reference model reads the same batch)."""
    batch = to_model_device(batch, model)
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits  # type: ignore[operator]


# LoRA's default targets, by the names architectures give their attention's query and value
# projections (the LoRA paper's choice): Llama, Mistral, Qwen, Phi-3 ... name them q_proj/v_proj;
# GPT-2 fuses them in c_attn, GPT-NeoX/Pythia in query_key_value. Any other architecture gets
# every linear layer but the output head (PEFT's "all-linear").
_LORA_TARGETS = (("q_proj", "v_proj"), ("c_attn",), ("query_key_value",), ("Wqkv",))


def lora_targets(model: object) -> list[str] | str:
    """The modules LoRA adapts in `model` when none are given, found from its architecture."""
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}  # type: ignore[attr-defined]
    for targets in _LORA_TARGETS:
        if set(targets) <= names:
            return list(targets)
    return "all-linear"


def apply_lora(
    model: object,
    *,
    rank: int = 8,
    alpha: int = 16,
    target_modules: Sequence[str] | None = None,
    layers: Sequence[int] | None = None,
):
    """Wrap `model` with PEFT LoRA adapters (on `target_modules`, default: found from the
    architecture by `lora_targets`; with `layers`, only in those decoder blocks); only the
    adapters train."""
    from peft import LoraConfig, get_peft_model  # lazy: ~4.5 s to import, only LoRA runs need it

    if rank < 1:
        raise ConfigError(f"train.lora_rank must be >= 1, got {rank}")
    full_names = {name for name, _ in model.named_modules()}  # type: ignore[attr-defined]
    names = full_names | {name.rsplit(".", 1)[-1] for name in full_names}
    missing = [t for t in target_modules or () if t not in names]
    if missing:
        raise ConfigError(
            f"lora_targets: this model has no module named {', '.join(missing)}",
            "name modules it has (a name in model.named_modules() or its last part), or leave "
            "lora_targets unset to find them from the architecture",
        )
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        target_modules=list(target_modules) if target_modules else lora_targets(model),
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
        # Absent unless asked: PEFT then adapts every block, as every LoRA run before it did.
        **({"layers_to_transform": sorted(layers)} if layers else {}),
    )
    return get_peft_model(model, config)


def merge_lora(model: object):
    """Fold the adapters into the base weights so plain `transformers` loads the result."""
    return model.merge_and_unload()  # type: ignore[attr-defined]


def is_lora(model: object) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "get_base_model")


def merged_state_dict(model: object) -> dict[str, Tensor]:
    """The base architecture's weights with the LoRA adapters folded in, computed aside (the
    trained model keeps its adapters and its base weights bit for bit): what a snapshot saves
    mid-run, without the second full copy `merge_and_unload` on a deep copy would need on GPU."""
    from peft.tuners.lora import LoraLayer  # lazy, as in apply_lora

    base = model.get_base_model()  # type: ignore[attr-defined]
    merged: dict[str, Tensor] = {}
    for name, module in base.named_modules():
        if isinstance(module, LoraLayer):
            layer = module.get_base_layer()
            delta = sum(module.get_delta_weight(a) for a in module.active_adapters)
            merged[f"{name}.weight"] = (layer.weight + delta).to(layer.weight.dtype).detach()
            if getattr(layer, "bias", None) is not None:
                merged[f"{name}.bias"] = layer.bias.detach()
    for key, value in base.state_dict().items():
        if "lora_" not in key:
            merged.setdefault(key.replace(".base_layer.", "."), value.detach())
    return merged


class AdaptersDisabled:
    """A LoRA-wrapped model seen with its adapters off: the start model, the reference a method
    compares against, without a second copy of the weights. Called like the model (no grad)."""

    def __init__(self, model: object) -> None:
        self.model = model

    def __call__(self, *args: object, **kwargs: object) -> object:
        with torch.no_grad(), self.model.disable_adapter():  # type: ignore[attr-defined]
            return self.model(*args, **kwargs)  # type: ignore[operator]

    def parameters(self, recurse: bool = True):  # noqa: ANN201 - torch's iterator
        return self.model.parameters(recurse)  # type: ignore[attr-defined]

    def modules(self):  # noqa: ANN201
        return self.model.modules()  # type: ignore[attr-defined]

    def eval(self) -> AdaptersDisabled:
        return self

    def __getattr__(self, name: str) -> object:
        return getattr(self.model, name)


def decoder_blocks(model: object) -> torch.nn.ModuleList:
    """The model's decoder blocks, in order: the first ModuleList with one entry per hidden layer
    (`model.layers` of Llama, Mistral, Qwen; `transformer.h` of GPT-2), found through any
    wrapper (PEFT, DDP) since it only walks the module tree."""
    inner = getattr(model, "module", model)
    depth = getattr(getattr(inner, "config", None), "num_hidden_layers", None)
    for module in inner.modules():  # type: ignore[attr-defined]
        if isinstance(module, torch.nn.ModuleList) and len(module) == depth:
            return module
    raise ModelError(
        f"cannot find the decoder blocks of this model (no module list of {depth} blocks)",
        "representation methods (RMU) need a model whose config names num_hidden_layers",
    )


def hidden_states_at(model: object, batch: dict[str, Tensor], layer: int) -> Tensor:
    """(B, T, H) output of decoder block `layer` itself, read by a forward hook on the block as
    the WMDP code and open-unlearning do. Not HF's `hidden_states[layer + 1]`: for the last block
    that entry is taken after the model's final norm, a different tensor. Used by RMU."""
    blocks = decoder_blocks(model)
    if not 0 <= layer < len(blocks):
        raise ConfigError(
            f"layer {layer} does not exist",
            f"the model has {len(blocks)} decoder blocks (0..{len(blocks) - 1})",
        )
    batch = to_model_device(batch, model)
    captured: list[Tensor] = []

    def keep(_module: object, _inputs: object, output: object) -> None:
        # Blocks return a tensor (transformers 5) or a tuple whose first entry is it (4.x).
        captured.append(output[0] if isinstance(output, tuple) else output)  # type: ignore[arg-type]

    handle = blocks[layer].register_forward_hook(keep)
    try:
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])  # type: ignore[operator]
    finally:
        handle.remove()
    return captured[0]
