"""The sections of a run config that set up one model's run: the benchmark and split
(`benchmark.*`), the model (`model.*`), finetuning (`train.*`), unlearning (`unlearn.*`) and
evaluation (`eval.*`), each field with its default, valid range and description; the rule every
section follows (`_Section`). The study's own sections are config_study.py's; `RunConfig`, which
holds them all, is config.py's."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from forgetbench.config_names import BENCHMARKS, MODEL_SIZES, SPLITS, MethodName
from forgetbench.device_names import DEVICE_SPEC, DTYPE_NAMES, MIXED_PRECISIONS, SHARDINGS


class _Section(BaseModel):
    # Once for every section: no number of the config means anything at infinity (an lr, a
    # warm-up, a threshold), and NaN compares false with every bound, so both are refused here
    # rather than field by field; an empty string is never a name, a path or a folder.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, str_min_length=1)


class BenchmarkConfig(_Section):
    name: Literal[BENCHMARKS] = Field(  # type: ignore[valid-type]
        "mini",
        description="mini = the built-in offline miniature; tofu or lume need data; muse, wmdp "
        "and rwku train the built-in tiny models on their miniature (or on --data), or study "
        "your own with --model and --data",
    )
    path: str | None = Field(None, description="local folder or Hugging Face dataset id")
    # Checked here, so a misspelt split fails before any data or training work.
    split: Literal[SPLITS] = Field(  # type: ignore[valid-type]
        "forget10",
        description="the split: a forget split (forget01, forget05, forget10) to unlearn or "
        "evaluate; full or retainNN to finetune",
    )


class ModelConfig(_Section):
    name: str = Field(
        "tiny-llama", description="Hugging Face id or local path; tiny-llama = built-in"
    )
    # llama2 is the old name of tofu_llama2.
    template: Literal[
        "auto", "question_answer", "tofu_llama2", "tofu_question_answer", "chat", "llama2"
    ] = Field(
        "auto",
        description="how a question and its answer are laid out; auto = TOFU's own format for "
        "TOFU's checkpoints",
    )
    dtype: Literal[DTYPE_NAMES] = Field(  # type: ignore[valid-type]
        "float32", description="weights' dtype: loaded models and the built-in ones"
    )
    device: str = Field(
        "auto",
        pattern=DEVICE_SPEC,
        description="where every model runs: auto (the GPU when torch sees one), cpu, cuda, cuda:N",
    )
    size: Literal[MODEL_SIZES] = Field(  # type: ignore[valid-type]
        "auto",
        description="the built-in model's shape: auto (the scale's), tiny, small, full, or the "
        "sizes people run: 125m, 1b, 8b (Llama-3 block shapes)",
    )
    mixed_precision: Literal[MIXED_PRECISIONS] = Field(  # type: ignore[valid-type]
        "no", description="training autocast over float32 weights (accelerate): no, bf16, fp16"
    )
    gradient_checkpointing: bool = Field(
        False, description="recompute activations in training: less memory, ~30% more time"
    )
    compile: bool = Field(
        False,
        description="torch.compile the trained model's forward (a first step that compiles, "
        "faster steps after it)",
    )
    liger_kernel: bool = Field(
        True,
        description="in training on a CUDA GPU, liger-kernel's RMSNorm, RoPE and SwiGLU kernels "
        "for Llama-family models when installed (pip install forgetbench[gpu]); never on the CPU",
    )
    padding_free: bool | None = Field(
        None,
        description="train on padding-free batches (each batch's sequences in one row, "
        "positions restarting per sequence): the same losses, no padded position computed; "
        "unset = on when training on a CUDA GPU with flash attention, off on the CPU",
    )
    sharding: Literal[SHARDINGS] = Field(  # type: ignore[valid-type]
        "none",
        description="how launched processes hold the trained model: none (each a full copy, DDP), "
        "fsdp (each a shard: PyTorch FSDP2)",
    )
    trust_remote_code: bool = Field(
        False, description="let a Hub model run its own code (auto_map); only for models you trust"
    )


class TrainConfig(_Section):
    # The built-in miniature trains with its own tuned recipe (forgetbench.train.mini); only the
    # train.* keys the user sets replace its values, not these LLM defaults.
    lr: float = Field(
        1e-5, gt=0, le=1.0, description="finetuning learning rate; the miniature's own unless set"
    )
    epochs: int = Field(
        5, ge=1, le=10_000, description="finetuning epochs; the miniature's own unless set"
    )
    batch_size: int = Field(32, ge=1, description="effective batch size")
    per_device_batch_size: int = Field(4, ge=1, description="examples per forward pass")
    weight_decay: float = Field(0.01, ge=0, le=1.0, description="AdamW weight decay")
    warmup_epochs: float = Field(1.0, ge=0, description="linear warm-up, in epochs")
    max_length: int = Field(512, ge=8, description="tokens per prompt+answer; longer ones are cut")
    checkpoint_every: int = Field(0, ge=0, description="optimizer steps; 0 = at each epoch end")
    group_by_length: bool | None = Field(
        None,
        description="batch questions of similar length together, as HF Trainer's "
        "group_by_length: less padding, another data order; unset = on when training on a "
        "CUDA GPU, off on the CPU",
    )
    lora: bool = Field(False, description="train LoRA adapters instead of every weight")
    lora_rank: int = Field(8, ge=1, description="LoRA rank")
    lora_alpha: int = Field(16, ge=1, description="LoRA alpha")


def _block_range(value: Any) -> Any:
    """`"a-b"` as RWKU's `--train_layers` reads it (blocks a up to b, b excluded); a list or
    None as it is."""
    if not isinstance(value, str):
        return value
    low, dash, high = value.partition("-")
    if not (dash and low.strip().isdigit() and high.strip().isdigit()) or int(low) >= int(high):
        raise PydanticCustomError(
            "block_range",
            "must be a list of block indices or a range a-b with a < b (blocks a to b-1, as "
            "RWKU's --train_layers), got {value}",
            {"value": repr(value)},
        )
    return list(range(int(low), int(high)))


class UnlearnConfig(_Section):
    method: MethodName = Field("grad_ascent", description="a registered unlearning method")
    # Unset = the model's preset (forgetbench/presets: tofu.yaml for real LLMs, mini.yaml for the
    # built-in tiny models, tuned per method).
    epochs: int | None = Field(
        None, ge=1, le=10_000, description="unlearning epochs; unset = the model's preset"
    )
    lr: float | None = Field(
        None, gt=0, le=1.0, description="unlearning learning rate; unset = the model's preset"
    )
    batch_size: int | None = Field(None, ge=1, description="effective batch (TOFU: 32)")
    per_device_batch_size: int | None = Field(None, ge=1, description="examples per forward pass")
    snapshot_every: int = Field(
        0, ge=0, description="optimizer steps between saved trajectory models; 0 = each epoch"
    )
    # docs/methods.md, "Loss reduction": which methods' terms this changes, and which papers and
    # code bases average which way.
    loss_reduction: Literal["tokens", "samples"] = Field(
        "tokens",
        description="how a method's token-averaged terms (NLL and the like) average over a "
        "batch: tokens = over every answer token of the batch (HF's loss; TOFU's and "
        "open-unlearning's code), samples = per sample, then over the samples",
    )
    # A file of forgetbench/presets (docs/config.md): its loop and per-method options replace the
    # model's defaults; the options that describe the model (RMU's steered block) are kept.
    preset: str | None = Field(
        None,
        description="unlearning preset, e.g. open_unlearning (its trainer configs); unset = the "
        "model's (mini for the built-in tiny models, tofu for any other)",
    )
    refusals_file: str | None = Field(
        None, description="one refusal a line for idk/dpo (default: forgetbench's own 100)"
    )
    lora: bool = Field(
        False,
        description="train LoRA adapters only; a method's reference model is the same weights "
        "with the adapters off (no second copy)",
    )
    lora_rank: int = Field(8, ge=1, description="LoRA rank")
    lora_alpha: int = Field(16, ge=1, description="LoRA alpha")
    lora_targets: list[str] | None = Field(
        None,
        description="modules LoRA adapts; unset = found from the architecture (q_proj,v_proj; "
        "c_attn; query_key_value; else every linear layer)",
    )
    # RWKU's --train_layers a-b trains the blocks range(a, b); "a-b" is read the same way.
    layers: Annotated[list[int] | None, BeforeValidator(_block_range)] = Field(
        None,
        description="decoder blocks (0-based) whose weights unlearning trains, every other weight "
        "frozen, e.g. [4, 5] or 4-6 (RWKU's --train_layers: 6 excluded); with unlearn.lora only "
        "they carry adapters; unset = every block",
    )


def _target_names(value: Any) -> Any:
    # A number typed bare (rwku.targets=[2]) names the target numbered 2, as "2" does.
    if isinstance(value, list):
        return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value


class RWKUConfig(_Section):
    """RWKU's settings (docs/rwku.md): which targets one run forgets, and its forget corpus."""

    targets: Annotated[list[str] | None, BeforeValidator(_target_names)] = Field(
        None,
        description="RWKU targets to unlearn: names, folders (1_Stephen_King), numbers or "
        "ranges (1-10, both ends included); unset = every target",
    )
    batch: bool = Field(
        False,
        description="batch-target unlearning: one run forgets every target of rwku.targets "
        "together (RWKU's batch setting); false = one run per target (single-target)",
    )
    corpus: Literal["given", "generated"] = Field(
        "given",
        description="the forget corpus: given = RWKU's files written by rwku.corpus_model; "
        "generated = written by the model being unlearnt from each target's name",
    )
    corpus_model: Literal["llama3", "phi3"] = Field(
        "llama3",
        description="whose given corpus: Llama-3-8B-Instruct's files or Phi-3-mini's (*_phi)",
    )
    generate_texts: int = Field(
        8, ge=1, le=10_000, description="generated biographies per target (RWKU: 582)"
    )
    generate_questions: int = Field(
        8, ge=1, le=10_000, description="generated questions per target (RWKU: 300)"
    )
    generate_max_new_tokens: int = Field(
        512, ge=1, le=8192, description="new tokens per generated biography (RWKU: 512)"
    )
    openings_file: str | None = Field(
        None,
        description="openings the generated biographies start with, one a line or a JSON "
        "array (RWKU's all_truncated_outputs.json); unset = none",
    )


