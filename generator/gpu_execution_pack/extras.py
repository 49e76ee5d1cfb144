"""The pack's optional extras (pyproject.toml): what each command needs beyond generating, and the error naming it.

An ops repo installs the pack from a pinned source without extras by default; its `report`, `doctor` or `query`
must then say which extra to add and how, not fail on an import deep inside.
"""

from __future__ import annotations

import importlib.util

# The modules each extra brings that the commands import (pyproject.toml's optional-dependencies).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "api": ("httpx", "starlette", "orjson", "uvicorn"),
    "archive": ("sqlalchemy",),
}


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` this Python cannot import."""
    return [module for module in EXTRA_MODULES[extra] if importlib.util.find_spec(module) is None]


def extra_hint(extra: str, command: str) -> str | None:
    """Where ``extra`` is not installed, the error for ``command``: what is missing and how to install it;
    else None."""
    missing = missing_modules(extra)
    if not missing:
        return None
    return (
        f"gpu-execution-pack {command} needs the pack's {extra} extra ({', '.join(missing)} not installed): install "
        f"the pack with it, from where you install the pack: 'gpu-execution-pack[{extra}] @ git+https://...@<tag>', "
        f"'<the wheel file>[{extra}]', or in a checkout pip install '.[{extra}]'"
    )
