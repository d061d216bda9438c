"""What each reported metric means: its direction, a version that changes with its numbers, and
the aggregation (`forgetbench.metrics.aggregation`) that turns its per-item values into it.

Each metric is declared once, by `@register_metric(...)` on the function that computes it, in the
module that defines it (as lm-evaluation-harness's `register_metric`); this module only holds the
record and the lookup. The package imports every metric module, so `METRICS` is whole whenever
anything in `forgetbench.metrics` is imported.

Version 2 of every metric scored on QA prompts: prompt and answer tokenised as one text (TOFU's and
open-unlearning's convention) instead of apart; memorisation also leaves out the final EOS."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

Direction = Literal["higher", "lower", "closer_to_retain"]
DIRECTIONS: tuple[str, ...] = ("higher", "lower", "closer_to_retain")
F = TypeVar("F", bound=Callable[..., object])


@dataclass(frozen=True)
class MetricInfo:
    """`aggregation` names an entry of `forgetbench.metrics.aggregation.AGGREGATIONS`. Metrics that
    transform an AUC (privleak, the LUME MIA score) name the AUC's aggregation; those combining
    other reported scores (model utility, the LUME aggregates) name how they combine them.
    `computed_by` is the qualified name of the function that carries the registration."""

    name: str
    direction: Direction
    version: int
    aggregation: str
    definition: str
    computed_by: str = ""


METRICS: dict[str, MetricInfo] = {}


def register_metric(
    name: str, *, direction: Direction, version: int, aggregation: str, definition: str
) -> Callable[[F], F]:
    """Decorator on the function that computes metric `name`: records it in `METRICS`. One function
    may carry several (stacked decorators, the lowest registered first). A name registered twice is
    a programming error, as in `forgetbench.registry.Registry`: the second would silently win."""
    if direction not in DIRECTIONS:
        raise ValueError(
            f"metric '{name}': direction must be one of {DIRECTIONS}, got {direction!r}"
        )

    def decorator(function: F) -> F:
        where = f"{function.__module__}.{function.__qualname__}"
        if name in METRICS and METRICS[name].computed_by != where:
            raise ValueError(
                f"metric '{name}' is already registered by {METRICS[name].computed_by}"
            )
        METRICS[name] = MetricInfo(name, direction, version, aggregation, definition, where)
        return function

    return decorator
