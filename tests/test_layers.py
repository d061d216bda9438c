"""The package's layers point down: `study/` (what a command runs on) uses `train/` and `eval/`,
which never reach back up, and the engine knows methods only through their contract, so a new
method is one file under `methods/` (plus its tests). Every import, at the top of a module or
inside a function, counts: an import moved into a function still ties the two modules together."""

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


# The layers, lowest first: a module may import its own part of the package and any part on a lower
# layer, never one on its own layer or above. A new top-level module or package has to be placed
# here, which is the point: where it sits is a decision, not an accident of who imported it first.
LAYERS = (
    ("forgetbench", "errors"),
    ("io", "registry", "records", "device_names", "tokenized"),
    # torch placement and profiles; the typed config reads only device_names
    ("device", "profiling"),
    ("methods", "metrics", "data", "attacks", "results", "cache", "intervals", "overunlearning"),
    # The config layer, lowest first: the names a config accepts (method names checked against
    # the method registry), one model's run's sections, the study's sections, then `RunConfig`
    # and how a config is loaded.
    ("config_names",),
    ("config_sections",),
    ("config_study",),
    ("config",),
    ("benchmarks",),  # the miniature: world generation and its `Scale` records
    ("modeling", "rows"),
    ("lume_gate",),  # whether LUME's final score measures anything in a study's rows
    # the gates over rows that decide whether a study may rank methods; MUSE's and WMDP's
    # criteria; the probes' gap closed
    ("validity", "criteria", "generalisation"),
    ("train", "eval"),
    ("study", "report"),  # neither imports the other: a command composes the two
    ("options",),  # the flags, generated from the typed config
    ("cli", "api"),  # the command line and the Python API: two faces of the study layer
    ("callbacks",),  # evaluation inside a Trainer run, through the Python API
)
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, anywhere in its body, relative imports resolved
    and `from package import module` read as importing the module."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            found |= {m for t in targets if t.startswith("forgetbench") and (m := known(t))}
        graph[name] = found - {name}
    return graph


def _part(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def _loops(graph: dict[str, set[str]]) -> list[str]:
    loops, state = [], {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                loops.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return loops


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if _part(module) != _part(target)
        and RANK.get(_part(target), -1) >= RANK.get(_part(module), len(LAYERS))
    ]


def test_the_import_graph_has_no_loops():
    graph = _import_graph()
    assert len(graph) > 100  # the walk found the package, not an empty folder
    assert _loops(graph) == []


def test_every_part_of_the_package_has_a_layer():
    parts = {_part(m) for m in _import_graph()}
    assert sorted(parts - set(RANK)) == [], "place the new part in LAYERS"


def test_no_import_points_up_or_sideways():
    assert _upward(_import_graph()) == []


def test_a_loop_and_an_upward_arrow_are_caught(tmp_path, monkeypatch):
    # The checks above pass on the package; this shows they fail on one that breaks them, with a
    # function-level relative import in the loop.
    fake = tmp_path / "forgetbench"
    (fake / "study").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "errors.py").write_text("from forgetbench.study import run\n")
    (fake / "study" / "__init__.py").write_text("")
    (fake / "study" / "run.py").write_text("def f():\n    from . import sweep\n")
    (fake / "study" / "sweep.py").write_text("from forgetbench.study.run import f\n")
    monkeypatch.setattr(f"{__name__}.PACKAGE", fake)
    graph = _import_graph()
    assert graph["forgetbench.errors"] == {"forgetbench.study", "forgetbench.study.run"}
    assert graph["forgetbench.study.run"] == {"forgetbench.study", "forgetbench.study.sweep"}
    assert _loops(graph) == [
        "forgetbench.study.run -> forgetbench.study.sweep -> forgetbench.study.run"
    ]
    assert _upward(graph) == [
        "forgetbench.errors -> forgetbench.study",
        "forgetbench.errors -> forgetbench.study.run",
    ]


