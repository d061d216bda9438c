"""What the parity harnesses that import a reference's own code share (parity_muse_wmdp.py,
parity_muse_miniature.py, parity_rwku.py): their options (the reference's checkout, --out,
--tol) and the copy of the reference's files from the checkout into OUT/ref as importable
packages, put first on sys.path. Each package gets an empty `__init__`: a reference's own imports
its whole framework (hydra, LLaMA-Factory, every evaluator). Nothing of a reference is copied
into this repository. A harness imports this module as its sibling, so it stays in this folder."""

import argparse
import shutil
import sys
from pathlib import Path


def reference_options(doc: str, *checkouts: tuple[str, str]) -> argparse.ArgumentParser:
    """The parser of a harness whose docstring is `doc`: one required option per reference
    checkout (flag, what to check out), then --out and --tol; the harness adds its own."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    for flag, what in checkouts:
        parser.add_argument(flag, required=True, help=f"a checkout of {what}")
    parser.add_argument(
        "--out", required=True, help="a folder for the reference's copied code and the outputs"
    )
    parser.add_argument(
        "--tol", type=float, default=1e-4, help="the largest difference that passes (1e-4)"
    )
    return parser


def import_reference(out: Path, files: dict[str, Path]) -> Path:
    """Copy each reference file to OUT/ref/<target> (target: a path inside OUT/ref), give every
    folder above it an empty `__init__.py`, and put OUT/ref first on sys.path."""
    ref = out / "ref"
    for target, source in files.items():
        path = ref / target
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, path)
        for parent in path.relative_to(ref).parents:
            if str(parent) != ".":
                (ref / parent / "__init__.py").touch()
    sys.path.insert(0, str(ref))
    return ref
