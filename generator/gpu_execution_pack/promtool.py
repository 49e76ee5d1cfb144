"""A small wrapper around promtool: find it, read its version, check and test rule files, backfill."""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = (
    "promtool was not found. Install it with Debian's prometheus package "
    "(`sudo apt-get install prometheus`), or download a Prometheus release and put promtool on PATH, "
    "or point PROMTOOL at it."
)


# Go's garbage collector target for promtool (and the servers the tests start: tests/conftest.py), unless the
# environment sets GOGC. At Go's default (100) promtool spends about a fifth of a large suite's CPU collecting the
# garbage every rule evaluation leaves: at 400 the defaults' largest suite took 30 CPU-s against 39 here, holding
# 250 MiB at most against 120.
GO_GC_PERCENT = "400"


def go_env() -> dict[str, str]:
    """The environment to start a Prometheus tool in: ours, with GOGC at GO_GC_PERCENT unless it sets one."""
    return {"GOGC": GO_GC_PERCENT, **os.environ}


class PromtoolError(RuntimeError):
    """promtool is missing, or it reported a failure; the message is promtool's own output."""


@dataclass(frozen=True)
class Result:
    command: tuple[str, ...]
    returncode: int
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def find() -> str:
    """The promtool executable: $PROMTOOL if set, else the first promtool on PATH."""
    path = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if not path or not Path(path).exists():
        raise PromtoolError(INSTALL_HINT)
    return path


def check_rules(files: list[Path]) -> Result:
    """``promtool check rules``; raises PromtoolError with promtool's findings on failure."""
    return _checked("check rules", _run("check", "rules", *map(str, files)))


def test_rules(files: list[Path], jobs: int | None = None) -> Result:
    """``promtool test rules``, one process per suite file, up to ``jobs`` (default: the CPU count) at once.

    One process per file gives each suite its own time limit (one invocation over all of them outgrew
    any single limit on a busy 2-core CI machine) and uses the cores promtool leaves idle. The largest
    files start first: a suite's time grows with its series and steps, so a large one started last would
    run on alone while the other cores idle.
    Raises PromtoolError with the failed files' findings (in the order given), after every file has run.
    """
    largest_first = sorted(files, key=lambda p: -(p.stat().st_size if p.exists() else 0))
    with ThreadPoolExecutor(max_workers=max(1, min(len(files), jobs or os.cpu_count() or 1))) as pool:
        done = dict(zip(largest_first, pool.map(_test_one, largest_first), strict=True))
    results = [done[p] for p in files]
    failed = [r for r in results if not r.ok]
    command = (find(), "test", "rules", *map(str, files))
    output = "\n".join(r.output.strip() for r in failed or results)
    if failed:
        raise PromtoolError(f"promtool test rules failed for {len(failed)} of {len(files)} files:\n{output}")
    return Result(command, 0, output)


def _test_one(path: Path) -> Result:
    try:
        return _checked("test rules", _run("test", "rules", str(path)))
    except PromtoolError as err:  # a failure or the time limit: reported with the other files' findings
        return Result((), -1, f"{path}: {err}")


def run(args: list[str], cwd: Path | None = None) -> Result:
    """Any promtool command (e.g. ``tsdb create-blocks-from``) in ``cwd`` (default: ours); raises PromtoolError
    with its output on failure."""
    return _checked(" ".join(args[:2]), _run(*args, cwd=cwd))


def _run(*args: str, timeout: float = 300, cwd: Path | None = None) -> Result:
    cmd = (find(), *args)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd, env=go_env())
    except subprocess.TimeoutExpired:
        raise PromtoolError(f"`{' '.join(cmd)}` did not finish within {timeout:.0f} s") from None
    return Result(cmd, proc.returncode, proc.stdout + proc.stderr)


def _checked(what: str, result: Result) -> Result:
    if not result.ok:
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        raise PromtoolError(f"promtool {what} failed (exit {result.returncode}):\n" + "\n".join(lines))
    return result
