"""Document benchmarks (MUSE, WMDP) described for the study: what the study asks a benchmark, so
that `forgetbench run --benchmark NAME` builds its models, unlearns and scores without knowing
which benchmark it runs.

A `CorpusBenchmark` says, for one benchmark:
- where its built-in miniature lies in the miniature's data folder (`miniature_folder`, written
  by `forgetbench data generate` beside TOFU's files), and how a folder of it is checked before any work (`require`: one sentence naming every missing or
  malformed file);
- what the finetuned model and the retain model train on (`finetune_texts`, `retain_model_texts`:
  documents, cut into chunks as the reference code cuts them, `chunk_tokens` / `chunk_mode`);
- what unlearning forgets and keeps, per forget set (`forget_sets`, `retain_texts`);
- which evaluation task scores a model (`eval_layout`: the data layout `forgetbench.eval.tasks`
  reads), and what a row gets from a model's scores and the retain model's (`relative`, e.g.
  MUSE's PrivLeak needs the retain model's Min-K% AUC);
- which scores the finetuned model must beat the retain model on for the study to mean anything
  (`gaps`: the validity gates' analogue), the utility score it must reach for "utility kept" to
  mean anything (`utility_floor`), and the unlearning preset its methods start from;
- which series of forget requests it adds on top (`requests`: MUSE News' scalability and
  sustainability), each request a forget set of its own;
- for a benchmark of pretraining knowledge (RWKU: `pretrained`), that unlearning starts from the
  pretrained base itself, the reference model being the base pretrained without the people the
  folder names (`pretrained.unknown`), and that its forget sets are the folder's targets
  (`forget_sets_of`).

Registered by name in `CORPUS_BENCHMARKS`, as methods and metrics are."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from forgetbench.data.chunks import ChunkMode
from forgetbench.errors import UnknownNameError
from forgetbench.registry import Registry

Texts = Callable[[Path], list[str]]
Relative = Callable[[Mapping[str, Any], Mapping[str, Any] | None], dict[str, Any]]


@dataclass(frozen=True)
class Gap:
    """A score on which the finetuned model must exceed the retain model by `margin` (in the
    score's own units) for the forget set to have been learnt, and so to be unlearnable."""

    key: str
    margin: float
    what: str  # the score in words, for the gate's sentence
    fix: str | None = None  # what to do when the gap is missing (default: train longer)


@dataclass(frozen=True)
class Floor:
    """The utility score the finetuned model must reach (`floor`, in the score's own units) for
    "utility kept" to mean anything: a method keeping 0.9 of a score at noise level keeps noise,
    so below it the utility criteria are not judged."""

    key: str
    floor: float
    what: str  # the score in words, for the gate's sentence


RequestMode = Literal["one-shot", "sequential"]


@dataclass(frozen=True)
class Requests:
    """A series of forget requests beside the study's own forget set: request k (1..`count`)
    forgets `texts(folder, k)`. `one-shot` starts every request from the finetuned model (MUSE's
    scalability: forget sets that grow); `sequential` starts request k from request k-1's
    unlearnt model (MUSE's sustainability: one fold after another). A folder without the
    series' files (`present` false: MUSE Books has no scal/ or sust/) runs no series."""

    name: str  # the files' subset; request k's forget set is split `{name}_forget_{k}`
    criterion: str  # what the series decides, as results.json's readers name it
    mode: RequestMode
    count: int
    texts: Callable[[Path, int], list[str]]
    present: Callable[[Path], bool]

    def split(self, k: int) -> str:
        return f"{self.name}_forget_{k}"


# What every document study reads of the run config's sections that the TOFU-shaped study
# shares (the rest of each, and `attack`, are the TOFU-shaped study's alone); model, train,
# unlearn and method are read whole.
BENCHMARK_READ = ("name", "path")
EVAL_READ = ("batch_size", "max_length", "lm_eval_tasks", "lm_eval_chat_template",
             "lm_eval_include_path")  # fmt: skip
STUDY_READ = ("methods", "examples", "retain_logs", "method_settings", "workers")
UNREAD_SECTIONS = ("attack",)


@dataclass(frozen=True)
class Pretrained:
    """Knowledge the base model learnt in pretraining (RWKU): what unlearning starts from is the
    base (pretrained further on `finetune_texts` where the folder has any: the miniature's
    knowledge stage), and the retain model is the base pretrained on the same corpus less every
    document naming one of `unknown(folder)` (the targets), so that it never saw them (further
    on `retain_model_texts` alike)."""

    unknown: Callable[[Path], list[str]]


# A method's forget records and the refusals drawn for them (`CorpusBenchmark.method_forget`).
MethodForget = tuple[list[Any], tuple[str, ...]]


@dataclass(frozen=True)
class CorpusBenchmark:
    name: str
    title: str
    miniature_folder: str  # within the miniature's data folder
    require: Callable[[Path], object]  # raises DataError naming every bad file
    digest: Callable[[Path], str]  # of the folder's files, recorded by eval beside its scores
    finetune_texts: Texts
    retain_model_texts: Texts
    forget_sets: Mapping[str, Texts]  # the rows' split name -> unlearning's forget documents
    retain_texts: Texts  # unlearning's retain documents
    # The reference code's chunk length in tokens, capped at the model's positions.
    chunk_tokens: int
    chunk_mode: ChunkMode
    eval_layout: str  # the evaluation tasks' benchmark name (`forgetbench.eval.tasks`)
    # None: nothing is computed against the retain model's scores (WMDP's accuracies are
    # absolute), so `forgetbench eval --retain-log` has nothing to use them for.
    relative: Relative | None
    gaps: tuple[Gap, ...]
    # The presets file (forgetbench/presets) whose methods' settings unlearning starts from on
    # the built-in tiny models.
    unlearn_preset: str
    utility_floor: Floor | None = None
    requests: tuple[Requests, ...] = ()
    # What to tell the user about a folder that `require` accepts (WMDP's missing subsets).
    notes: Callable[[Path], list[str]] = lambda folder: []
    pretrained: Pretrained | None = None
    # The forget sets of a folder, where they depend on it (RWKU's targets); else `forget_sets`.
    forget_sets_of: Callable[[Path], Mapping[str, Texts]] | None = None
    # The eval.* options its evaluation task reads beyond every document study's (`EVAL_READ`).
    eval_options: tuple[str, ...] = ()
    # Which of a folder's forget sets a run studies, from the run's config (RWKU's rwku.targets);
    # None: every one of `sets(folder)`.
    choose: Callable[[Path, Any], Mapping[str, Texts]] | None = None
    # The options of its own section that `choose` reads (`forgetbench run` refuses the rest).
    options: tuple[str, ...] = ()
    # Where its evaluation task scores one forget set (RWKU's probes are of one target): the sets
    # `forgetbench eval` scores, one evaluation each, from a folder and the config, and the
    # options of its own section that choose them (rwku.targets). None = one evaluation of the
    # folder's own sets (MUSE, WMDP).
    eval_sets: Callable[[Path, Any], list[str]] | None = None
    eval_choose: tuple[str, ...] = ()
    # A method's own forget records of a forget set, from the inputs the method reads, with the
    # refusals it draws from (empty: the run's own), where the folder has them (RWKU's pair and
    # reject corpora, for DPO and rejection tuning); None = the set's text chunks.
    # The config is the run's (RWKU reads rwku.corpus_model).
    method_forget: Callable[[Path, str, frozenset[str], Any], MethodForget | None] | None = None
    # Its evaluation puts an instructed method's instruction before each prompt (RWKU's, as its
    # `use_prompt` does), so in-context unlearning (icu) is scored, not the unchanged model.
    instructs: bool = False
    # (run config, study) -> what forget corpora the model being unlearnt is to write for the
    # run (RWKU's rwku.corpus=generated): `generate_corpus`'s arguments but the model and the
    # folder, with `generation` the config section `generation_of` reads; None to read the
    # data's own. The study writes them (a cached stage of train/, a layer above this one) and
    # unlearning reads them (`Study.corpus`).
    corpus_to_write: Callable[[Any, Any], dict[str, Any] | None] | None = None
    # The study's rows as results.json keeps them: a forget set scored on several parts at once
    # (an RWKU batch, scored per target) as a row per part and its own; None = as they are.
    split_rows: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None

    def read_config(self, dumped: Mapping[str, Any]) -> dict[str, Any]:
        """A dumped run config cut to what a study of this benchmark reads: no TOFU splits,
        formats, MIA shadows, LUME, attacks or seeds, which it never looks at. What results.json
        and the report's Configuration record; a config already cut comes back unchanged."""
        keep = {
            "benchmark": BENCHMARK_READ,
            "eval": (*EVAL_READ, *self.eval_options),
            "study": (*STUDY_READ, *(("requests",) if self.requests else ())),
        }
        return {
            section: {k: v for k, v in value.items() if k in keep[section]}
            if section in keep and isinstance(value, Mapping)
            else value
            for section, value in dumped.items()
            if section not in UNREAD_SECTIONS
        }

    def relative_scores(
        self, scores: Mapping[str, Any], retain: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """What a model's row adds from the retain model's scores `retain` (None without one)."""
        return self.relative(scores, retain) if self.relative is not None else {}

    def sets(self, folder: Path) -> Mapping[str, Texts]:
        """The forget sets of the benchmark's folder `folder`."""
        return self.forget_sets_of(folder) if self.forget_sets_of is not None else self.forget_sets

    def chosen_sets(self, folder: Path, config: Any) -> Mapping[str, Texts]:
        """The forget sets of `folder` that the run of `config` studies."""
        return self.choose(folder, config) if self.choose is not None else self.sets(folder)

    def forget_texts(self, split: str, folder: Path | None = None) -> Texts:
        """The forget documents of `split`: one of `sets(folder)`, or a request of a series."""
        forget_sets = self.sets(folder) if folder is not None else self.forget_sets
        if split in forget_sets:
            return forget_sets[split]
        for series in self.requests:
            for k in range(1, series.count + 1):
                if series.split(k) == split:
                    return lambda folder, series=series, k=k: series.texts(folder, k)
        known = [
            *forget_sets,
            *(s.split(k) for s in self.requests for k in range(1, s.count + 1)),
        ]
        raise UnknownNameError(f"{self.title} forget set", split, known)


CORPUS_BENCHMARKS: Registry[Callable[[], CorpusBenchmark]] = Registry("document benchmark")
