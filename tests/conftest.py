"""Shared fixtures: the repository root, and the pack generated into a scratch directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands resolve rules/ and docs/ against the repository, wherever pytest is started."""
    monkeypatch.chdir(REPO)


@pytest.fixture
def promtool_available() -> None:
    from generator import promtool

    promtool.find()  # raises with the install hint rather than skipping: CI must have it


def env_without_promtool() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = "/nonexistent"
    env.pop("PROMTOOL", None)
    return env
