"""What the parity harnesses that import a reference's own code share (parity_muse_wmdp.py,
parity_muse_miniature.py, parity_rwku.py): their options (the reference's checkout, --out,
--tol) and the copy of the reference's files from the checkout into OUT/ref as importable
packages, put first on sys.path. Each package gets an empty `__init__`: a reference's own imports
its whole framework (hydra, LLaMA-Factory, every evaluator). Nothing of a reference is copied
into this repository. The harnesses that run open-unlearning from its checkout with its own
Python instead (parity_open_unlearning.py, parity_open_unlearning_train.py) share their options
too (`open_unlearning_options`). A harness imports this module as its sibling, so it stays in
this folder."""

import argparse
import shutil
import sys
from pathlib import Path


def reference_options(doc: str, *checkouts: tuple[str, str]) -> argparse.ArgumentParser:
    """The parser of a harness whose docstring is `doc`: one required option per reference
    checkout (flag, what to check out), then --out and --tol; the harness adds its own."""
    parser = argparse.ArgumentParser(description=" ".join(doc.split("\n\n")[0].split()))
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


def open_unlearning_options(doc: str, *, model: str, tol: str) -> argparse.ArgumentParser:
    """The parser of a harness that runs open-unlearning from its checkout with its own Python:
    the model (`model`: what it is) and miniature data it reads, the forget split, --out, the
    checkout and interpreter, the threads of both sides and --tol (`tol`: what it bounds); the
    harness adds its own."""
    parser = argparse.ArgumentParser(description=" ".join(doc.split("\n\n")[0].split()))
    parser.add_argument("--model", type=Path, required=True, help=model)
    parser.add_argument(
        "--data", type=Path, required=True, help="miniature data folder (or its tofu/)"
    )
    parser.add_argument("--split", default="forget10")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ou-root", type=Path, default=Path("/work/ou/src"), help="its checkout")
    parser.add_argument("--ou-python", type=Path, default=Path("/work/ou/venv/bin/python"))
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of both")
    parser.add_argument("--tol", type=float, default=1e-4, help=tol)
    return parser
