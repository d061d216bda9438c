"""Methods from outside the package: a `.py` file or an importable module named by `--plugin`
(or `plugins:` in a config), and installed packages that declare the entry-point group
`forgetbench.plugins`. A plugin registers its method with `register_method`, which checks the
method contract at registration, so a broken class fails with one sentence naming its file rather
than minutes later inside the training loop.

Plugins are loaded into the process that reads the config; a study's worker processes are
started with `loaded_plugins()` and load the same ones (study/pool.py), since a spawned process
knows only the built-in methods. The cache key of a plugin method's unlearning run includes a
hash of the file that defines it (`method_source`), so editing the file reruns the method.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import sys
import traceback
import types
import typing
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from forgetbench.errors import ConfigError, ForgetbenchError, PluginError, did_you_mean
from forgetbench.methods.base import INPUT_FIELDS, METHODS

ENTRY_POINT_GROUP = "forgetbench.plugins"
_BUILTIN_PREFIX = "forgetbench.methods."
# Option types a config can give (YAML scalars and lists) and a cache key can hash (JSON).
_OPTION_TYPES = (float, int, bool, str)

# Plugin spec as given -> (the spec as a worker process loads it, methods it registered).
_loaded: dict[str, tuple[str, tuple[str, ...]]] = {}
# Plugin method class -> the hash of its file as it was when the class was registered: the code
# that runs is the code imported, even if the file changes afterwards.
_sources: dict[type, str] = {}
_entry_points_loaded = False


def is_builtin(cls: type) -> bool:
    return cls.__module__.startswith(_BUILTIN_PREFIX)


def plugin_file(cls: type) -> str | None:
    """The file (or module) of a plugin's method class, as a user named it; None for a built-in."""
    return None if is_builtin(cls) else _where(cls)


def _where(cls: type) -> str:
    """The file that defines `cls`, as a user would name it."""
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    return str(file) if file else f"module {cls.__module__}"


def register_method(name: str) -> Callable[[type], type]:
    """`@register_method("my_method")` on a frozen dataclass: the stable way to add a method from
    outside forgetbench. The class must hold `needs` (a frozenset of `UnlearnInputs` field names),
    `required_inputs()` and `loss(inputs) -> (scalar tensor, {part: float})`, and a default for
    every option; its `name` is set to `name` when it has none."""

    def decorator(cls: type) -> type:
        where = _where(cls) if isinstance(cls, type) else "a plugin"
        if isinstance(cls, type) and getattr(cls, "name", None) is None:
            cls.name = name  # type: ignore[attr-defined]
        check_contract(name, cls, where)
        if name in METHODS:
            existing = METHODS.get(name)
            if is_builtin(existing):
                raise ConfigError(
                    f"{where} registers method '{name}', the name of a built-in method",
                    f"give it another name, e.g. 'my_{name}'",
                )
            if _where(existing) != where:
                raise ConfigError(
                    f"{where} registers method '{name}', which {_where(existing)} registered "
                    "already",
                    "give one of them another name",
                )
        # The same file loaded again (a notebook re-running its cell, a script spawning workers)
        # replaces its own registration.
        _sources[cls] = _source_digest(cls)
        return METHODS.register(name, replace=True)(cls)

    return decorator