def test_test_modules_have_unique_basenames():
    # pytest imports test modules by basename (no packages under tests/): two files of one name
    # stop the whole suite at collection.
    from collections import Counter

    names = Counter(p.name for p in Path(__file__).parent.rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []


# A source file past LONG_LINES holds more than one idea, or says in its module docstring why it
# does not: a line of the docstring starts with LONG_REASON ("Longer than 400 lines: one table of
# ..."), so the reason is read where the file is opened, not in a list here.
LONG_LINES = 400
LONG_REASON = "Longer than 400 lines:"


def _line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


def _says_why_long(path: Path) -> bool:
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    return any(line.strip().startswith(LONG_REASON) for line in docstring.splitlines())


def _long_without_reason(package: Path) -> list[str]:
    return sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if _line_count(path) > LONG_LINES and not _says_why_long(path)
    )


def test_no_source_file_passes_400_lines_without_saying_why():
    assert _long_without_reason(PACKAGE) == []


def test_a_long_file_is_caught_unless_its_docstring_says_why(tmp_path):
    body = "x = 1\n" * LONG_LINES
    (tmp_path / "short.py").write_text('"""One idea."""\n' + "x = 1\n" * (LONG_LINES - 1))
    (tmp_path / "long.py").write_text('"""Two ideas."""\n' + body)
    (tmp_path / "reasoned.py").write_text(
        f'"""A table.\n\n{LONG_REASON} one table of facts, read row by row."""\n' + body
    )
    assert _long_without_reason(tmp_path) == ["long.py"]


# Packages whose docstring need not name each module, and why: the rest name every module and
# subpackage they hold, so a new one is described where a reader of the folder starts.
UNNAMED_MODULES = {
    "forgetbench": "the root's docstring is the public API; docs/development.md maps the package",
    "forgetbench.study": "docs/development.md names each of its modules",
    "forgetbench.methods": "one file per registered method, found by the registry",
    "forgetbench.eval.tasks": "one file per registered evaluation task",
}


def _unnamed_members(init: Path) -> list[str]:
    import re

    docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
    folder = init.parent
    members = [p.stem for p in folder.glob("*.py") if not p.stem.startswith("__")]
    members += [p.parent.name for p in folder.glob("*/__init__.py")]
    return sorted(
        m
        for m in members
        if not re.search(rf"(?<![\w/]){re.escape(m.lstrip('_'))}\b", docstring, re.IGNORECASE)
    )


def test_every_package_docstring_names_what_its_folder_holds():
    unnamed = {
        _module_name(init): missing
        for init in PACKAGE.rglob("__init__.py")
        if _module_name(init) not in UNNAMED_MODULES and (missing := _unnamed_members(init))
    }
    assert unnamed == {}, "say what these modules are in their package's docstring"


def test_docs_development_names_every_module_of_the_study_layer():
    # The study layer's map is docs/development.md (UNNAMED_MODULES), so it is held to it.
    text = (Path(__file__).parents[1] / "docs" / "development.md").read_text()
    modules = sorted(p.name for p in (PACKAGE / "study").glob("*.py") if p.stem != "__init__")
    assert [m for m in modules if f"`{m}`" not in text] == []


def test_the_benchmarks_docstring_names_every_miniature_the_generator_writes():
    # A miniature is a top-level folder of the generated benchmark (tofu/, formats/, lume/, muse/,
    # wmdp/): a new one is named where a reader of benchmarks/ starts.
    import re

    import forgetbench.benchmarks
    from forgetbench.benchmarks.mini.generate import RELEASED_FOLDERS, build_files

    folders = {path.split("/")[0] for path in build_files(scale="tiny", seed=0) if "/" in path}
    folders |= {folder.split("/")[0] for folder in RELEASED_FOLDERS.values()}
    docstring = forgetbench.benchmarks.__doc__ or ""
    assert {"tofu", "lume", "muse", "wmdp"} <= folders
    unnamed = [f for f in sorted(folders) if not re.search(rf"\b{f}\b", docstring, re.IGNORECASE)]
    assert unnamed == [], "say what these miniatures are in benchmarks/__init__.py"
