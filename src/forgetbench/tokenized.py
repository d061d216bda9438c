"""Tokenisations remembered across evaluations: the ids a tokenizer gives one text, kept per
process and keyed by what the tokenizer is (its whole serialised state), not by the object.

A study evaluates dozens of models (snapshots, references, shadows, attacked copies) on the same
questions, and each loads its own tokenizer object from identical files: tokenising every
(prompt, answer) pair again cost about a tenth of an evaluation's CPU at the tiny scale. The ids
are the tokenizer's own output, so the numbers cannot move; a tokenizer whose state differs in
anything (vocabulary, added or special tokens, normaliser, post-processor) has another key.
Tokenizers without a serialisable backend (slow, Python ones) are not remembered."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable
from typing import Any

# Entries (the text and 8 bytes a token, about 1 kB for a TOFU answer): a whole TOFU evaluation
# is about 15,000, so this holds several benchmarks' and bounds a long-lived process (a sweep) to
# about 100 MB. Emptied, not evicted, when full.
_LIMIT = 100_000
_remembered: dict[tuple[Any, ...], Any] = {}
# Per tokenizer object: (its mutable settings when keyed, its key). The settings are checked on
# every use, so a token added or a special token changed after keying gives a new key.
_keys: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], str]] = weakref.WeakKeyDictionary()


def _settings(tokenizer: Any) -> tuple[Any, ...]:
    return (
        len(tokenizer),
        tokenizer.bos_token,
        tokenizer.eos_token,
        tokenizer.pad_token,
        getattr(tokenizer, "split_special_tokens", None),
        getattr(tokenizer, "add_bos_token", None),
        getattr(tokenizer, "add_eos_token", None),
    )


def tokenizer_key(tokenizer: Any) -> str | None:
    """What the tokenizer is, as a digest of its class and serialised state; None when it cannot
    be serialised (then nothing is remembered for it)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    try:
        settings = _settings(tokenizer)
        known = _keys.get(tokenizer)
    except (AttributeError, TypeError):
        return None
    if known is not None and known[0] == settings:
        return known[1]
    state = f"{type(tokenizer).__qualname__}\n{settings!r}\n{backend.to_str()}"
    key = hashlib.sha256(state.encode()).hexdigest()
    _keys[tokenizer] = (settings, key)
    return key


def remembered(
    tokenizer: Any, kind: str, texts: tuple[str, ...], compute: Callable[[], Any]
) -> Any:
    """`compute()`'s result for these texts and this tokenizer, computed once per process.
    Callers share the result: they must not change it."""
    key = tokenizer_key(tokenizer)
    if key is None:
        return compute()
    entry = (key, kind, *texts)
    found = _remembered.get(entry)
    if found is None:
        found = compute()
        if len(_remembered) >= _LIMIT:
            _remembered.clear()
        _remembered[entry] = found
    return found
