"""Name -> factory registries (methods today; data sources, metrics and benchmarks can reuse it).

A registry holds classes or factory functions, never live instances: every `get` hands back
something the caller constructs afresh, so no run can leak state into the next (the trap of
registries that cache configured objects). Names are snake_case so they read the same in YAML,
on the command line and in result keys.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from forgetbench.errors import UnknownNameError

T = TypeVar("T", bound=Callable[..., object])

_SNAKE_CASE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")


class Registry(Generic[T]):
    """`@REG.register("name")` on a class or factory; `REG.get("name")` returns it.

    `kind` names what is registered ("method", "metric", ...) so a miss reads
    `unknown method 'nop'; did you mean 'npo'? — known: dpo, grad_ascent, ...`.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        """Decorator. Registering twice under one name is a programming error, not an override:
        silently replacing a method would make results depend on import order. `replace`: the
        caller has checked that the new entry is the same one loaded again (a plugin file)."""
        if not _SNAKE_CASE.fullmatch(name):
            raise ValueError(f"{self.kind} name '{name}' must be snake_case, e.g. 'grad_ascent'")

        def decorator(factory: T) -> T:
            if not callable(factory):
                raise TypeError(
                    f"{self.kind} '{name}': register a class or factory, not an instance of "
                    f"{type(factory).__name__}"
                )
            if name in self._entries and self._entries[name] is not factory and not replace:
                raise ValueError(f"{self.kind} '{name}' is already registered")
            self._entries[name] = factory
            return factory

        return decorator

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._entries) from None

    def names(self) -> tuple[str, ...]:
        """Registered names, sorted, so listings and error messages are stable."""
        return tuple(sorted(self._entries))

    def in_registration_order(self) -> tuple[str, ...]:
        """Registered names in the order they were registered: a package that registers its
        modules on import fixes an order (e.g. the study's rows) without a second list."""
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self.names())})"
