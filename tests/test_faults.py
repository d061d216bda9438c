"""The error boundary: an unusable output folder, a full disk or a bug each end in one line on
stderr, an exit code by class and no traceback (unless asked for with --debug), and nothing
written before or beside them changes.

Read-only as root: root ignores permission bits, so a chmod'ed folder proves nothing here. The
checks write into a procfs folder (/proc/<pid>), which refuses new entries to root as well; the
permission-bits case runs only when the tests do not run as root."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from file_tree import snapshot
from forgetbench.cli import main
from forgetbench.errors import FilesystemError

# Every subcommand that writes, with its output folder as OUT and its handler (module of
# forgetbench.cli, function). The handlers are replaced by a tripwire below: the folder must be
# refused before a command starts any work.
WRITING_COMMANDS = {
    "data generate": (["data", "generate", "--out", "OUT"], "data.generate"),
    "eval": (["eval", "--model", "m", "--data", "d", "--out", "OUT"], "evaluate.evaluate"),
    "finetune": (["finetune", "--out", "OUT"], "train.finetune"),
    "unlearn": (["unlearn", "--method", "npo", "--out", "OUT"], "train.unlearn"),
    "run": (["run", "--out", "OUT"], "study.run"),
    "sanity": (["sanity", "--out", "OUT"], "evaluate.sanity"),
    "bench train": (["bench", "train", "--out", "OUT"], "bench.bench"),
    "bench eval": (["bench", "eval", "--out", "OUT"], "bench.bench"),
    "meta-eval": (["meta-eval", "--scale", "tiny", "--out", "OUT"], "study.meta_eval"),
    "report": (["report", "OUT"], "study.report"),
}


def _regular_file(tmp: Path) -> Path:
    (tmp / "out").write_text("an earlier file the user keeps\n")
    return tmp / "out"


def _dangling_symlink(tmp: Path) -> Path:
    (tmp / "out").symlink_to(tmp / "gone")
    return tmp / "out"


def _symlink_loop(tmp: Path) -> Path:
    (tmp / "out").symlink_to(tmp / "out")
    return tmp / "out"


def _inside_a_file(tmp: Path) -> Path:
    (tmp / "results.txt").write_text("not a folder\n")
    return tmp / "results.txt" / "run"


def _read_only_folder(tmp: Path) -> Path:
    return Path(f"/proc/{os.getpid()}")


def _new_folder_in_read_only_folder(tmp: Path) -> Path:
    return Path(f"/proc/{os.getpid()}/run")


BAD_FOLDERS: dict[str, Callable[[Path], Path]] = {
    "regular file": _regular_file,
    "dangling symlink": _dangling_symlink,
    "symlink loop": _symlink_loop,
    "new folder inside a file": _inside_a_file,
    "read-only folder": _read_only_folder,
    "new folder in a read-only folder": _new_folder_in_read_only_folder,
}


@pytest.fixture
def tripwire(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replace every writing command's handler; a refused folder leaves the list empty."""
    ran: list[str] = []
    for _, handler in WRITING_COMMANDS.values():
        monkeypatch.setattr(
            f"forgetbench.cli.{handler}", lambda args, name=handler: ran.append(name) or {}
        )
    return ran


def _earlier_results(tmp: Path) -> None:
    (tmp / "earlier").mkdir()
    (tmp / "earlier" / "results.json").write_text('{"forget/truth_ratio": 0.61}\n')


@pytest.mark.parametrize("case", list(BAD_FOLDERS))
@pytest.mark.parametrize("command", list(WRITING_COMMANDS))
def test_unusable_output_folder_is_refused_before_any_work(
    capsys, tmp_path, tripwire, command, case
):
    out = BAD_FOLDERS[case](tmp_path)
    _earlier_results(tmp_path)
    before = snapshot(tmp_path)
    argv = [str(out) if a == "OUT" else a for a in WRITING_COMMANDS[command][0]]
    code = main([*argv, "--json"])
    stdout, stderr = capsys.readouterr()
    assert tripwire == [], f"{command} started its work on a bad folder"
    assert code == FilesystemError.exit_code, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert f"'{out}'" in lines[0] and " — " in lines[0]
    assert "Traceback" not in stderr
    assert json.loads(stdout.strip().splitlines()[-1])["error"] == lines[0][len("error: ") :]
    assert snapshot(tmp_path) == before