def check_contract(name: str, cls: Any, where: str) -> None:
    """Raise ConfigError naming `where` and the first way `cls` breaks the method contract."""

    def broken(problem: str, hint: str) -> ConfigError:
        return ConfigError(f"{where}: method '{name}' {problem}", hint)

    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise broken(
            "is not a dataclass", "decorate the class with @dataclass(frozen=True) under it"
        )
    if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise broken(
            "is a dataclass that is not frozen",
            "use @dataclass(frozen=True): a method is a config, hashed into its cache key",
        )
    if getattr(cls, "name", name) != name:
        raise broken(f"has name = {cls.name!r}", f"set name = {name!r} or drop it")
    needs = getattr(cls, "needs", None)
    if not (isinstance(needs, frozenset) and needs and all(isinstance(n, str) for n in needs)):
        raise broken(
            "has no `needs`",
            'declare needs: ClassVar[frozenset[str]] = frozenset({"forget_logps", ...})',
        )
    unknown = sorted(needs - INPUT_FIELDS)
    if unknown:
        raise broken(
            f"needs '{unknown[0]}', which is not an UnlearnInputs field"
            f"{did_you_mean(unknown[0], INPUT_FIELDS)}",
            "name fields of forgetbench.UnlearnInputs (docs/methods.md lists them)",
        )
    for part in ("loss", "required_inputs"):
        if not callable(getattr(cls, part, None)):
            raise broken(f"has no {part}() method", "see the template in docs/methods.md")
    try:
        hints = typing.get_type_hints(cls)
    except Exception as exc:  # an annotation that names something the file never imported
        raise broken(f"has an option type that does not resolve ({exc})", "import it") from None
    for field in dataclasses.fields(cls):
        if not _option_type_ok(hints[field.name]):
            raise broken(
                f"option '{field.name}' has type {hints[field.name]}",
                "options are numbers, booleans, strings, Literal choices or tuples of them "
                "(what a config file or method.OPTION=VALUE can give)",
            )
        missing = dataclasses.MISSING
        if field.default is missing and field.default_factory is missing:
            raise broken(f"option '{field.name}' has no default", "give every option a default")
    try:
        required = cls().required_inputs()
    except ConfigError as exc:
        raise broken(f"rejects its own defaults ({exc.what})", "fix the defaults") from None
    if not (isinstance(required, Iterable) and set(required) <= INPUT_FIELDS):
        raise broken(
            f"has required_inputs() = {required!r}, not a set of UnlearnInputs fields",
            "return a frozenset of UnlearnInputs field names (usually self.needs)",
        )


_T = TypeVar("_T")


def plugin_call(method: Any, part: str, call: Callable[[], _T]) -> _T:
    """`call()`, the plugin method's `part` (its loss, ...) at run time. An exception raised by a
    plugin's code is the plugin's, not forgetbench's: it becomes a PluginError naming the file
    and the method (the training loop adds the step), its traceback kept as the cause."""
    if is_builtin(type(method)):
        return call()
    try:
        return call()
    except ForgetbenchError:  # a sentence already (an option check in the plugin, say)
        raise
    except Exception as exc:
        detail = str(exc).strip().splitlines()
        raised = f"{type(exc).__name__}: {detail[0][:200]}" if detail else type(exc).__name__
        raise broken_plugin(method, f"{part}() raised {raised}") from exc


def broken_plugin(method: Any, problem: str) -> PluginError:
    """The plugin method `method` broke at run time: `problem` says how."""
    return PluginError(
        f"plugin {_where(type(method))}: method '{method.name}'",
        problem,
        "fix the method (--debug shows its traceback); finished stages are kept",
    )


