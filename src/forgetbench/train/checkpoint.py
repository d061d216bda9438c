"""Checkpoints through accelerate's `save_state` / `load_state`, called on every process: each one
saves and restores its own part (its shard of the model and optimizer under FSDP/DeepSpeed, its
RNG streams). Weights are safetensors. The loop position, the learning-rate schedule and a step
hook's or stateful loss's state (NGDiff's lr gain, a method's dual variable) are ours, in
`state.json` (`extra`).

With `model.sharding=fsdp` the model and the optimizer are not accelerate's: each process writes
its shards of both through `torch.distributed.checkpoint` (`shards/`), beside accelerate's RNG
files, and reads them back the same way; `state.json` records the sharding, and a checkpoint is
resumed only with the sharding and the number of processes that wrote it.

Every process writes into `.checkpoint.tmp`; once all have written, the main process adds
`state.json` and `manifest.json` (size and sha256 of every file) and renames the folder to
`checkpoint`, so a kill mid-save leaves the previous checkpoint intact. This needs every process's
files in one folder: one machine, or a file system all machines share.

Resume checks the manifest before loading anything: a damaged checkpoint is set aside as
`checkpoint.corrupt-<timestamp>` with one line on stderr, and the run resumes from the previous
checkpoint (`.checkpoint.old`, left by a kill between the two renames) when that one is sound, else
restarts from scratch. A checkpoint in the layout before save_state (`optimizer.pt`, `rng.pt`: the
main process's RNG only) is set aside the same way, with its own line.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import broadcast_object_list, gather_object

from forgetbench.errors import ConfigError
from forgetbench.io import set_aside
from forgetbench.train.integrity import MANIFEST, file_manifest, manifest_problem, note, read_record
from forgetbench.train.sharding import is_sharded

CHECKPOINT_DIR = "checkpoint"
OLD_CHECKPOINT_DIR = ".checkpoint.old"
_TMP_DIR = ".checkpoint.tmp"
_STATE = "state.json"
_BEFORE_SAVE_STATE = "optimizer.pt"  # save_state names it optimizer.bin
_SHARDS = "shards"  # torch.distributed.checkpoint's folder: a file per process and .metadata


@dataclass(frozen=True)
class LoopPosition:
    step: int  # optimizer steps done
    epoch: int  # epoch in progress
    batches_done: int  # micro-batches of `epoch` already consumed (per process)


@dataclass(frozen=True)
class Resumed:
    position: LoopPosition
    schedule: dict[str, Any]  # the learning-rate scheduler's state_dict
    extra: dict[str, Any]  # a step hook's state


def save_checkpoint(
    folder: Path,
    *,
    accelerator: Any,
    position: LoopPosition,
    schedule: dict[str, Any],
    extra: dict[str, Any] | None = None,
    shards: tuple[torch.nn.Module, Any] | None = None,
) -> Path:
    """Every process calls this at the same step. `schedule`: the scheduler's state_dict;
    `extra`: JSON-able state of whatever else the loop must restore (a step hook's); `shards`:
    the sharded model and its optimizer, which accelerate does not hold."""
    final = folder / CHECKPOINT_DIR
    tmp = folder / _TMP_DIR
    main = accelerator.is_main_process
    if main:
        shutil.rmtree(tmp, ignore_errors=True)  # a save killed midway: never published, never read
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    try:
        with _without_tied_weights_warning():
            accelerator.save_state(str(tmp), safe_serialization=True)
        if shards is not None:
            _save_shards(tmp / _SHARDS, *shards)
        accelerator.wait_for_everyone()
        if main:
            state = {
                "position": asdict(position),
                "processes": accelerator.num_processes,
                **({"sharding": "fsdp"} if shards is not None else {}),
                "schedule": schedule,
                "extra": extra or {},
            }
            (tmp / _STATE).write_text(json.dumps(state))
            (tmp / MANIFEST).write_text(json.dumps(file_manifest(tmp)))
            old = folder / OLD_CHECKPOINT_DIR
            # A leftover of a kill during the cleanup below: superseded by `final`, which load
            # checked.
            shutil.rmtree(old, ignore_errors=True)
            if final.exists():
                final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        if main:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    accelerator.wait_for_everyone()
    return final


def load_checkpoint(
    folder: Path, *, accelerator: Any, model: torch.nn.Module, optimizer: Any
) -> Resumed | None:
    """Every process calls this after `accelerator.prepare(model, optimizer)`: restore them in
    place and return where the loop stopped, or None when there is no usable checkpoint (none, or
    every one damaged: the main process sets each damaged one aside with one line)."""

    def from_main(value: Any) -> Any:  # the main process looks at the files; all act alike
        return broadcast_object_list([value])[0]

    main = accelerator.is_main_process
    path = folder / CHECKPOINT_DIR
    # `.checkpoint.old` is the previous checkpoint when a kill fell between the two renames of
    # save_checkpoint; beside a sound `checkpoint/` it is a superseded leftover, never read.
    candidates = from_main(
        [p for p in (path, folder / OLD_CHECKPOINT_DIR) if p.is_dir()] if main else None
    )
    for index, candidate in enumerate(candidates):
        problem = from_main(_checkpoint_problem(candidate) if main else None)
        if problem is None:
            resumed, problem = _restore(
                candidate, accelerator=accelerator, model=model, optimizer=optimizer
            )
            if resumed is not None:
                if main and candidate != path:
                    candidate.rename(path)
                accelerator.wait_for_everyone()
                return resumed
        if main:
            aside = set_aside(candidate)
            then = (
                f"trying the previous checkpoint {candidates[index + 1].name}"
                if index + 1 < len(candidates)
                else "restarting the run from scratch"
            )
            note(f"checkpoint {candidate} {problem}; set aside as {aside.name}; {then}")
    accelerator.wait_for_everyone()
    return None


def _checkpoint_problem(path: Path) -> str | None:
    if (path / _BEFORE_SAVE_STATE).is_file():
        return "was written by an older forgetbench (before checkpoints kept every process's state)"
    if not (path / MANIFEST).is_file():
        return f"is damaged ({MANIFEST}: missing)"
    manifest, problem = read_record(path / MANIFEST)
    problem = problem if manifest is None else manifest_problem(path, manifest)
    return None if problem is None else f"is damaged ({problem})"


def _restore(
    path: Path, *, accelerator: Any, model: torch.nn.Module, optimizer: Any
) -> tuple[Resumed | None, str | None]:
    """Load on every process; if any fails, all put the model and optimizer back as they were (a
    failed resume restarts from scratch, which must start from the untouched initial state)."""
    model_backup = {k: v.detach().clone() for k, v in model.state_dict().items()}
    optimizer_backup = copy.deepcopy(optimizer.state_dict())
    problem = None
    try:
        state = json.loads((path / _STATE).read_text(encoding="utf-8"))
        if state["processes"] != accelerator.num_processes:
            raise ConfigError(
                f"checkpoint {path} was written by {state['processes']} process(es), this run has "
                f"{accelerator.num_processes}",
                f"resume with accelerate launch --num_processes {state['processes']}, "
                f"or move {path} aside to restart the run",
            )
        sharding = "fsdp" if is_sharded(model) else "none"
        if state.get("sharding", "none") != sharding:
            raise ConfigError(
                f"checkpoint {path} was written with model.sharding="
                f"{state.get('sharding', 'none')}, this run has model.sharding={sharding}",
                f"resume with model.sharding={state.get('sharding', 'none')}, or move {path} "
                "aside to restart the run",
            )
        resumed = Resumed(LoopPosition(**state["position"]), state["schedule"], state["extra"])
        # load_state reads the optimizer and RNG files (torch.save pickles) through accelerate's
        # `load`, which passes weights_only=True (torch 2.13's default too) and allows only numpy's
        # array reconstructors besides tensors: no code runs. They are also our own files, written
        # by this run into its folder and checked against the manifest above.
        accelerator.load_state(str(path))
        if sharding == "fsdp":
            _load_shards(path / _SHARDS, model, optimizer)
    except ConfigError:
        raise  # every process read the same state.json: all stop here, none waits below
    except Exception as exc:  # any unreadable part: the checkpoint is unusable, whatever the cause
        problem = f"is damaged ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"
    problem = next((p for p in gather_object([problem]) if p is not None), None)
    if problem is not None:
        model.load_state_dict(model_backup)
        optimizer.load_state_dict(optimizer_backup)
        return None, problem
    return resumed, None


def _save_shards(folder: Path, model: torch.nn.Module, optimizer: Any) -> None:
    """This process's shards of the model and of AdamW's state (every process calls it)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(folder))


def _load_shards(folder: Path, model: torch.nn.Module, optimizer: Any) -> None:
    """Read back what `_save_shards` wrote, each process its own shards, into the live model and
    optimizer."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optimizer": optimizer_state}
    dcp.load(state, checkpoint_id=str(folder))
    set_state_dict(
        model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"]
    )


@contextlib.contextmanager
def _without_tied_weights_warning() -> Iterator[None]:
    """save_state warns `Removed shared tensor {'lm_head.weight'}` at every save of a model with
    tied embeddings; load_state ties them back (safetensors' load_model), so the line is noise."""
    logger = logging.getLogger("accelerate.utils.other")

    def keep(record: logging.LogRecord) -> bool:
        return "Removed shared tensor" not in record.getMessage()

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)
