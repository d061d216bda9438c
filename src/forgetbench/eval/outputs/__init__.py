"""Model outputs collected for metrics. With `modeling/`, the only code that calls a model.

`scoring` (teacher-forced answer statistics, `statistics`), `generation` (greedy) and
`prefix_cache` (a shared prompt prefix encoded once) are the fast path; `naive` is the reference
it is checked against; `gradnorm` (per-item weight-gradient norms, the one output that needs a
backward pass) serves the gradient-norm attack. `forgetbench.eval.backend` serves evaluation
requests with them."""

from forgetbench.eval.outputs.generation import greedy_generate
from forgetbench.eval.outputs.gradnorm import gradient_norms
from forgetbench.eval.outputs.naive import score_answers_naive
from forgetbench.eval.outputs.prefix_cache import shared_prefixes
from forgetbench.eval.outputs.scoring import score_answers, score_candidates
from forgetbench.eval.outputs.statistics import AnswerScore

__all__ = [
    "AnswerScore",
    "gradient_norms",
    "greedy_generate",
    "score_answers",
    "score_answers_naive",
    "score_candidates",
    "shared_prefixes",
]
