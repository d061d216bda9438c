"""`generate_mini`: build a world in memory, write every file atomically, then `manifest.json`.

Layout of the output folder:
```
manifest.json        seed, scale, generator version, sizes, records + sha256 of every file
tofu/                TOFU's splits (load_tofu(<out>/tofu, split)) + instance-level splits
formats/             the five formats, {format}_{forget|retain}.jsonl
lume/                forget.jsonl, retain.jsonl (load_lume(<out>/lume, split)), holdout.jsonl
muse/news/           a MUSE corpus folder in MUSE's released layout (load_knowmem(<out>/muse/news, ...))
wmdp/                WMDP's question files and wmdp-corpora/ (load_wmdp(<out>/wmdp, subset))
rwku/Target/         RWKU's per-target folders (load_rwku(<out>/rwku, target, file))
pretrain.jsonl       the pretraining corpus
```
The manifest is written last, so a folder without one is an unfinished generation, which the
next call completes. The same seed and scale give byte-identical files on every machine.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from forgetbench.benchmarks.mini.corpus import world_background, world_corpus
from forgetbench.benchmarks.mini.formats import format_files
from forgetbench.benchmarks.mini.lume_layout import lume_files
from forgetbench.benchmarks.mini.probes import probe_files
from forgetbench.benchmarks.mini.released import released_texts
from forgetbench.benchmarks.mini.scales import FORGET_PERCENTS, forget_authors, get_scale
from forgetbench.benchmarks.mini.tofu_layout import retain_perturbed_authors, tofu_files
from forgetbench.benchmarks.mini.world import build_world
from forgetbench.errors import DataError
from forgetbench.io import atomic_write_json, atomic_write_text, parse_json, read_text, shorten

# Bump whenever the same seed and scale would give different files. Version 3 added the MUSE- and
# WMDP-shaped folders and the generalisation probes; every file of version 2 is unchanged, so a
# version-2 folder is completed in place (`_check_target`). Version 4 lays MUSE's scal/ and sust/
# out as News' are (forget_1 the forget set, three more folds); drawing the folds' people
# rephrased one retain2 article; no file outside muse/ changed. Version 5 keeps each MUSE article
# to its person's first facts, so that every MUSE text fits the tiny model's positions; again no
# file outside muse/ changed.
# Version 6 adds RWKU's per-target folders (rwku/Target/); no file outside rwku/ changed.
GENERATOR_VERSION = "6"
MANIFEST = "manifest.json"
# Where the released-layout miniatures go in the folder: MUSE's corpus folder as its authors name
# News's (`data/news`), WMDP's files at a folder's top, as lm-eval and the Hub lay them out.
# RWKU's, the `Target` folder its process/data_process.py writes.
RELEASED_FOLDERS = {"muse": "muse/news", "wmdp": "wmdp", "rwku": "rwku/Target"}


def build_files(*, scale: str, seed: int) -> dict[str, list[dict[str, Any]]]:
    """Every file of a world as rows, keyed by its path relative to the output folder."""
    size = get_scale(scale)
    if not isinstance(seed, int) or seed < 0:
        raise DataError(f"seed must be a non-negative integer, got {seed!r}")
    world = build_world(size, seed)
    real, facts = world_background(size, seed)
    files = {f"tofu/{name}": rows for name, rows in tofu_files(world, real, facts).items()}
    files.update(format_files(world, retain_perturbed_authors(world)))
    files.update(lume_files(seed, size.lume_docs, world.source))
    files["pretrain.jsonl"] = world_corpus(world, real, facts, seed)
    # Evaluation-only files from their own streams: every file above stays as it was.
    files.update({f"tofu/{name}": rows for name, rows in probe_files(world).items()})
    return files


def render(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def generate_mini(out_dir: str | Path, *, scale: str = "tiny", seed: int = 0) -> dict[str, Any]:
    """Write the miniature benchmark to `out_dir` and return its manifest.

    Re-running with the same scale, seed and generator version is a no-op (files that went
    missing or were changed are rewritten); a folder holding anything else is never touched.
    """
    out = Path(out_dir)
    texts = {
        path: render(rows) for path, rows in sorted(build_files(scale=scale, seed=seed).items())
    }
    records = {path: text.count("\n") for path, text in texts.items()}
    for benchmark, folder in RELEASED_FOLDERS.items():
        for path, (text, count) in released_texts(benchmark, scale=scale, seed=seed).items():
            texts[f"{folder}/{path}"], records[f"{folder}/{path}"] = text, count
    size = get_scale(scale)
    manifest = {
        "benchmark": "mini",
        "generator_version": GENERATOR_VERSION,
        "scale": scale,
        "seed": seed,
        "sizes": {
            "authors": size.authors,
            "questions_per_author": 20,
            **{f"forget{p:02d}_authors": forget_authors(size, p) for p in FORGET_PERCENTS},
            "holdout_authors": forget_authors(size, max(FORGET_PERCENTS)),
        },
        "files": {
            path: {"records": records[path], "sha256": _sha256(text)}
            for path, text in sorted(texts.items())
        },
    }
    _check_target(out, manifest)
    for path, text in texts.items():
        target = out / path
        if (
            not target.is_file()
            or _sha256(target.read_text(encoding="utf-8")) != manifest["files"][path]["sha256"]
        ):
            atomic_write_text(target, text)
    if _read_manifest(out) != manifest:
        atomic_write_json(out / MANIFEST, manifest)
    return manifest


def _check_target(out: Path, manifest: dict[str, Any]) -> None:
    if out.exists() and not out.is_dir():
        raise DataError(f"'{out}' exists and is not a folder", "pick another --out")
    if not out.is_dir():
        return
    existing = _read_manifest(out)
    if existing is not None:
        if existing != manifest and not _older_generation(existing, manifest):
            raise DataError(
                f"{out} already holds a different miniature benchmark "
                f"(scale {existing.get('scale')}, seed {existing.get('seed')}, "
                f"generator version {existing.get('generator_version')})",
                "pick another --out or delete that folder",
            )
        return
    # No manifest: only an interrupted generation of ours may be completed in place.
    ours = {Path(p).parts[0] for p in manifest["files"]}
    foreign = sorted(
        p.name for p in out.iterdir() if p.name not in ours and not p.name.startswith(".")
    )
    if foreign:
        raise DataError(
            f"{out} is not empty and holds no {MANIFEST} (found {', '.join(foreign[:3])})",
            "pick another --out or delete that folder",
        )


def _older_generation(existing: dict[str, Any], manifest: dict[str, Any]) -> bool:
    """An earlier generator's folder of the same world: each of its files is one of ours, with
    the same bytes, but for the released-layout folders (muse/, wmdp/), which a later generator
    may lay out anew and which are rewritten. Completing it in place keeps folders made before a
    generator added files (and the models trained from them) usable; the document study's models
    are cached by the texts they read, so a rerun retrains only what a rewritten file changed."""
    same_world = all(existing.get(k) == manifest[k] for k in ("benchmark", "scale", "seed"))
    ours = manifest["files"]
    released = tuple(f"{folder}/" for folder in RELEASED_FOLDERS.values())
    return same_world and all(
        ours.get(path) == entry
        for path, entry in existing["files"].items()
        if not path.startswith(released)
    )


def _read_manifest(out: Path) -> dict[str, Any] | None:
    path = out / MANIFEST
    if not path.is_file():
        return None
    hint = "delete the folder and generate it again"
    text = read_text(path)
    manifest = parse_json(text, str(path), hint=hint)
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        raise DataError(f"{path}: expected an object with a 'files' table", hint)
    for name, entry in files.items():
        parts = Path(name).parts
        if not parts or Path(name).is_absolute() or ".." in parts:
            raise DataError(
                f"{path}: 'files' names {shorten(name)}, not a file in the folder", hint
            )
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("records"), int)
        ):
            raise DataError(
                f"{path}: 'files' entry {shorten(name)} needs a 'sha256' string and a "
                "'records' count",
                hint,
            )
    return manifest


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The manifest of a generated folder, or a DataError saying how to make one."""
    out = Path(folder)
    manifest = _read_manifest(out) if out.is_dir() else None
    if manifest is None:
        raise DataError(
            f"no miniature benchmark in '{out}' (no {MANIFEST})",
            f"create one with 'forgetbench data generate --scale tiny --out {out}'",
        )
    return manifest


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
