"""TOFU's sanity checks (Maini et al., 2024, appendix E): the forget-quality KS test must tell
apart models that differ in what they know, and must not tell apart models that know the same.

Every check compares the forget-set or retain-set truth ratios of the retain model (seed 0)
with another model's by the two-sample KS test. "high p" holds when p >= ALPHA (the test
cannot tell them apart), "low p" when p < ALPHA. Utility checks compare model utility with
fixed bounds. The models (retain90 at two seeds, the finetuned model, the pretrained base, random
weights) are built by forgetbench.study.sanity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from forgetbench.data.logs import EvalLog
from forgetbench.metrics import tofu

ALPHA = 0.05
PRETRAINED_UTILITY_MIN = 0.1  # "high": the base model answers background questions
RANDOM_UTILITY_MAX = 0.05  # "low": random weights know nothing

# (name, other model, set, expected): p-value expectations against the seed-0 retain model.
KS_CHECKS = (
    ("retain_vs_retain_seed_forget", "retain_seed1", "forget", "high"),
    ("retain_vs_retain_seed_retain", "retain_seed1", "retain", "high"),
    ("retain_vs_finetuned_forget", "finetuned", "forget", "low"),
    ("retain_vs_finetuned_retain", "finetuned", "retain", "high"),
    ("retain_vs_random_forget", "random", "forget", "high"),
    ("retain_vs_random_retain", "random", "retain", "low"),
    ("retain_vs_pretrained_forget", "pretrained", "forget", "high"),
    ("retain_vs_pretrained_retain", "pretrained", "retain", "low"),
)


@dataclass(frozen=True)
class Check:
    name: str
    holds: bool
    p_value: float | None
    expected: str
    value: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "holds": self.holds,
            "p_value": self.p_value,
            "expected": self.expected,
            "value": self.value,
        }


def _ratios(log: EvalLog, set_name: str, form: str):
    s = log.require(set_name, purpose="the sanity checks")
    return tofu.truth_ratio(s.paraphrased_loss, s.perturbed_loss, form=form)  # type: ignore[arg-type]


def run_checks(
    logs: dict[str, EvalLog], utilities: dict[str, float], *, form: str = "tofu_code"
) -> list[Check]:
    """`logs`/`utilities` keyed by retain, retain_seed1, finetuned, pretrained, random."""
    checks = []
    for name, other, set_name, expected in KS_CHECKS:
        _, p = tofu.ks_test(
            _ratios(logs[other], set_name, form), _ratios(logs["retain"], set_name, form)
        )
        holds = p >= ALPHA if expected == "high" else p < ALPHA
        checks.append(
            Check(name, holds, p, f"{expected} p ({'>=' if expected == 'high' else '<'} {ALPHA})")
        )
    u = utilities["pretrained"]
    checks.append(
        Check(
            "pretrained_utility_high",
            u >= PRETRAINED_UTILITY_MIN,
            None,
            f"utility >= {PRETRAINED_UTILITY_MIN}",
            u,
        )
    )
    u = utilities["random"]
    checks.append(
        Check(
            "random_utility_low",
            u <= RANDOM_UTILITY_MAX,
            None,
            f"utility <= {RANDOM_UTILITY_MAX}",
            u,
        )
    )
    return checks