def _no_single_shadow(n: int) -> int:
    # LiRA and RMIA compare shadow models that trained on a candidate with ones that did not.
    if n == 1:
        raise PydanticCustomError(
            "one_shadow",
            "needs 0 (no shadow attacks) or at least 2: LiRA and RMIA compare shadow models "
            "that trained on a candidate with ones that did not",
        )
    return n


def _batch_size_or_auto(value: Any) -> int | str:
    if value == "auto":
        return value
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PydanticCustomError(
            "batch_size", "must be an integer >= 1 or auto, got {value}", {"value": repr(value)}
        )
    return value


class EvalConfig(_Section):
    max_new_tokens: int = Field(
        200, ge=1, le=8192, description="new tokens per generated TOFU answer"
    )
    batch_size: Annotated[int | str, BeforeValidator(_batch_size_or_auto)] = Field(
        16,
        description="sequences per scoring or generation batch (the built-in miniature's "
        "preset: 64); auto = the largest that fits the GPU (halving on out-of-memory)",
    )
    # How generation keeps its KV cache. Greedy decoding gives the same strings with either; the
    # static cache lets a CUDA GPU replay the decoding step compiled instead of launching it
    # kernel by kernel from Python at every token.
    cache_implementation: Literal["dynamic", "static"] = Field(
        "dynamic",
        description="generation's KV cache: dynamic (grown each token) or static (allocated "
        "once per batch; on a CUDA GPU the decoding step is compiled, see compile_generation)",
    )
    compile_generation: bool = Field(
        True,
        description="with cache_implementation=static on a CUDA GPU, compile the decoding step "
        "(torch.compile, through transformers); false = the static cache without compiling",
    )
    truth_ratio_form: Literal["tofu_code", "paper", "prob_mean"] = Field(
        "tofu_code", description="tofu_code = TOFU's code; paper = its paper's arithmetic mean"
    )
    formats: bool = Field(
        True, description="the data-transformation formats, where the data has them"
    )
    probes: bool = Field(
        True,
        description="the generalisation probes (paraphrase, reverse, two_hop, shared), where "
        "the data has them",
    )
    mia: bool = Field(True, description="membership inference: forget set vs its holdout split")
    mia_k: float = Field(0.4, gt=0, le=1, description="Min-K% / Min-K%++ fraction")
    # Row-time options: the attacks they set up combine evaluations, so they are not part of any
    # one model's evaluation (nor of its cache key).
    mia_shadows: Annotated[int, AfterValidator(_no_single_shadow)] = Field(
        4,
        ge=0,
        le=64,
        description="shadow models per split for the LiRA and RMIA attacks (built-in miniature; "
        "0 = none, else at least 2)",
    )
    mia_rmia_gamma: float = Field(
        1.0, gt=0, description="RMIA's likelihood-ratio threshold gamma against each population z"
    )
    lume: bool = Field(True, description="LUME tasks, where the data has them (a lume/ folder)")
    # The SemEval-2025 scorer generates up to 256 new tokens per LUME prompt (its --max_new_tokens
    # default); TOFU's answers are short and keep `max_new_tokens`.
    lume_max_new_tokens: int = Field(
        256, ge=1, le=8192, description="new tokens per LUME continuation"
    )
    lm_eval_tasks: list[str] = Field(
        default_factory=list,
        description="lm-evaluation-harness tasks for utility, e.g. [mmlu] "
        "(pip install forgetbench[lmeval])",
    )
    lm_eval_chat_template: bool = Field(
        False, description="apply the tokenizer's chat template in lm-eval"
    )
    lm_eval_include_path: str | None = Field(None, description="folder of extra lm-eval tasks")
    # RWKU's utility sets are its own files, scored as its code scores them; lm-eval has MMLU,
    # BBH, TruthfulQA and TriviaQA as tasks of its own (whole sets, from the Hub).
    rwku_utility: Literal["rwku", "lm_eval"] | None = Field(
        None,
        description="how forgetbench eval --benchmark rwku scores utility: lm_eval = lm-eval's "
        "mmlu, bbh, truthfulqa_mc2 and triviaqa tasks (pip install forgetbench[lmeval]; their "
        "data from the Hub or its cache); rwku or unset = RWKU's own sets in each target's folder",
    )
    # Unset keeps the length the model was trained with, as evaluations always had; a prompt
    # that leaves no room for its answer is refused, never cut (docs/metrics.md).
    max_length: int | None = Field(
        None,
        ge=8,
        description="tokens per scored prompt+answer (answers past it are cut; a prompt that "
        "fills it is an error); unset = train.max_length; at most the model's context",
    )
    # TOFU's `ds_size`: its evaluation kept the first N questions of each of its four sets
    # (`select(range(min(ds_size, len)))`; 300 in its published logs, so Real Authors (100) and
    # World Facts (117) stay whole). MIA, formats and LUME are not cut.
    max_questions: int | None = Field(
        None,
        ge=1,
        description="score only the first N questions of each TOFU evaluation set (membership "
        "inference, the formats and LUME are not cut); unset = all; TOFU's published logs used 300",
    )
    # LUME's final score takes MMLU accuracy as utility (SemEval-2025 Task 4): measured through
    # lm-eval when lm_eval_tasks has mmlu, or given here for a model measured elsewhere
    # (`forgetbench eval` only: one model's number). Below 0.371 it is flagged.
    lume_mmlu: float | None = Field(
        None,
        ge=0,
        le=1,
        description="the evaluated model's MMLU accuracy, for LUME's final score (forgetbench "
        "eval; not with lm_eval_tasks=[mmlu])",
    )

    def scored_length(self, train_max_length: int) -> int:
        """Tokens per scored prompt+answer: eval.max_length, else train.max_length."""
        return self.max_length if self.max_length is not None else train_max_length
