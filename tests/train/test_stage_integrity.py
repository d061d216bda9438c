"""Damaged caches and checkpoints are detected, set aside under `.corrupt-*` with one line on
stderr, and recomputed — never loaded, never deleted, never a traceback. Each case damages one
file class of a tiny toy stage (4 optimizer steps) and checks the recomputed or resumed weights
equal an undamaged run's."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from forgetbench.errors import ConfigError, DataError
from forgetbench.methods._terms import per_sample_nll
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.encoding import collate
from forgetbench.modeling.forward import forward_logits
from forgetbench.train.checkpoint import CHECKPOINT_DIR, OLD_CHECKPOINT_DIR
from forgetbench.train.integrity import MANIFEST, file_manifest
from forgetbench.train.loop import train_loop
from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.stages import STAGE_FILE, model_fingerprint, run_stage
from forgetbench.train.train_log import TRAIN_LOG
from toy import toy_examples, toy_tokenizer

CONFIG = LoopConfig(
    lr=3e-3, epochs=2, batch_size=8, per_device_batch_size=8, weight_decay=0.0, checkpoint_every=1
)


def _stage(run_dir: Path):
    tokenizer = toy_tokenizer()
    return run_stage(
        run_dir,
        name="finetune",
        parent="tiny",
        parent_model=(build_tiny_model(tokenizer), tokenizer),
        examples=toy_examples(),
        config=CONFIG,
        progress=False,
    )


def _weights(model_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(model_dir / "model.safetensors")


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _warnings(err: str) -> list[str]:
    # transformers' own progress bars (loading, writing shards) are not ours to count
    lines = [line for line in err.splitlines() if line.strip() and "%|" not in line]
    assert "Traceback" not in err
    return lines


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A run folder holding one undamaged, uninterrupted stage, trained once for the module: each
    test damages a copy of it (the stage's folder name is its cache key, never its location)."""
    run = tmp_path_factory.mktemp("reference")
    assert not _stage(run).cached
    return run


@pytest.fixture(scope="module")
def reference(finished) -> dict[str, torch.Tensor]:
    """The weights of an undamaged, uninterrupted run."""
    (model,) = finished.glob("models/*/model")
    return _weights(model)


def _finished_copy(finished: Path, run: Path) -> Path:
    """The module's finished stage copied into `run`: the stage's folder there."""
    shutil.copytree(finished, run, dirs_exist_ok=True)
    (folder,) = run.glob("models/finetune-*")
    return folder


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # in the tensor data: the header still parses, the size is unchanged
    path.write_bytes(bytes(data))


