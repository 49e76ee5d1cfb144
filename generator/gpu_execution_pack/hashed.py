"""Frozen dataclasses that are hashed once: ``hashed_once``."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

Frozen = TypeVar("Frozen", bound=type)


def hashed_once(cls: Frozen) -> Frozen:
    """A frozen dataclass whose hash is computed once per object, not field by field at every lookup.

    The scenario oracle's caches and truths are keyed by whole scenarios, executions, GPUs and recorded
    series, whose generated hash walks every host, execution and formula tree again: building the promtool
    suites made 36 million hash calls, half of their time. Equality stays the dataclass' own. The cached hash
    is left out of a pickle, because a string's hash differs from process to process.
    """
    if not is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"hashed_once needs a frozen dataclass, not {cls.__name__}")
    names = tuple(f.name for f in fields(cls))

    def __hash__(self: Any) -> int:
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = self.__dict__["_hash"] = hash(tuple(getattr(self, n) for n in names))
        return cached

    def __getstate__(self: Any) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    cls.__hash__ = __hash__  # type: ignore[assignment]
    cls.__getstate__ = __getstate__  # type: ignore[attr-defined]
    return cls
