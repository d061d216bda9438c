"""The sizes of the miniature benchmark, in one table: `--scale tiny|small|full`."""

from __future__ import annotations

from dataclasses import dataclass

from forgetbench.config_names import SCALES as SCALE_NAMES
from forgetbench.errors import UnknownNameError


@dataclass(frozen=True)
class ModelShape:
    """A Llama-architecture model's block shapes (the built-in models, and `model.size`'s)."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    kv_heads: int | None = None  # grouped-query attention; None = one per head


# One pool's models as (seed offset, epochs factor, learning-rate factor) over the study's seed and
# finetuning recipe; both pools follow the same plan. The first entry is the study's own finetuned
# (or retain) model, reused from the cache. Epoch factors stay >= 0.6: a positive model must still
# have learned the forget set (the recipe's epochs are what it takes to reproduce the answers),
# while the spread in how well it did is what a faithful metric has to see through.
PoolPlan = tuple[tuple[int, float, float], ...]
# The miniature's training learning rate, every scale (train/mini.py's recipe): small models need
# ~100x an LLM's 1e-5. Here, torch-free, so `--help` can say it without importing the trainer.
MINI_LR = 2e-3
# 4 + 4 models: measured 4 min 54 s cold (6 new models) on two cores shared with other jobs.
_TINY_POOLS: PoolPlan = ((0, 1.0, 1.0), (1, 1.0, 1.0), (2, 0.6, 1.0), (3, 1.0, 0.5))
# 8 + 8 models (open-unlearning's pools are larger): measured 66 min cold on two cores shared with
# other jobs (5,377 process-seconds of training, 942 of evaluation).
_POOLS: PoolPlan = (
    (0, 1.0, 1.0), (1, 1.0, 1.0), (2, 1.0, 1.0), (3, 0.6, 1.0), (4, 0.6, 1.0), (5, 1.0, 0.5),
    (6, 1.0, 0.5), (7, 0.75, 0.75),
)  # fmt: skip
# The unlearned models attacked when the config does not name methods: open-unlearning attacks
# eight methods' models; the tiny scale keeps three kinds (gradient difference, a preference loss,
# a refusal target) so its test stays fast.
_ROBUSTNESS_METHODS = ("grad_diff", "npo", "simnpo", "idk", "dpo", "rmu", "undial", "altpo")


@dataclass(frozen=True)
class Scale:
    """Everything `--scale` decides, in one record: how big each part of the generated world is,
    the built-in model's shape, its training recipe's epochs, and the meta-evaluation's plans.

    `authors` is TOFU's `full` split (20 questions each); forget01/05/10 take the last 1/5/10 %
    of them (at least one author each) and holdout01/05/10 as many extra authors. `lume_docs` is
    the number of documents per LUME task in each of forget, retain and holdout.
    """

    name: str
    authors: int
    real_authors: int  # Real Authors questions (TOFU: 100)
    world_facts: int  # World Facts questions (TOFU: 117)
    lume_docs: int
    pretrain_people: int  # fictitious non-authors who fill the templates in the pretraining corpus
    filler_docs: int
    model: ModelShape  # ~0.5 M parameters for tests, ~3 M for the demo; full: more layers
    # Small models need many epochs to memorise 20 facts per author; finetuning's are set so the
    # rehearsal pairs cost no extra time (docs/mini.md, "Pretraining and rehearsal").
    pretrain_epochs: int
    finetune_epochs: int
    meta_pools: PoolPlan  # the meta-evaluation's model pools (study/meta_eval.py)
    robustness_methods: tuple[str, ...]  # attacked by the robustness meta-evaluation by default
    # Epochs of the document benchmarks' (MUSE, WMDP) finetuned and retain models over their
    # articles, at batch 4: tiny's 150 take VerbMem from 24 (the retain model) to 66 (docs/muse.md).
    corpus_epochs: int = 150


SCALES: dict[str, Scale] = {
    # tests: everything in well under a second
    "tiny": Scale(
        "tiny", authors=10, real_authors=20, world_facts=20, lume_docs=3, pretrain_people=20,
        filler_docs=20,
        model=ModelShape(hidden=96, layers=3, heads=4, intermediate=384, vocab=1024,
                         max_positions=256),
        pretrain_epochs=6, finetune_epochs=25, meta_pools=_TINY_POOLS,
        robustness_methods=("grad_diff", "npo", "idk"),
    ),
    # the demo: trainable by a ~3M-parameter model on 2 CPU cores in minutes
    "small": Scale(
        "small", authors=50, real_authors=100, world_facts=117, lume_docs=15,
        pretrain_people=120, filler_docs=200,
        model=ModelShape(hidden=192, layers=4, heads=6, intermediate=768, vocab=4096,
                         max_positions=512),
        pretrain_epochs=6, finetune_epochs=8, meta_pools=_POOLS,
        robustness_methods=_ROBUSTNESS_METHODS,
    ),
    # TOFU's sizes: 200 authors x 20 = 4000 questions; forget01/05/10 = 40/200/400
    "full": Scale(
        "full", authors=200, real_authors=100, world_facts=117, lume_docs=60,
        pretrain_people=600, filler_docs=1000,
        model=ModelShape(hidden=256, layers=6, heads=8, intermediate=1024, vocab=8192,
                         max_positions=512),
        pretrain_epochs=4, finetune_epochs=7, meta_pools=_POOLS,
        robustness_methods=_ROBUSTNESS_METHODS,
    ),
}  # fmt: skip
assert tuple(SCALES) == SCALE_NAMES  # the typed config's `--scale` choices

FORGET_PERCENTS = (1, 5, 10)


def get_scale(name: str) -> Scale:
    if name not in SCALES:
        raise UnknownNameError("scale", name, SCALES)
    return SCALES[name]


def forget_authors(scale: Scale, percent: int) -> int:
    """Authors in forget{percent:02d}: TOFU's share, never zero (tiny worlds still forget one)."""
    return max(1, scale.authors * percent // 100)