DAMAGE = {
    "truncated stage.json": lambda f: _truncate(f / STAGE_FILE),
    "non-UTF-8 stage.json": lambda f: (f / STAGE_FILE).write_bytes(b'{"stage": "\xff\xfe"}'),
    "stage.json not an object": lambda f: (f / STAGE_FILE).write_text("[1, 2]"),
    "truncated model.safetensors": lambda f: _truncate(f / "model" / "model.safetensors"),
    "flipped byte in model.safetensors": lambda f: _flip_byte(f / "model" / "model.safetensors"),
    "deleted config.json": lambda f: (f / "model" / "config.json").unlink(),
    "deleted model folder": lambda f: shutil.rmtree(f / "model"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_cached_stage_is_set_aside_and_recomputed(
    damage, finished, reference, tmp_path, capsys
):
    folder = _finished_copy(finished, tmp_path)
    assert _stage(tmp_path).cached  # the copy is found where the run left it
    record = json.loads((folder / STAGE_FILE).read_text())
    assert set(record["files"]) >= {"model/model.safetensors", "model/config.json"}
    assert not any(name.startswith("work/") for name in record["files"])
    capsys.readouterr()

    DAMAGE[damage](folder)
    damaged = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    again = _stage(tmp_path)

    lines = _warnings(capsys.readouterr().err)
    assert len(lines) == 1, lines
    assert f"cached stage {folder} is damaged" in lines[0] and "recomputed" in lines[0]
    asides = list(tmp_path.glob("models/*.corrupt-*"))
    assert len(asides) == 1 and asides[0].name in lines[0]
    # the damaged copy is kept byte for byte, the stage is recomputed in place
    kept = {p.relative_to(asides[0]): p.read_bytes() for p in asides[0].rglob("*") if p.is_file()}
    assert kept == damaged
    assert not again.cached and again.model_dir == folder / "model"
    assert _same(_weights(again.model_dir), reference)
    # and the recomputed stage is reused silently next time
    assert _stage(tmp_path).cached
    assert _warnings(capsys.readouterr().err) == []


def test_a_stage_without_checksums_is_reused_when_its_files_are_whole(finished, tmp_path, capsys):
    folder = _finished_copy(finished, tmp_path)
    record = json.loads((folder / STAGE_FILE).read_text())
    del record["files"]  # as written before checksums existed
    (folder / STAGE_FILE).write_text(json.dumps(record))
    capsys.readouterr()
    assert _stage(tmp_path).cached
    assert _warnings(capsys.readouterr().err) == []
    # a truncated legacy safetensors is still caught (its header gives the data length)
    _truncate(folder / "model" / "model.safetensors")
    assert not _stage(tmp_path).cached
    assert "model/model.safetensors: size mismatch" in capsys.readouterr().err


def test_a_child_of_a_stage_whose_record_is_unreadable_gets_one_clear_error(finished, tmp_path):
    folder = _finished_copy(finished, tmp_path)
    (folder / STAGE_FILE).write_bytes(b"\xff\xfe\x00")
    with pytest.raises(DataError, match="damaged cached stage.*not UTF-8"):
        model_fingerprint(folder / "model")


# --- checkpoints and the train log: the loop stopped after step `stop`, then resumed -----------


class _Stop(Exception):
    pass


def _train(out: Path, *, stop: int | None = None) -> dict[str, torch.Tensor]:
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer)

    def halt(step: int, _model) -> None:
        if step == stop:
            raise _Stop

    with contextlib.suppress(_Stop):  # the "kill": the loop stops after step `stop`
        train_loop(
            model,
            toy_examples(),
            loss_fn=lambda m, b: per_sample_nll(forward_logits(m, b), b["labels"]).mean(),
            collate_fn=lambda batch: collate(batch, pad_id=tokenizer.pad_token_id),
            config=CONFIG,
            out_dir=out,
            progress=False,
            on_step=halt,
        )
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _step(checkpoint: Path) -> int:
    return json.loads((checkpoint / "state.json").read_text())["position"]["step"]


def _logged_steps(out: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (out / TRAIN_LOG).read_text().splitlines()]


@pytest.fixture(scope="module")
def loop_reference(tmp_path_factory) -> dict[str, torch.Tensor]:
    return _train(tmp_path_factory.mktemp("loop-reference"))


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> Path:
    """A run stopped after step 2, once for the module: each test below resumes a copy of it."""
    out = tmp_path_factory.mktemp("stopped")
    _train(out, stop=2)
    return out


def _stopped_copy(stopped: Path, out: Path) -> None:
    shutil.copytree(stopped, out, dirs_exist_ok=True)


def test_checkpoints_carry_a_manifest(stopped):
    assert _logged_steps(stopped) == [1, 2] and _step(stopped / CHECKPOINT_DIR) == 2
    manifest = json.loads((stopped / CHECKPOINT_DIR / MANIFEST).read_text())
    # accelerate's save_state: weights, optimizer, one RNG file per process; then ours
    assert set(manifest) == {
        "model.safetensors",
        "optimizer.bin",
        "random_states_0.pkl",
        "state.json",
    }
    assert not list(stopped.glob(".checkpoint.*"))  # published by rename, no temp left behind


def _rewrite_manifest(checkpoint: Path) -> None:
    (checkpoint / MANIFEST).write_text(json.dumps(file_manifest(checkpoint, skip=(MANIFEST,))))


CHECKPOINT_DAMAGE = {
    "flipped byte in model.safetensors": lambda c: _flip_byte(c / "model.safetensors"),
    "truncated optimizer.bin": lambda c: _truncate(c / "optimizer.bin"),
    "deleted random_states_0.pkl": lambda c: (c / "random_states_0.pkl").unlink(),
    "truncated manifest": lambda c: _truncate(c / MANIFEST),
    "deleted manifest": lambda c: (c / MANIFEST).unlink(),
    # broken before its manifest was written: the model loads, then the optimizer fails, and the
    # restart must not keep the loaded weights
    "truncated optimizer.bin under a matching manifest": lambda c: (
        _truncate(c / "optimizer.bin"),
        _rewrite_manifest(c),
    ),
    # load_state fails after restoring the weights and the optimizer: both must be put back
    "a stray custom_checkpoint_0.pkl under a matching manifest": lambda c: (
        (c / "custom_checkpoint_0.pkl").write_bytes(b"not ours"),
        _rewrite_manifest(c),
    ),
    "state.json without a position under a matching manifest": lambda c: (
        (c / "state.json").write_text('{"processes": 1}'),
        _rewrite_manifest(c),
    ),
}


@pytest.mark.parametrize("damage", CHECKPOINT_DAMAGE)
def test_a_damaged_checkpoint_is_set_aside_and_the_run_restarts(
    stopped, damage, loop_reference, tmp_path, capsys
):
    _stopped_copy(stopped, tmp_path)
    checkpoint = tmp_path / CHECKPOINT_DIR
    CHECKPOINT_DAMAGE[damage](checkpoint)
    capsys.readouterr()
    final = _train(tmp_path)
    lines = _warnings(capsys.readouterr().err)
    assert len(lines) == 1, lines
    assert f"checkpoint {checkpoint} is damaged" in lines[0]
    assert "restarting the run from scratch" in lines[0]
    assert len(list(tmp_path.glob("checkpoint.corrupt-*"))) == 1
    assert _same(final, loop_reference)
    assert _logged_steps(tmp_path) == [1, 2, 3, 4]


def test_a_damaged_checkpoint_falls_back_to_a_sound_previous_one(
    stopped, loop_reference, tmp_path, capsys
):
    _stopped_copy(stopped, tmp_path)
    previous = tmp_path.parent / f"{tmp_path.name}-step2"
    shutil.copytree(tmp_path / CHECKPOINT_DIR, previous)
    _train(tmp_path, stop=3)
    assert _step(tmp_path / CHECKPOINT_DIR) == 3
    # as if killed between save_checkpoint's two renames, then the newer one damaged
    previous.rename(tmp_path / OLD_CHECKPOINT_DIR)
    _truncate(tmp_path / CHECKPOINT_DIR / "model.safetensors")
    capsys.readouterr()
    final = _train(tmp_path)
    lines = _warnings(capsys.readouterr().err)
    assert len(lines) == 1 and f"trying the previous checkpoint {OLD_CHECKPOINT_DIR}" in lines[0]
    assert _same(final, loop_reference)
    assert not (tmp_path / OLD_CHECKPOINT_DIR).exists()


def test_a_half_deleted_old_checkpoint_beside_a_sound_one_is_ignored(
    stopped, loop_reference, tmp_path, capsys
):
    _stopped_copy(stopped, tmp_path)
    old = tmp_path / OLD_CHECKPOINT_DIR
    shutil.copytree(tmp_path / CHECKPOINT_DIR, old)
    (old / "model.safetensors").unlink()  # killed during save_checkpoint's final rmtree
    capsys.readouterr()
    final = _train(tmp_path)
    assert _warnings(capsys.readouterr().err) == []
    assert _same(final, loop_reference)
    assert not old.exists()  # removed by the next save, as the interrupted cleanup would have


def test_a_half_deleted_old_checkpoint_alone_is_set_aside(
    stopped, loop_reference, tmp_path, capsys
):
    _stopped_copy(stopped, tmp_path)
    old = tmp_path / OLD_CHECKPOINT_DIR
    (tmp_path / CHECKPOINT_DIR).rename(old)
    (old / "optimizer.bin").unlink()
    capsys.readouterr()
    final = _train(tmp_path)
    lines = _warnings(capsys.readouterr().err)
    assert len(lines) == 1 and f"checkpoint {old} is damaged (optimizer.bin: missing" in lines[0]
    assert len(list(tmp_path.glob(f"{OLD_CHECKPOINT_DIR}.corrupt-*"))) == 1
    assert _same(final, loop_reference)


def test_a_checkpoint_from_before_save_state_is_set_aside_and_the_run_restarts(
    stopped, loop_reference, tmp_path, capsys
):
    _stopped_copy(stopped, tmp_path)
    checkpoint = tmp_path / CHECKPOINT_DIR
    # the earlier layout: the main process's optimizer and RNG states under these names
    (checkpoint / "optimizer.bin").rename(checkpoint / "optimizer.pt")
    (checkpoint / "random_states_0.pkl").rename(checkpoint / "rng.pt")
    _rewrite_manifest(checkpoint)
    capsys.readouterr()
    final = _train(tmp_path)
    lines = _warnings(capsys.readouterr().err)
    assert len(lines) == 1, lines
    assert f"checkpoint {checkpoint} was written by an older forgetbench" in lines[0]
    assert "restarting the run from scratch" in lines[0]
    assert len(list(tmp_path.glob("checkpoint.corrupt-*"))) == 1
    assert _same(final, loop_reference)
    assert _logged_steps(tmp_path) == [1, 2, 3, 4]


def test_a_checkpoint_of_another_process_count_is_refused(stopped, tmp_path):
    _stopped_copy(stopped, tmp_path)
    state_file = tmp_path / CHECKPOINT_DIR / "state.json"
    state_file.write_text(json.dumps({**json.loads(state_file.read_text()), "processes": 2}))
    _rewrite_manifest(tmp_path / CHECKPOINT_DIR)
    with pytest.raises(
        ConfigError, match="written by 2 process.*this run has 1.*--num_processes 2"
    ):
        _train(tmp_path)


def test_a_torn_last_log_line_is_dropped_on_resume(stopped, loop_reference, tmp_path, capsys):
    _stopped_copy(stopped, tmp_path)
    with (tmp_path / TRAIN_LOG).open("a") as handle:
        handle.write('{"step": 3, "epoch": 2, "lo')  # killed mid-write
    capsys.readouterr()
    final = _train(tmp_path)
    lines = _warnings(capsys.readouterr().err)
    assert len(lines) == 1 and "dropped 1 torn or unreadable line(s)" in lines[0]
    assert _logged_steps(tmp_path) == [1, 2, 3, 4]
    assert _same(final, loop_reference)


def test_a_damaged_unlearning_run_is_set_aside_and_rerun(finished, tmp_path, capsys):
    from forgetbench.methods.base import build_method
    from forgetbench.methods.refusals import REFUSALS
    from forgetbench.modeling.templates import PromptTemplate
    from forgetbench.records import QARecord
    from forgetbench.train.unlearn import UNLEARN_FILE, run_unlearning
    from toy import toy_qa

    parent = _finished_copy(finished, tmp_path) / "model"
    records = [QARecord(question=q, answer=a) for q, a in toy_qa()]

    def unlearn():
        return run_unlearning(
            tmp_path,
            model_dir=parent,
            forget=records[:8],
            retain=records[8:],
            method=build_method("grad_diff"),
            config=LoopConfig(lr=1e-3, epochs=2, batch_size=4, per_device_batch_size=4),
            template=PromptTemplate("question_answer"),
            refusals=REFUSALS,
            split="toy",
            max_length=64,
            progress=False,
        )

    first = unlearn()
    folder = first.model_dir.parent
    record = json.loads((folder / UNLEARN_FILE).read_text())
    assert any(name.startswith("snapshots/") for name in record["files"])
    weights = _weights(first.model_dir)
    snapshot = next(p for s, p in first.snapshots if s and p != first.model_dir)
    _flip_byte(snapshot / "model.safetensors")
    capsys.readouterr()
    again = unlearn()
    lines = _warnings(capsys.readouterr().err)
    assert len(lines) == 1 and f"cached stage {folder} is damaged (snapshots/" in lines[0]
    assert not again.cached and _same(_weights(again.model_dir), weights)
    assert len(list((tmp_path / "unlearn").glob("*.corrupt-*"))) == 1
    assert unlearn().cached