def test_a_good_folder_passes_and_the_check_leaves_nothing_behind(capsys, tmp_path, tripwire):
    _earlier_results(tmp_path)
    before = snapshot(tmp_path)
    for folder in (tmp_path / "earlier", tmp_path / "new" / "run"):
        assert main(["data", "generate", "--out", str(folder)]) == 0
    assert tripwire == ["data.generate", "data.generate"]
    assert snapshot(tmp_path) == before  # no probe left, the new folder not created early


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits; /proc cases cover it")
def test_permission_bits_are_refused(capsys, tmp_path, tripwire):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        code = main(["run", "--out", str(locked / "run")])
    finally:
        locked.chmod(0o755)
    assert code == 4 and tripwire == []
    assert "permission denied" in capsys.readouterr().err


def test_folders_chosen_by_the_command_are_checked_too(capsys, tmp_path, monkeypatch):
    # run's folder may come from `out=`; sanity picks runs/sanity-<scale> itself.
    (tmp_path / "runs").write_text("a file where the runs folder would go\n")
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    assert main(["run", "out=runs/study"]) == 4
    assert "error: out 'runs/study' is inside 'runs', a file" in capsys.readouterr().err
    assert main(["sanity", "--scale", "tiny"]) == 4
    err = capsys.readouterr().err
    assert "error: the default --out 'runs/sanity-tiny' is inside 'runs', a file" in err
    assert snapshot(tmp_path) == before


