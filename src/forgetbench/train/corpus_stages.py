"""The document benchmarks' model stages over the miniature's pretrained base: MUSE's and
WMDP's finetuned and retain models (`finetune_corpus`, language modelling on text chunks) and
RWKU's knowledge stage (`pretrain_further`, more pretraining on its people's rows, as the corpus
was pretrained)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from forgetbench.benchmarks.mini.scales import get_scale
from forgetbench.config_sections import TrainConfig
from forgetbench.data.chunks import text_chunks
from forgetbench.modeling.encoding import encode_chunk
from forgetbench.train.mini import mini_finetune_config, mini_recipe, pretraining_examples
from forgetbench.train.stages import StageResult, run_stage


def finetune_corpus(
    run_dir: str | Path,
    base_dir: Path,
    texts: Sequence[str],
    *,
    name: str,
    scale: str,
    seed: int = 0,
    progress: bool = True,
    train: TrainConfig | None = None,
) -> StageResult:
    """A document benchmark's finetuned (or retain) model: the base trained on `texts` as plain
    language modelling, in chunks of the model's whole context (`data.chunks`, stream: every token
    of the corpus once an epoch), with the finetune recipe (`mini_finetune_config`). A stage
    like the TOFU-shaped models, cached by its examples, recipe and base."""
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    loop, lora = mini_finetune_config(scale, seed=seed, train=train, documents=True)
    max_length = get_scale(scale).model.max_positions
    chunks = text_chunks(tokenizer, texts, length=max_length - 1, mode="stream")
    examples = [encode_chunk(tokenizer, chunk, max_length=max_length) for chunk in chunks]
    return run_stage(
        run_dir, name=name, parent=base_dir, examples=examples, config=loop, lora=lora,
        progress=progress,
    )  # fmt: skip


def pretrain_further(
    run_dir: str | Path,
    base_dir: Path,
    texts: Sequence[str],
    *,
    name: str,
    scale: str,
    seed: int = 0,
    progress: bool = True,
    train: TrainConfig | None = None,
) -> StageResult:
    """More pretraining of a pretrained model on `texts`, pretrained as the corpus is
    (`pretraining_examples`: documents cut at sentence ends, "Question: q\nAnswer: a" rows as
    a prompt and its answer), with the pretraining recipe for `KNOWLEDGE_EPOCHS` (under the
    user's train.* options): the RWKU miniature's knowledge stage, which
    makes the tiny base know the people it read only a few times in its pretraining."""
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    recipe = mini_recipe(scale, seed=seed)
    loop, lora = mini_finetune_config(scale, seed=seed, train=train, knowledge=True)
    rows: list[dict[str, Any]] = []
    for text in texts:
        question, found, answer = text.removeprefix("Question: ").partition("\nAnswer: ")
        qa = text.startswith("Question: ") and found
        rows.append({"text": text, "kind": "people_qa", "question": question, "answer": answer}
                    if qa else {"text": text, "kind": "people_bio"})  # fmt: skip
    examples = pretraining_examples(
        rows, tokenizer, max_length=get_scale(scale).model.max_positions,
        chunk_tokens=recipe.chunk_tokens, background_qa_repeats=recipe.background_qa_repeats,
    )  # fmt: skip
    return run_stage(
        run_dir, name=name, parent=base_dir, examples=examples, config=loop, lora=lora,
        progress=progress,
    )  # fmt: skip