def _option_type_ok(hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in _OPTION_TYPES:
        return True
    if origin is typing.Literal:
        return all(isinstance(a, _OPTION_TYPES) for a in args)
    if origin is tuple:
        return all(a is Ellipsis or _option_type_ok(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return all(a is type(None) or _option_type_ok(a) for a in args)
    return False


def load_plugins(specs: Iterable[str], *, source: str = "--plugin") -> tuple[str, ...]:
    """Import each plugin (a `.py` file or a module name) once per process; returns the names
    of the methods they registered. `source` says where the list came from, for errors."""
    names: list[str] = []
    for spec in specs:
        if spec not in _loaded:
            _loaded[spec] = _load_one(spec, source)
        names += _loaded[spec][1]
    return tuple(names)


def loaded_plugins() -> tuple[str, ...]:
    """The plugins this process loaded, as another process on this machine loads them."""
    return tuple(resolved for resolved, _ in _loaded.values())


def _is_file(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or "\\" in spec


def _load_one(spec: str, source: str) -> tuple[str, tuple[str, ...]]:
    before = set(METHODS.names())
    if _is_file(spec):
        path = Path(spec).expanduser().resolve()
        if not path.is_file():
            raise ConfigError(
                f"plugin file '{spec}' (from {source}) does not exist",
                "give the path of your method's .py file",
            )
        resolved, where = str(path), str(path)
        digest = hashlib.sha256(resolved.encode()).hexdigest()[:8]
        module_name = f"forgetbench_plugin_{_identifier(path.stem)}_{digest}"
        spec_obj = importlib.util.spec_from_file_location(module_name, path)
        assert spec_obj is not None and spec_obj.loader is not None
        module = importlib.util.module_from_spec(spec_obj)
        # In sys.modules while it runs: dataclasses resolve the file's annotations through it,
        # and a worker process unpickles its classes by this name.
        sys.modules[module_name] = module
        try:
            spec_obj.loader.exec_module(module)
        except (Exception, SystemExit) as exc:
            sys.modules.pop(module_name, None)
            raise _import_failure(exc, where) from None
    else:
        resolved, where = spec, f"plugin module '{spec}'"
        try:
            importlib.import_module(spec)
        except ModuleNotFoundError as exc:
            if exc.name and spec.startswith(exc.name):
                raise ConfigError(
                    f"plugin '{spec}' (from {source}) is neither a .py file nor an importable "
                    "module",
                    "give a path ending in .py, or install the package that holds the module",
                ) from None
            raise _import_failure(exc, where) from None
        except (Exception, SystemExit) as exc:
            raise _import_failure(exc, where) from None
        module_name = spec
    added = tuple(n for n in METHODS.in_registration_order() if n not in before)
    own = [n for n in METHODS.names() if METHODS.get(n).__module__.startswith(module_name)]
    if not added and not own:
        raise ConfigError(
            f"{where} registers no method",
            'decorate its method class with @register_method("name") '
            "(from forgetbench import register_method)",
        )
    return resolved, added


def _identifier(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


def _import_failure(exc: BaseException, where: str) -> ConfigError:
    if isinstance(exc, ConfigError):  # our own contract check, which names the file already
        return exc
    line = getattr(exc, "lineno", None) if isinstance(exc, SyntaxError) else None
    if line is None:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == where]
        line = frames[-1].lineno if frames else None
    at = f" (line {line})" if line else ""
    if isinstance(exc, SystemExit):
        # exit 0 with nothing done would read as success
        return ConfigError(
            f"plugin {where} called sys.exit({exc.code!r}) while it was imported{at}",
            "a plugin only defines and registers its methods: remove the exit, or put a "
            'script\'s code under `if __name__ == "__main__":`',
        )
    detail = str(exc).strip().splitlines()
    message = f"{type(exc).__name__}: {detail[0][:200]}" if detail else type(exc).__name__
    return ConfigError(
        f"plugin {where} failed to import{at}: {message}", "fix the file, or drop the plugin"
    )


def load_entry_points() -> tuple[str, ...]:
    """Import every installed package's `forgetbench.plugins` entry point, once per process."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return ()
    _entry_points_loaded = True
    names: list[str] = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        package = entry.dist.name if entry.dist else "an installed package"
        where = f"entry point '{entry.name} = {entry.value}' of {package}"
        before = set(METHODS.names())
        try:
            entry.load()
        except (Exception, SystemExit) as exc:
            _entry_points_loaded = False  # a later call tries again, and says so again
            raise _import_failure(exc, where) from None
        names += [n for n in METHODS.in_registration_order() if n not in before]
    return tuple(names)


def method_source(cls: type) -> str | None:
    """A hash of the source file that defines a plugin method (None for a built-in, whose code
    the forgetbench version already names): the unlearning run's cache key includes it."""
    if is_builtin(cls):
        return None
    return _sources.get(cls) or _source_digest(cls)


def _source_digest(cls: type) -> str:
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    try:
        text = Path(file).read_bytes() if file else inspect.getsource(cls).encode()
    except (OSError, TypeError):
        text = cls.__qualname__.encode()
    return hashlib.sha256(text).hexdigest()[:16]
