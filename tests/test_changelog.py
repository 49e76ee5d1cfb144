"""CHANGELOG.md is the upgrade guide: each release's upgrade paragraph says what an ops repo runs after moving its
pin, and README.md's ops-repo steps say how to upgrade. Those steps are checked against what they do: the example
ops repo's Makefile run by the real `make` (dry run), so a step that leaves generated files stale (`make dashboards`
regenerated no rule file, though every release's rules changed) cannot be given again."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import REPO
from .test_ops_repo import EXAMPLE

CHANGELOG = REPO / "CHANGELOG.md"
README = REPO / "README.md"
# The step an upgrade paragraph gives: `make [targets]` in your ops repo.
OPS_REPO_STEP = re.compile(r"`make((?: [^`]+)?)` in your ops repo")
# What an ops repo's generated files come from: every subcommand that writes some of them.
WRITERS = {"generate", "dashboards", "docs"}


def upgrade_paragraphs() -> dict[str, str]:
    """Each release's paragraph saying what to regenerate after upgrading, by the release's heading, joined into one
    line."""
    found = {}
    for section in re.split(r"^## ", CHANGELOG.read_text(), flags=re.MULTILINE)[1:]:
        heading, _, body = section.partition("\n")
        paragraph = next((p for p in body.split("\n\n") if p.lstrip().startswith("Regenerate after upgrading")), None)
        if paragraph is not None:
            found[heading] = " ".join(paragraph.split())
    return found


def subcommands_run(ops: Path, targets: list[str]) -> set[str]:
    """The pack's subcommands that ``make targets`` runs in the ops repo ``ops``, as `make -n` prints them (a pinned
    PACK, so the Makefile's recipes print instead of its placeholder's error)."""
    done = subprocess.run(
        ["make", "-n", "-C", str(ops), *targets, "PACK=gpu-execution-pack[api] @ file:///pinned"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(re.findall(r"/gpu-execution-pack (\w+) ", done.stdout))


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("changelog") / "ops-repo"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns(".venv", "build"))
    return copy


def test_releases_have_upgrade_paragraphs():
    # The three releases since the ops repo's Makefile: the paragraph the tests below read is there to read.
    assert {"0.4.0", "0.3.1", "0.3.0"} <= {heading.split()[0] for heading in upgrade_paragraphs()}


@pytest.mark.parametrize("release", sorted(upgrade_paragraphs()))
def test_the_upgrade_step_regenerates_every_file_the_ops_repo_commits(release: str, ops: Path):
    paragraph = upgrade_paragraphs()[release]
    steps = OPS_REPO_STEP.findall(paragraph)
    assert steps, f"{release}: names no `make ...` to run in the ops repo: {paragraph}"
    for targets in steps:
        ran = subcommands_run(ops, targets.split())
        assert ran >= WRITERS, f"{release}: `make{targets}` runs {sorted(ran)}, not {sorted(WRITERS - ran)}"


@pytest.mark.parametrize("release", sorted(upgrade_paragraphs()))
def test_the_upgrade_paragraph_says_to_restart_what_runs_the_pack(release: str):
    """Regenerating changes the files; `serve` and the archiver keep running the old release's code (its report,
    billing and records) until restarted on the new one."""
    paragraph = upgrade_paragraphs()[release]
    assert "`serve`" in paragraph and "archiver" in paragraph and "restart" in paragraph.lower(), paragraph


def readme_upgrade_step() -> str:
    """README's ops-repo step on upgrading (the numbered step that starts "To upgrade"), joined into one line."""
    found = re.search(r"^\d+\. To upgrade.*?(?=^\d+\. |^#|\Z)", README.read_text(), re.MULTILINE | re.DOTALL)
    assert found, "README's ops-repo steps say nothing of upgrading"
    return " ".join(found.group(0).split())


def test_the_readme_says_how_to_upgrade_an_ops_repo(ops: Path):
    step = readme_upgrade_step()
    assert "CHANGELOG.md" in step, step
    steps = OPS_REPO_STEP.findall(step)
    assert steps and all(subcommands_run(ops, targets.split()) >= WRITERS for targets in steps), step
    assert "`serve`" in step and "archiver" in step and "restart" in step and "`doctor`" in step, step
