"""The offline default study's models: a tokenizer trained on the miniature corpus, a tiny
Llama pretrained on its background knowledge (the role Llama-2/Phi's pretraining plays for TOFU),
then finetuned on all authors and, as the gold standard, on each retain split.

Recipes are tuned per scale so the finetuned model reproduces its answers while a retain model
has never seen the forget authors; they live here, in one table, with the reason for each.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from forgetbench.data.tofu import load_tofu
from forgetbench.io import read_json_records
from forgetbench.modeling import (
    TINY_SIZES,
    PromptTemplate,
    build_tiny_model,
    encode_prompt_answer,
    train_tokenizer,
)
from forgetbench.train.loop import LoopConfig
from forgetbench.train.stages import StageResult, encode_qa, run_stage

TEMPLATE = PromptTemplate("question_answer")  # the corpus writes its QA pairs in this format


@dataclass(frozen=True)
class MiniRecipe:
    pretrain: LoopConfig
    finetune: LoopConfig  # also the retain models' recipe: same recipe, retain split only


def mini_recipe(scale: str, *, seed: int = 0) -> MiniRecipe:
    # Small models need learning rates ~100x an LLM's 1e-5, and many epochs to memorise 20
    # facts per author; warm-up stays one epoch as in TOFU.
    epochs = {"tiny": (10, 30), "small": (6, 10), "full": (4, 8)}[scale]
    return MiniRecipe(
        pretrain=LoopConfig(
            lr=2e-3,
            epochs=epochs[0],
            batch_size=16,
            per_device_batch_size=16,
            weight_decay=0.01,
            seed=seed,
        ),
        finetune=LoopConfig(
            lr=2e-3,
            epochs=epochs[1],
            batch_size=16,
            per_device_batch_size=16,
            weight_decay=0.01,
            seed=seed,
        ),
    )


def build_tokenizer(run_dir: Path, data_dir: Path, *, scale: str) -> Path:
    """Byte-level BPE over everything the benchmark can show the model, cached by corpus hash."""
    texts = [row["text"] for row in read_json_records(data_dir / "pretrain.jsonl")]
    for record in load_tofu(data_dir / "tofu", "full"):
        texts.append(f"{record.question} {record.answer}")
    digest = hashlib.sha256(json.dumps([scale, texts]).encode()).hexdigest()[:16]
    folder = run_dir / "models" / f"tokenizer-{digest}"
    if not (folder / "tokenizer.json").is_file():
        tokenizer = train_tokenizer(texts, vocab_size=TINY_SIZES[scale].vocab)
        tmp = folder.with_name(folder.name + ".tmp")
        tokenizer.save_pretrained(tmp)
        tmp.rename(folder)
    return folder


def pretrain_base(
    run_dir: str | Path, data_dir: str | Path, *, scale: str, seed: int = 0, progress: bool = True
) -> StageResult:
    """The base model: a fresh tiny Llama trained with plain LM loss on the background corpus."""
    from transformers import AutoTokenizer

    run_dir, data_dir = Path(run_dir), Path(data_dir)
    tokenizer = AutoTokenizer.from_pretrained(build_tokenizer(run_dir, data_dir, scale=scale))
    max_length = TINY_SIZES[scale].max_positions
    # Empty prompt: every token of a document is a label (plain language modelling).
    examples = [
        encode_prompt_answer(tokenizer, "", row["text"], max_length=max_length)
        for row in read_json_records(data_dir / "pretrain.jsonl")
    ]
    # The tokenizer folder is named by its corpus digest; its path would tie the cache to one place.
    name = f"tiny-llama:{scale}:seed{seed}:tokenizer={Path(tokenizer.name_or_path).name}"
    return run_stage(
        run_dir,
        name="pretrain",
        parent=name,
        parent_model=(build_tiny_model(tokenizer, scale=scale, seed=seed), tokenizer),
        examples=examples,
        config=mini_recipe(scale, seed=seed).pretrain,
        progress=progress,
    )


def finetune_mini(
    run_dir: str | Path,
    data_dir: str | Path,
    base_dir: Path,
    *,
    split: str,
    scale: str,
    seed: int = 0,
    progress: bool = True,
) -> StageResult:
    """`full` -> the finetuned model; `retainNN` -> the retain model for forget(100-NN)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    records = load_tofu(Path(data_dir) / "tofu", split)
    examples = encode_qa(records, tokenizer, TEMPLATE, max_length=TINY_SIZES[scale].max_positions)
    name = "finetune" if split == "full" else f"retain-{split}"
    return run_stage(
        run_dir,
        name=name,
        parent=base_dir,
        examples=examples,
        config=mini_recipe(scale, seed=seed).finetune,
        progress=progress,
    )


def mini_unlearn_defaults(method: str, *, layers: int) -> tuple[LoopConfig, dict[str, object]]:
    """Per-method defaults for the built-in tiny models (tuned on tiny scale, forget10): a ~100x
    larger learning rate than on LLMs, TOFU's 5 epochs, small batches because a tiny forget split
    has only a few dozen questions. RMU steers the middle block and trains the MLP down-projection
    of it and the block before, as the paper does at layer 7 of 32 with layers 5-7."""
    lr, options = 1e-3, {}
    if method == "ngdiff":
        # NGDiff steps w - eta * d with |d| ~ 1 (no Adam rescaling), so eta is in weight units;
        # its AutoLR then picks within [0.01, 10] x this.
        lr = 2e-2
    if method == "rmu":
        middle = max(0, layers // 2)
        lr = 1e-2
        options = {
            "layer": middle,
            "update_layers": tuple(range(max(0, middle - 1), middle + 1)),
            "steering_coeff": 5.0,
            "alpha": 10.0,
        }
    return LoopConfig(
        lr=lr, epochs=5, batch_size=4, per_device_batch_size=4, weight_decay=0.0
    ), options
