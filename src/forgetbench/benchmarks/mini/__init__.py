"""The built-in miniature benchmark: a seeded, offline generator of a TOFU-shaped world.

`generate_mini(out, scale=..., seed=...)` (`generate`) writes fictitious authors in TOFU's file
layout (`tofu_layout`: paraphrased and perturbed answers, forget/retain/holdout and
instance-level splits), the generalisation probes of each forget split (`probes`), Real Authors
and World Facts sets of real facts (`background`), the five data-transformation formats
(`formats`), LUME-shaped stories and PII biographies (`lume_layout`), a pretraining corpus
(`corpus`), and MUSE-, WMDP- and RWKU-shaped miniatures in their released layouts (`released`:
`muse/news/`, `wmdp/`, `rwku/Target/` from `rwku_layout`, whose targets are the pretraining
people; `write_released(out, "muse"|"wmdp"|"rwku")` writes one alone). They all read one
`world` (the authors and their questions, asked through `relations`, about people drawn by
`people`); `read` reads a generated folder back and `mini_stats(out)` counts what is there;
`scales` holds one `Scale` record per `--scale`. No network, no LLM: only `random.Random(seed)`
and the hand-written tables in `tables/`. See docs/mini.md.
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
from forgetbench.config_names import FORMATS

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
