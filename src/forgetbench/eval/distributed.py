"""Evaluation across processes: under `accelerate launch` each process scores a contiguous shard
of the questions and the per-question results are gathered back in the original order, so N
processes write exactly the log one process would."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from accelerate.utils import gather_object

from forgetbench.device import process_state

Item = TypeVar("Item")
Result = TypeVar("Result")


def process_layout() -> tuple[int, int]:
    """(rank, world size); (0, 1) outside a distributed launch, without initialising anything."""
    state = process_state()
    return state.process_index, state.num_processes


def is_main_process() -> bool:
    return process_layout()[0] == 0


def sharded_map(
    function: Callable[[Sequence[Item]], list[Result]], items: Sequence[Item]
) -> list[Result]:
    """`function(items)` computed shard by shard across processes; every process gets the full
    result. `function` must return one result per item, in order."""
    rank, world = process_layout()
    if world == 1:
        return function(items)

    start, stop = len(items) * rank // world, len(items) * (rank + 1) // world
    local = function(items[start:stop])
    if len(local) != stop - start:
        raise RuntimeError(f"shard {rank} gave {len(local)} results for {stop - start} items")
    shards = gather_object([local])  # one list per process, in rank order
    return [result for shard in shards for result in shard]
