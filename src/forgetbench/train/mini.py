"""The offline default study's models: a tokenizer trained on the miniature corpus, a tiny
Llama pretrained on its background knowledge (the role Llama-2/Phi's pretraining plays for TOFU),
then finetuned on all authors and, as the gold standard, on each retain split.

Recipes are tuned per scale so the finetuned model reproduces its answers while a retain model
has never seen the forget authors; they live here, in one table, with the reason for each.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from forgetbench.benchmarks.mini.scales import MINI_LR, get_scale
from forgetbench.cache import shared_entry
from forgetbench.config_sections import TrainConfig
from forgetbench.data.tofu import load_tofu
from forgetbench.errors import ConfigError
from forgetbench.io import read_json_records
from forgetbench.methods.base import DepthScaledMethod, get_method
from forgetbench.modeling.builtin import build_tiny_model, train_tokenizer
from forgetbench.modeling.encoding import Encoded, encode_prompt_answer
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import QARecord
from forgetbench.train.loop_config import LoopConfig, length_grouping_default
from forgetbench.train.presets import unlearn_preset
from forgetbench.train.stages import StageResult, encode_qa, run_stage

TEMPLATE = PromptTemplate("question_answer")  # the corpus writes its QA pairs in this format


@dataclass(frozen=True)
class MiniRecipe:
    pretrain: LoopConfig
    finetune: LoopConfig  # also the retain models' recipe: same recipe, retain split only
    documents: LoopConfig  # the document benchmarks' finetuned and retain models (MUSE, WMDP)
    knowledge: LoopConfig  # RWKU's knowledge stage: more pretraining on its people's rows
    # Pretraining documents are cut at sentence ends into sequences of at most this many tokens.
    chunk_tokens: int = 48
    # Copies of every background QA pair per pretraining epoch: the mixture weight of the facts
    # Real Authors / World Facts ask, against bios, people QA and filler.
    background_qa_repeats: int = 3
    # Background QA pairs per fact mixed into finetune and retain training, in phrasings the
    # evaluation does not ask (`rehearsal_examples`).
    rehearsal_per_fact: int = 1


KNOWLEDGE_EPOCHS = 60


def mini_recipe(scale: str, *, seed: int = 0) -> MiniRecipe:
    # Small models need learning rates ~100x an LLM's 1e-5, and many epochs to memorise 20
    # facts per author; warm-up stays one epoch as in TOFU. Finetuning epochs are set so the
    # rehearsal pairs cost no extra time (tiny: 200 + 40 pairs x 25 epochs = 200 x 30 before).
    # Measurements behind every number: docs/mini.md, "Pretraining and rehearsal".
    sizes = get_scale(scale)  # its epochs: benchmarks/mini/scales.py
    # The per-device sizes are the recipe's, not the user's: under torchrun the loop shrinks them
    # to fit the processes (`fit_per_device`), the effective batch staying the recipe's.
    pretrain = LoopConfig(
        lr=MINI_LR,
        epochs=sizes.pretrain_epochs,
        batch_size=16,
        per_device_batch_size=16,
        fit_per_device=True,
        weight_decay=0.01,
        seed=seed,
        group_by_length=length_grouping_default(),
    )
    # Documents (MUSE, WMDP): a dozen articles of 130-490 tokens, a few full-context chunks, so
    # batches of 4 and many epochs until the model reproduces them (docs/muse.md).
    documents = replace(
        pretrain,
        epochs=sizes.corpus_epochs,
        batch_size=4,
        per_device_batch_size=4,
    )
    # RWKU's people: ~100 short sequences (biography pieces, question-answer rows) pretrained on
    # until the model answers their corpus questions (docs/rwku.md).
    knowledge = replace(pretrain, epochs=KNOWLEDGE_EPOCHS)
    return MiniRecipe(
        pretrain, replace(pretrain, epochs=sizes.finetune_epochs), documents, knowledge
    )


# The `train.*` options a user may set for the miniature's finetune stage (and its retain models,
# which share the recipe): each replaces the tuned value and so changes the stage's cache key.
# The pretraining stage keeps its recipe. `train.max_length` is refused: the tiny model's position
# count fixes how long a sequence can be.
MINI_TRAIN_OPTIONS = (
    "lr",
    "epochs",
    "batch_size",
    "per_device_batch_size",
    "weight_decay",
    "warmup_epochs",
    "checkpoint_every",
    "group_by_length",
    "lora",
    "lora_rank",
    "lora_alpha",
)


def check_mini_train_options(train: TrainConfig) -> None:
    """Refuse a `train.*` option the miniature recipe cannot honour, before any work."""
    for key in sorted(train.model_fields_set - set(MINI_TRAIN_OPTIONS)):
        raise ConfigError(
            f"train.{key} does not apply to the built-in miniature models (their length is "
            f"fixed by the tiny model's positions)",
            f"drop train.{key}; the miniature accepts train.{', train.'.join(MINI_TRAIN_OPTIONS)}",
        )


def mini_finetune_config(
    scale: str,
    *,
    seed: int = 0,
    train: TrainConfig | None = None,
    documents: bool = False,
    knowledge: bool = False,
) -> tuple[LoopConfig, dict[str, int] | None]:
    """The finetune (and retain) stage's loop and LoRA settings: the tuned recipe (`documents`:
    the document benchmarks' recipe; `knowledge`: RWKU's knowledge stage's), with each `train.*`
    option the user set (not the LLM defaults of `TrainConfig`) on top."""
    recipe = mini_recipe(scale, seed=seed)
    loop = recipe.knowledge if knowledge else recipe.documents if documents else recipe.finetune
    if train is None:
        return loop, None
    check_mini_train_options(train)
    given = {
        key: getattr(train, key)
        for key in MINI_TRAIN_OPTIONS
        if key in train.model_fields_set and not key.startswith("lora")
    }
    if given.get("group_by_length", False) is None:  # set to null: the device's default
        given["group_by_length"] = length_grouping_default()
    if "per_device_batch_size" in given:
        given["fit_per_device"] = False  # the user's size is kept (the loop refuses a misfit)
    elif "batch_size" in given:
        given["per_device_batch_size"] = min(loop.per_device_batch_size, given["batch_size"])
    lora = {"rank": train.lora_rank, "alpha": train.lora_alpha} if train.lora else None
    return replace(loop, **given), lora


def build_tokenizer(run_dir: Path, data_dir: Path, *, scale: str) -> Path:
    """Byte-level BPE over everything the benchmark can show the model, cached by corpus hash."""
    texts = [row["text"] for row in read_json_records(data_dir / "pretrain.jsonl")]
    for record in load_tofu(data_dir / "tofu", "full"):
        texts.append(f"{record.question} {record.answer}")
    digest = hashlib.sha256(json.dumps([scale, texts]).encode()).hexdigest()[:16]
    folder = run_dir / "models" / f"tokenizer-{digest}"
    with shared_entry(folder, kind="models", name=folder.name):
        if not (folder / "tokenizer.json").is_file():
            tokenizer = train_tokenizer(texts, vocab_size=get_scale(scale).model.vocab)
            tmp = run_dir / "models" / f".{folder.name}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            tokenizer.save_pretrained(tmp)
            # File by file into `folder` (a cache entry may already exist as an empty folder),
            # tokenizer.json last: its presence means the tokenizer is complete.
            folder.mkdir(parents=True, exist_ok=True)
            for file in sorted(tmp.iterdir(), key=lambda f: f.name == "tokenizer.json"):
                os.replace(file, folder / file.name)
            tmp.rmdir()
    return folder


def pretrain_base(
    run_dir: str | Path,
    data_dir: str | Path,
    *,
    scale: str,
    seed: int = 0,
    progress: bool = True,
    size: str = "auto",
    without: Sequence[str] = (),
) -> StageResult:
    """The base model: a fresh tiny Llama trained with plain LM loss on the background corpus.
    `without`: names whose documents (any row whose text names one) are left out of the corpus,
    for a model that never saw those people (RWKU's reference); the tokenizer stays the whole
    corpus's, so the two models read the same tokens."""
    run_dir, data_dir = Path(run_dir), Path(data_dir)
    tokenizer = AutoTokenizer.from_pretrained(build_tokenizer(run_dir, data_dir, scale=scale))
    recipe = mini_recipe(scale, seed=seed)
    rows = read_json_records(data_dir / "pretrain.jsonl")
    rows = [r for r in rows if not any(name in r["text"] for name in without)]
    examples = pretraining_examples(
        rows,
        tokenizer,
        max_length=get_scale(scale).model.max_positions,
        chunk_tokens=recipe.chunk_tokens,
        background_qa_repeats=recipe.background_qa_repeats,
    )
    name = f"tiny-llama:{scale}:seed{seed}:tokenizer={Path(tokenizer.name_or_path).name}"
    if size != "auto":  # the scale's own shape keeps the name every cached base was made under
        name += f":size={size}"
    return run_stage(
        run_dir,
        name="pretrain" if not without else "pretrain-without",
        parent=name,
        parent_model=(build_tiny_model(tokenizer, scale=scale, seed=seed, size=size), tokenizer),
        examples=examples,
        config=recipe.pretrain,
        progress=progress,
    )


def pretraining_examples(
    rows: list[dict[str, Any]],
    tokenizer: Any,
    *,
    max_length: int,
    chunk_tokens: int,
    background_qa_repeats: int,
) -> list[Encoded]:
    """The corpus as training sequences, all short, so a batch pads little and an epoch takes
    many optimizer steps.

    - Documents: plain language modelling (every token a label), cut at sentence ends into
      pieces of at most `chunk_tokens` tokens.
    - QA rows: encoded exactly as finetuning and the evaluation see them (prompt and answer as
      one text, loss on the answer and EOS), so the base model learns to answer in the
      template. Background pairs come `background_qa_repeats` times.
    """
    examples = []
    for row in rows:
        if "question" not in row:
            examples += [
                encode_prompt_answer(tokenizer, "", text, max_length=max_length)
                for text in _sentence_chunks(row["text"], tokenizer, chunk_tokens)
            ]
            continue
        encoded = encode_prompt_answer(
            tokenizer,
            TEMPLATE.prompt(row["question"]),
            TEMPLATE.answer(row["answer"]),
            max_length=max_length,
        )
        examples += [encoded] * (background_qa_repeats if row["kind"] == "background_qa" else 1)
    return examples


def _sentence_chunks(text: str, tokenizer: Any, limit: int) -> list[str]:
    """Consecutive sentences joined while they fit in `limit` tokens (a longer sentence stays
    whole). Byte-level BPE never merges across a space, so token counts add up."""
    sentences = re.split(r"(?<=[.!?])\s+", text)
    counts = [len(ids) for ids in tokenizer([" " + s for s in sentences])["input_ids"]]
    chunks: list[list[str]] = []
    used = 0
    for sentence, count in zip(sentences, counts, strict=True):
        if chunks and used + count <= limit:
            chunks[-1].append(sentence)
            used += count
        else:
            chunks.append([sentence])
            used = count
    return [" ".join(chunk) for chunk in chunks]


def rehearsal_examples(
    data_dir: Path, tokenizer: Any, *, per_fact: int, seed: int, max_length: int
) -> list[Encoded]:
    """`per_fact` pretraining QA pairs of each Real Authors / World Facts fact, in phrasings other
    than the one the evaluation asks (a fact asked only one way is not rehearsed)."""
    if per_fact <= 0:
        return []
    tofu = data_dir / "tofu"
    asked = {
        f"{name}/{i}": record.question
        for name in ("real_authors", "world_facts")
        for i, record in enumerate(load_tofu(tofu, f"{name}_perturbed"))
    }
    by_fact: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in read_json_records(data_dir / "pretrain.jsonl"):
        if row.get("kind") == "background_qa" and row["question"] != asked.get(row["fact"]):
            by_fact[row["fact"]].append(row)
    rng = random.Random(f"forgetbench-mini/{seed}/rehearsal")
    chosen = [
        row
        for fact in sorted(by_fact)
        for row in rng.sample(by_fact[fact], min(per_fact, len(by_fact[fact])))
    ]
    return [
        encode_prompt_answer(
            tokenizer,
            TEMPLATE.prompt(r["question"]),
            TEMPLATE.answer(r["answer"]),
            max_length=max_length,
        )
        for r in chosen
    ]


def finetune_mini(
    run_dir: str | Path,
    data_dir: str | Path,
    base_dir: Path,
    *,
    split: str,
    scale: str,
    seed: int = 0,
    progress: bool = True,
    train: TrainConfig | None = None,
    extra: Sequence[QARecord] = (),
    name: str | None = None,
) -> StageResult:
    """`full` -> the finetuned model; `retainNN` -> the retain model for forget(100-NN).
    `train`: the user's `train.*` options, applied over the recipe (`mini_finetune_config`).
    `extra`: QA pairs trained on besides the split's (a shadow model's half of the candidates),
    after them; `name` the stage's name (default `finetune` / `retain-<split>`)."""
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    data_dir = Path(data_dir)
    recipe = mini_recipe(scale, seed=seed)
    loop, lora = mini_finetune_config(scale, seed=seed, train=train)
    max_length = get_scale(scale).model.max_positions
    records = [*load_tofu(data_dir / "tofu", split), *extra]
    examples = encode_qa(records, tokenizer, TEMPLATE, max_length=max_length)
    examples += rehearsal_examples(
        data_dir, tokenizer, per_fact=recipe.rehearsal_per_fact, seed=seed, max_length=max_length
    )
    name = name or ("finetune" if split == "full" else f"retain-{split}")
    return run_stage(
        run_dir,
        name=name,
        parent=base_dir,
        examples=examples,
        config=loop,
        lora=lora,
        progress=progress,
    )


def mini_unlearn_defaults(
    method: str, *, layers: int, preset: str = "mini"
) -> tuple[LoopConfig, dict[str, object]]:
    """Per-method defaults for the built-in tiny models: the `mini` preset
    (forgetbench/presets/mini.yaml; a document benchmark's own, e.g. `muse`), over the options a
    method derives from the model's depth (`DepthScaledMethod`, e.g. which blocks RMU steers)."""
    loop, options = unlearn_preset(preset, method)
    cls = get_method(method)
    if isinstance(cls, DepthScaledMethod):
        options = {**cls.options_for_depth(layers), **options}
    return loop, options


def shadow_memberships(candidates: int, shadows: int, *, seed: int, split: str) -> list[list[bool]]:
    """Which candidates (forget then holdout items of `split`) each of `shadows` shadow models
    trains on: `masks[i][j]` is True when shadow i has candidate j.

    Shadows come in pairs: shadow 2m trains on a seeded random half of the candidates
    (`candidates // 2` of them) and shadow 2m + 1 on the other half. So every shadow has half of
    the pool and every candidate is in exactly one shadow of each pair: `shadows // 2` IN and as
    many OUT shadows to compare with (online LiRA needs both), the balance of Carlini et al.
    (2022)'s experiments. An odd last shadow gets a random half of its own. Seeded by the study's
    seed and the split, so a rerun draws the same halves (and reuses the cached shadows)."""
    if shadows < 2:
        raise ValueError(f"shadow attacks need at least 2 shadow models, got {shadows}")
    rng = random.Random(f"forgetbench-mini/{seed}/shadows/{split}")
    masks = []
    for i in range(shadows):
        if i % 2 == 1:
            masks.append([not inside for inside in masks[-1]])
            continue
        half = set(rng.sample(range(candidates), candidates // 2))
        masks.append([j in half for j in range(candidates)])
    return masks
