"""The built-in miniature benchmark: a seeded, offline generator of a TOFU-shaped world.

`generate_mini(out, scale=..., seed=...)` writes fictitious authors in TOFU's file layout (with
paraphrased and perturbed answers, forget/retain/holdout and instance-level splits), Real Authors
and World Facts sets of real facts, the five data-transformation formats, LUME-shaped stories and
PII biographies, a pretraining corpus, and MUSE- and WMDP-shaped miniatures in their released
layouts (`muse/news/`, `wmdp/`; `write_released(out, "muse"|"wmdp")` writes one alone);
`mini_stats(out)` counts what is there. No network, no LLM: only `random.Random(seed)` and the hand-written tables in `tables/`. See docs/mini.md.
"""

from forgetbench.benchmarks.mini.generate import (
    GENERATOR_VERSION,
    RELEASED_FOLDERS,
    build_files,
    generate_mini,
    read_manifest,
)
from forgetbench.benchmarks.mini.read import load_format, mini_stats
from forgetbench.benchmarks.mini.released import write_released
from forgetbench.benchmarks.mini.scales import SCALES, Scale, get_scale
from forgetbench.config import FORMATS

__all__ = [
    "FORMATS",
    "GENERATOR_VERSION",
    "RELEASED_FOLDERS",
    "SCALES",
    "Scale",
    "build_files",
    "generate_mini",
    "get_scale",
    "load_format",
    "mini_stats",
    "read_manifest",
    "write_released",
]
