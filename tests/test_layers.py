"""The package's layers point down: `study/` (what a command runs on) uses `train/` and `eval/`,
which never reach back up, and the engine knows methods only through their contract, so a new
method is one file under `methods/` (plus its tests)."""

import ast
from pathlib import Path

import pytest

import forgetbench
from forgetbench.methods.base import METHODS, method_names

PACKAGE = Path(forgetbench.__file__).parent


def _modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


@pytest.mark.parametrize("folder", ["train", "eval", "methods", "metrics", "data"])
def test_lower_layers_never_import_the_study_layer_or_the_cli(folder):
    for path in _modules(folder):
        upward = {
            name
            for name in _imports(path)
            if name.startswith(("forgetbench.study", "forgetbench.cli", "forgetbench.report"))
        }
        assert not upward, f"{path.relative_to(PACKAGE)} imports {sorted(upward)}"


def test_training_never_imports_evaluation():
    for path in _modules("train"):
        evaluation = {name for name in _imports(path) if name.startswith("forgetbench.eval")}
        assert not evaluation, f"{path.relative_to(PACKAGE)} imports {sorted(evaluation)}"


@pytest.mark.parametrize("folder", ["train", "eval"])
def test_the_engine_and_the_evaluation_name_no_method(folder):
    names = set(method_names())
    modules = {f"forgetbench.methods.{METHODS.get(n).__module__.rsplit('.', 1)[-1]}" for n in names}
    for path in _modules(folder):
        tree = ast.parse(path.read_text())
        named = {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        } & names
        imported = {m for m in _imports(path) if m.rsplit(".", 1)[0] in modules or m in modules}
        where = path.relative_to(PACKAGE)
        assert not named, f"{where} names method(s) {sorted(named)}: use the method contract"
        assert not imported, f"{where} imports method module(s) {sorted(imported)}"


def test_test_modules_have_unique_basenames():
    # pytest imports test modules by basename (no packages under tests/): two files of one name
    # stop the whole suite at collection.
    from collections import Counter

    names = Counter(p.name for p in Path(__file__).parent.rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []
