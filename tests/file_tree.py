"""What the fault tests compare before and after a failing command: that nothing already on disk
changed."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path


def snapshot(*roots: Path) -> dict[str, str]:
    """Every entry under each root (a missing root adds nothing), without following links: a
    file's sha256, a link's target (plus its file's sha256 when it points at one), a folder."""
    entries = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                path = Path(folder) / name
                if path.is_symlink():
                    entry = f"link -> {os.readlink(path)}"
                    if path.is_file():
                        entry += f" {hashlib.sha256(path.read_bytes()).hexdigest()}"
                elif path.is_dir():
                    entry = "folder"
                else:
                    entry = hashlib.sha256(path.read_bytes()).hexdigest()
                entries[str(path)] = entry
    return entries


def run_folder(tiny_study, folder: Path, *stages: str) -> Path:
    """A run folder holding the session's data and the named stages (real copies, not links)."""
    run, data, *_ = tiny_study
    shutil.copytree(data, folder / "data")
    for stage in sorted((run / "models").iterdir()):
        if stage.name.startswith(("tokenizer-", *stages)):
            shutil.copytree(stage.resolve(), folder / "models" / stage.name)
    return folder
