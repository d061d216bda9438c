"""The shared cache (FORGETBENCH_CACHE): a stage lives in it once and every output folder links to
it; two runs filling one entry take turns; a second study in a new folder trains nothing."""

from __future__ import annotations

import json
import queue
import shutil
from pathlib import Path

import pytest

from forgetbench.cache import cache_root, clear, entries, shared_entry, survey
from forgetbench.cli import main
from forgetbench.study.pool import _worker_context


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("FORGETBENCH_CACHE", str(root))
    return root


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("FORGETBENCH_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_root() == tmp_path / "forgetbench"
    monkeypatch.setenv("FORGETBENCH_CACHE", "off")
    assert cache_root() is None


def test_two_output_folders_link_to_one_entry(cache, tmp_path):
    first, second = tmp_path / "a" / "models" / "x-1", tmp_path / "b" / "models" / "x-1"
    with shared_entry(first, kind="models", name="x-1") as folder:
        (folder / "weights").write_text("trained once")
    with shared_entry(second, kind="models", name="x-1") as folder:
        assert (folder / "weights").read_text() == "trained once"
    assert first.is_symlink() and second.is_symlink()
    assert first.resolve() == second.resolve() == (cache / "models" / "x-1").resolve()


def test_a_real_folder_from_before_the_cache_stays_in_place(cache, tmp_path):
    old = tmp_path / "run" / "models" / "x-1"
    old.mkdir(parents=True)
    with shared_entry(old, kind="models", name="x-1") as folder:
        assert folder == old
    assert not old.is_symlink() and not (cache / "models" / "x-1").exists()


def _train(out: str, cache: str, results, go=None) -> None:
    import os

    os.environ["FORGETBENCH_CACHE"] = cache
    from forgetbench.modeling.builtin import build_tiny_model
    from forgetbench.train.loop_config import LoopConfig
    from forgetbench.train.stages import run_stage
    from toy import toy_examples, toy_tokenizer

    tokenizer = toy_tokenizer()
    config = LoopConfig(lr=3e-3, epochs=2, batch_size=8, per_device_batch_size=8, weight_decay=0.0)
    model = build_tiny_model(tokenizer)
    if go is not None:  # ready: both processes start the stage at once
        results.put("ready")
        go.wait(timeout=300)
    stage = run_stage(
        out, name="finetune", parent="tiny", parent_model=(model, tokenizer),
        examples=toy_examples(), config=config, progress=False,
    )  # fmt: skip
    results.put((stage.cached, stage.losses, str(stage.model_dir.resolve())))


@pytest.mark.slow
def test_two_runs_filling_one_entry_take_turns(cache, tmp_path):
    # Two processes train the same stage into two output folders at once: one trains, the other
    # waits on the entry's lock and reuses what it finds; nothing is written twice or torn. The
    # second process is this one: it starts the stage when the other is ready to, so that they
    # race for the entry. The other is a fork of the study pool's fork server (a spawned
    # interpreter costs 4 s of CPU to import torch; the server is started once per process, and
    # the study below forks its workers from it too).
    context = _worker_context()
    results, go = context.Queue(), context.Event()
    other = context.Process(target=_train, args=(str(tmp_path / "a"), str(cache), results, go))
    other.start()
    assert results.get(timeout=300) == "ready"
    go.set()
    here = queue.Queue()
    _train(str(tmp_path / "b"), str(cache), here)
    outcomes = [here.get(), results.get(timeout=300)]
    other.join(timeout=60)
    assert other.exitcode == 0
    assert sorted(cached for cached, _, _ in outcomes) == [False, True]
    assert outcomes[0][1:] == outcomes[1][1:]  # the same losses and the same model folder
    (stage,) = [e for e in entries(cache) if e["kind"] == "models"]
    log = Path(outcomes[0][2]).parent / "work" / "train_log.jsonl"
    assert len(log.read_text().splitlines()) == len(outcomes[0][1])  # one run's steps only


# Every kind of stage (data, models, unlearning runs, evaluations), each as few times as shows it:
# no shadow models (the same `models` stages as the retain model) and only the relearning attack,
# which trains, on the three attacked models. At tiny scale forget01 holds forget10's questions,
# so asking for both computes forget10 once.
STUDY = ["run", "--scale", "tiny", "--splits", "forget01,forget10", "--methods", "grad_ascent",
         "unlearn.epochs=1", "eval.formats=false", "eval.lume=false", "eval.max_new_tokens=4",
         "eval.mia_shadows=0", "study.attacks=[relearn]", "--json", "--no-progress"]  # fmt: skip


def _training_logs(root: Path) -> dict[str, int]:
    return {
        str(log.relative_to(root)): len(log.read_text().splitlines())
        for log in root.rglob("train_log.jsonl")
    }


@pytest.mark.slow
def test_a_second_study_in_a_new_folder_trains_and_evaluates_nothing(
    cache, tmp_path, capsys, tiny_study, tiny_cache
):
    # The cache starts with the session's pretrained, finetuned and retain models (entries as
    # another run left them: the same stages `run --scale tiny` asks for), so only the rest trains.
    for entry in (tiny_cache / "models").iterdir():
        if entry.is_dir():
            shutil.copytree(entry, cache / "models" / entry.name)
    given = {p: (cache / p).stat().st_mtime_ns for p in _training_logs(cache)}
    assert len(given) == 3
    assert main([*STUDY, "--out", str(tmp_path / "first")]) == 0
    logs = _training_logs(cache)
    assert {p: (cache / p).stat().st_mtime_ns for p in given} == given  # reused, not retrained
    # The rest each logged once: the unlearning run, and the relearning attack on the finetuned,
    # retain and unlearned models.
    assert len(logs) == 3 + 4 and all(logs.values())
    assert sum("/relearn-a-" in p for p in logs) == 3
    summaries = {p: p.stat().st_mtime_ns for p in cache.rglob("summary.json")}
    # retain, finetuned, base and grad_ascent's final model; 2 B-half evaluations (unattacked,
    # relearned) of each attacked model.
    assert len(summaries) == 4 + 3 * 2

    assert main([*STUDY, "--out", str(tmp_path / "second")]) == 0
    assert _training_logs(cache) == logs  # no training step ran again
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("summary.json")} == summaries
    second = tmp_path / "second"
    for part in ("data", *(second / "models").iterdir(), *(second / "unlearn").iterdir()):
        assert (second / part).is_symlink(), part  # links into the cache, not copies
    first = json.loads((tmp_path / "first" / "results.json").read_text())
    assert json.loads((second / "results.json").read_text())["rows"] == first["rows"]
    # The two splits' rows are one computation's (the counts above: one unlearning run, one
    # evaluation per model), reported under each name, forget01's first as asked.
    assert first["same_data"] == {"forget01": "forget10"}
    assert first["config"]["study"]["splits"] == ["forget01", "forget10"]
    by_split = {
        split: [{**r, "split": None, "log": None} for r in first["rows"] if r["split"] == split]
        for split in ("forget01", "forget10")
    }
    assert by_split["forget01"] == by_split["forget10"] and len(by_split["forget10"]) == 4
    assert first["rows"][0]["split"] == "forget01"
    # Each split's rows point at logs/{split}/...: forget01's folder links to forget10's.
    assert (tmp_path / "first" / "logs" / "forget01").readlink() == Path("forget10")
    for row in first["rows"]:
        assert row["log"].startswith(f"logs/{row['split']}/"), row["log"]
        assert (tmp_path / "first" / row["log"] / "summary.json").is_file(), row["log"]

    capsys.readouterr()
    assert main(["cache", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {e["kind"] for e in listed["entries"]} == {"data", "models", "unlearn", "evaluations"}
    assert listed["bytes"] > 0
    assert main(["cache", "clear", "--json"]) == 0
    assert entries(cache) == [] and clear(cache) == ([], 0, [])


# --- The cache deletes only what it can prove it made ------------------------------------------


def _checksums(root: Path) -> dict[str, str]:
    """Every path under `root` (symlinks as their targets' text, never followed) with its content's
    hash: what 'nothing changed' means."""
    import hashlib
    import os

    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = "-> " + os.readlink(path)
            elif path.is_file():
                found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[key] = "dir"
    return found


def _home_like(tmp_path: Path) -> tuple[Path, Path]:
    """A folder a user might point FORGETBENCH_CACHE at by mistake, and a folder outside it that
    symlinks inside lead to."""
    home, outside = tmp_path / "home", tmp_path / "outside"
    (home / "Documents" / "proj").mkdir(parents=True)
    (home / "Documents" / "proj" / "a.txt").write_text("thesis")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id").write_text("secret key")
    (outside / "keep" / "deep").mkdir(parents=True)
    (outside / "keep" / "deep" / "b.txt").write_text("not the cache's")
    return home, outside


def _cli_error(capsys, argv) -> tuple[int, str]:
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def test_clear_refuses_a_home_folder_and_changes_nothing(tmp_path, monkeypatch, capsys):
    home, outside = _home_like(tmp_path)
    (home / "models").symlink_to(outside, target_is_directory=True)
    monkeypatch.setenv("FORGETBENCH_CACHE", str(home))
    before, outside_before = _checksums(home), _checksums(outside)
    code, err = _cli_error(capsys, ["cache", "clear"])
    assert code != 0
    assert "did not make" in err and "Documents" in err and "nothing was removed" in err
    assert _checksums(home) == before and _checksums(outside) == outside_before
    assert not (home / "CACHEDIR.TAG").exists()  # never tags a folder the user already had


def test_clear_removes_marked_entries_only_and_never_follows_a_symlink_out(
    cache, tmp_path, monkeypatch, capsys
):
    _, outside = _home_like(tmp_path)
    outside_before = _checksums(outside)
    out = tmp_path / "run"
    with shared_entry(out / "models" / "m-1", kind="models", name="m-1") as folder:
        (folder / "weights").write_text("w")
        # A stage folder may hold links (to its parent model, say): removing the entry removes
        # the link, not what it points at.
        (folder / "parent").symlink_to(outside / "keep", target_is_directory=True)
    with shared_entry(out / "evaluations" / "e-1", kind="evaluations", name="e-1") as folder:
        (folder / "summary.json").write_text("{}")
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f")
    assert [(e["kind"], e["name"]) for e in entries(cache)] == [
        ("evaluations", "e-1"),
        ("models", "m-1"),
    ]

    # Anything unmarked stops the whole clear, named, before a single entry goes.
    (cache / "unlearn").symlink_to(outside, target_is_directory=True)
    (cache / "models" / "hand-made").mkdir()
    (cache / "models" / "hand-made" / "x").write_text("mine")
    (cache / "evaluations" / "linked").symlink_to(outside / "keep", target_is_directory=True)
    before = _checksums(cache)
    code, err = _cli_error(capsys, ["cache", "clear"])
    assert code != 0 and "3 item(s)" in err and "hand-made" in err
    assert _checksums(cache) == before and _checksums(outside) == outside_before
    capsys.readouterr()
    assert main(["cache", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(listed["entries"]) == 2 and len(listed["foreign"]) == 3

    for item in ("unlearn", "evaluations/linked"):
        (cache / item).unlink()
    shutil.rmtree(cache / "models" / "hand-made")
    capsys.readouterr()
    assert main(["cache", "clear"]) == 0
    printed = capsys.readouterr().out
    assert "removed evaluations/e-1" in printed and "removed models/m-1" in printed
    assert "removed 2 entries" in printed
    assert entries(cache) == [] and survey(cache) == ([], [])
    assert _checksums(outside) == outside_before


def test_a_marker_copied_under_another_name_proves_nothing(cache, tmp_path):
    with shared_entry(tmp_path / "run" / "m-1", kind="models", name="m-1"):
        pass
    shutil.copytree(cache / "models" / "m-1", cache / "models" / "m-2")
    shutil.copytree(cache / "models" / "m-1", cache / "evaluations" / "m-1")
    marked, foreign = survey(cache)
    assert marked == [cache / "models" / "m-1"]
    assert foreign == [cache / "evaluations" / "m-1", cache / "models" / "m-2"]


def test_an_entry_from_before_markers_is_adopted_when_a_run_asks_for_it(cache, tmp_path):
    old = cache / "models" / "m-1"
    old.mkdir(parents=True)
    (old / "weights").write_text("old")
    assert survey(cache) == ([], [old])
    with shared_entry(tmp_path / "run" / "m-1", kind="models", name="m-1") as folder:
        assert (folder / "weights").read_text() == "old"
    assert survey(cache) == ([old], [])


def test_an_entry_in_use_is_kept(cache, tmp_path):
    with shared_entry(tmp_path / "run" / "m-1", kind="models", name="m-1"):
        assert clear(cache) == ([], 0, ["models/m-1"])
    assert clear(cache)[0] == ["models/m-1"]


@pytest.mark.parametrize("action", ["list", "clear"])
def test_a_cache_that_is_a_file_is_refused(tmp_path, monkeypatch, capsys, action):
    file = tmp_path / "cache"
    file.write_text("not a folder")
    monkeypatch.setenv("FORGETBENCH_CACHE", str(file))
    code, err = _cli_error(capsys, ["cache", action])
    assert code != 0 and f"FORGETBENCH_CACHE '{file}' is a file, not a folder" in err
    assert file.read_text() == "not a folder"


@pytest.mark.parametrize(
    "argv",
    [["eval", "--model", "m", "--data", "d"], ["run", "--scale", "tiny"], ["report", "r"]],
)
def test_a_cache_that_is_a_file_is_refused_by_every_command_before_any_work(
    tmp_path, monkeypatch, capsys, argv
):
    # eval and report never reach the cache, and run reached it only after generating its data.
    file = tmp_path / "cache"
    file.write_text("not a folder")
    monkeypatch.setenv("FORGETBENCH_CACHE", str(file))
    out = tmp_path / "out"
    code, err = _cli_error(capsys, [*argv, "--out", str(out)] if argv[0] != "report" else argv)
    assert code != 0 and f"FORGETBENCH_CACHE '{file}' is a file, not a folder" in err
    assert err.count("error:") == 1 and not out.exists()


def test_clear_on_a_read_only_cache_says_so_without_an_out_folder(cache, monkeypatch, capsys):
    import errno

    import forgetbench.cache

    with shared_entry(cache.parent / "run" / "m-1", kind="models", name="m-1") as folder:
        (folder / "weights").write_text("w")

    def read_only(entry):
        raise OSError(errno.EROFS, "Read-only file system", str(entry) + ".lock")

    monkeypatch.setattr(forgetbench.cache, "_unless_held", read_only)
    code, err = _cli_error(capsys, ["cache", "clear"])
    assert code != 0 and err.count("error:") == 1
    assert f"cannot clear cache entry '{cache / 'models' / 'm-1'}': read-only file system" in err
    assert "--out" not in err and "FORGETBENCH_CACHE" in err
    assert (cache / "models" / "m-1" / "weights").read_text() == "w"


def test_a_damaged_entry_set_aside_stays_ours_and_its_fresh_entry_is_marked(cache, tmp_path):
    from forgetbench.cache import set_aside_stage

    link = tmp_path / "run" / "m-1"
    with shared_entry(link, kind="models", name="m-1") as folder:
        (folder / "weights").write_text("torn")
    aside = set_aside_stage(link)
    assert aside.parent == cache / "models" and aside.name.startswith("m-1.corrupt-")
    assert (aside / "weights").read_text() == "torn" and list(link.iterdir()) != []
    assert sorted(p.name for p in survey(cache)[0]) == ["m-1", aside.name]
    assert survey(cache)[1] == []
    removed, _, _ = clear(cache)
    assert sorted(removed) == sorted(["models/m-1", f"models/{aside.name}"])