def test_a_full_disk_while_writing_names_the_file_and_keeps_earlier_results(
    capsys, tmp_path, monkeypatch
):
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    _earlier_results(tmp_path)
    before = snapshot(tmp_path / "earlier")
    monkeypatch.setattr(os, "fsync", full)
    code = main(["data", "generate", "--scale", "tiny", "--out", str(tmp_path / "new")])
    err = capsys.readouterr().err
    assert code == 4, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(f"error: cannot write '{tmp_path / 'new'}/")
    assert "no space left on device — free space on that disk" in lines[0]
    assert not [p for p in (tmp_path / "new").rglob("*") if p.is_file()]  # no half-written file
    assert snapshot(tmp_path / "earlier") == before


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (
            OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),  # write() on a handle: no path
            "no space left on device (writing under '{out}') — free space",
        ),
        (
            PermissionError(errno.EACCES, os.strerror(errno.EACCES), "{out}/model.safetensors"),
            "'{out}/model.safetensors': permission denied — check its permissions",
        ),
        (
            OSError(errno.EROFS, os.strerror(errno.EROFS), "{out}/stage.json"),
            "'{out}/stage.json': read-only file system — that file system is read-only",
        ),
        (
            OSError(errno.ELOOP, os.strerror(errno.ELOOP), "{out}/a"),
            "'{out}/a': too many levels of symbolic links — a symlink in the path loops",
        ),
        (
            NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), "{out}/f/x"),
            "'{out}/f/x': not a directory — a part of the path is a file",
        ),
    ],
)
def test_os_errors_during_the_work_are_one_line_naming_the_path(
    capsys, tmp_path, monkeypatch, raised, expected
):
    out = str(tmp_path)
    if raised.filename:
        raised.filename = raised.filename.replace("{out}", out)

    def failing(args):
        raise raised

    monkeypatch.setattr("forgetbench.cli.study.report", failing)
    assert main(["report", out]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert expected.replace("{out}", out) in err


def _bug(args):
    raise ZeroDivisionError("division by zero\nsecond line of a long message")


def test_an_unexpected_exception_is_one_line_saying_it_is_a_bug(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("forgetbench.cli.study.report", _bug)
    assert main(["report", str(tmp_path), "--json"]) == 1
    out, err = capsys.readouterr()
    assert err == (
        "error: internal error (ZeroDivisionError: division by zero) — this is a bug in "
        "forgetbench; re-run with --debug (or FORGETBENCH_DEBUG=1) for the traceback and report "
        "it\n"
    )
    assert json.loads(out.strip().splitlines()[-1])["error"].startswith("internal error")


@pytest.mark.parametrize(
    ("argv_head", "argv_tail", "env"),
    [
        (["--debug"], [], None),  # before the command
        ([], ["--debug"], None),  # after it
        ([], [], "1"),
    ],
)
def test_debug_lets_the_exception_through(tmp_path, monkeypatch, argv_head, argv_tail, env):
    if env:
        monkeypatch.setenv("FORGETBENCH_DEBUG", env)
    monkeypatch.setattr("forgetbench.cli.study.report", _bug)
    with pytest.raises(ZeroDivisionError):
        main([*argv_head, "report", str(tmp_path), *argv_tail])
    (tmp_path / "file").write_text("x")
    with pytest.raises(FilesystemError, match="is a file, not a folder"):
        main([*argv_head, "report", str(tmp_path / "file"), *argv_tail])


def test_debug_off_values_keep_the_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("forgetbench.cli.study.report", _bug)
    for value in ("", "0", "false"):
        monkeypatch.setenv("FORGETBENCH_DEBUG", value)
        assert main(["report", str(tmp_path)]) == 1
        assert "Traceback" not in capsys.readouterr().err


def test_the_console_script_shows_a_traceback_only_with_debug(tmp_path):
    script = Path(sys.executable).with_name("forgetbench")
    (tmp_path / "file").write_text("x")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("FORGETBENCH_DEBUG", None)

    def run(*argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(script), *argv], capture_output=True, text=True, env={**env, **extra}, check=False
        )

    plain = run("report", str(tmp_path / "file"))
    assert plain.returncode == 4 and plain.stderr.count("\n") == 1
    assert "Traceback" not in plain.stderr
    for debug in (run("--debug", "report", str(tmp_path / "file")),
                  run("report", str(tmp_path / "file"), FORGETBENCH_DEBUG="1")):  # fmt: skip
        assert debug.returncode == 1
        assert "Traceback (most recent call last)" in debug.stderr
        assert "FilesystemError: results folder" in debug.stderr


@pytest.fixture
def full_disk(tmp_path):
    """A really small file system (a 300 KB tmpfs), where this machine lets the tests mount one."""
    import subprocess

    folder = tmp_path / "full"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield folder
    subprocess.run(["umount", str(folder)], check=False)


def test_a_full_disk_reported_by_safetensors_is_a_filesystem_error(full_disk):
    """safetensors reports ENOSPC as its own exception ('... (os error 28)'): saving a model on a
    really full file system is one line, exit 4."""
    from forgetbench.cli import as_error
    from forgetbench.modeling.builtin import build_tiny_model
    from forgetbench.modeling.loading import save_model
    from toy import toy_tokenizer

    tokenizer = toy_tokenizer()
    with pytest.raises(Exception) as caught:
        save_model(build_tiny_model(tokenizer), tokenizer, full_disk / "model")
    assert "os error 28" in str(caught.value)
    error = as_error(caught.value, None)
    assert error.exit_code == 4 and "no space left on device" in error.message.lower()
    assert "free space" in error.message


def test_data_generate_on_a_really_full_disk_is_one_line_and_keeps_earlier_files(full_disk, capsys):
    earlier = full_disk / "earlier.json"
    earlier.write_text('{"kept": true}')
    code = main(["data", "generate", "--scale", "tiny", "--out", str(full_disk / "mini")])
    err = capsys.readouterr().err
    assert code == 4 and err.count("error:") == 1 and "Traceback" not in err
    assert "no space left on device" in err.lower()
    assert earlier.read_text() == '{"kept": true}'
    leftovers = [p.name for p in full_disk.rglob("*") if p.is_file() and p.name.startswith(".")]
    assert not leftovers  # no half-written temp file survives
