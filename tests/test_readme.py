"""README.md's reference tables say what the code has: every rule file's groups and every alert, no more and
no fewer, and every make target and subcommand. They are written by hand (each row says what a group, alert
or command is for), so this test is what keeps them from going stale when one is added. Its first screen is
the pitch, the picture and the quick start."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import yaml
from gpu_execution_pack import cli
from gpu_execution_pack.build import rule_outputs
from gpu_execution_pack.config import Config

README = Path(__file__).resolve().parent.parent / "README.md"
# A table row whose first cells are code spans: | `a` | `b` | ... or | `a` | ...
ROW = re.compile(r"^\| `([^`]+)` \|(?: `([^`]+)` \|)?", re.MULTILINE)


def table_after(heading_row: str) -> list[tuple[str, str]]:
    """The code-span cells of the table whose header row is ``heading_row``, up to its first blank line."""
    text = README.read_text()
    start = text.index(heading_row)
    table = text[start : text.find("\n\n", start)]
    return [(m.group(1), m.group(2) or "") for m in ROW.finditer(table)]


def generated_rule_files() -> dict[str, dict]:
    """The default config's rule files (``*.rules.yml``), parsed, by file name."""
    return {
        path.name: yaml.safe_load(text)
        for path, text in rule_outputs(Config()).items()
        if path.name.endswith(".rules.yml") and path.parent == Path(Config().output.rules_dir)
    }


def test_the_file_table_lists_every_group_of_every_rule_file_in_order():
    generated = [
        (name, group["name"]) for name, rules in sorted(generated_rule_files().items()) for group in rules["groups"]
    ]
    listed = table_after("| file | group | series |")
    assert sorted(listed) == sorted(generated)
    assert len(listed) == len(set(listed))


def test_the_alert_table_lists_every_alert_the_default_config_generates():
    alerts = {
        rule["alert"]
        for rules in generated_rule_files().values()
        for group in rules["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    listed = [name for name, _ in table_after("| alert | fires when |")]
    assert sorted(listed) == sorted(alerts)


def first_screen() -> str:
    """The README up to the end of its quick start's command block."""
    text = README.read_text()
    quick = text.index("\n## Quick start\n")
    return text[: text.index("```\n", text.index("```", quick) + 3) + 4]


def test_the_first_screen_is_the_pitch_the_picture_and_the_quick_start():
    screen = first_screen()
    assert screen.count("\n") <= 30, "the pitch, the picture and the quick start no longer fit a screen"
    title, pitch = screen.split("\n\n", 2)[:2]
    assert title == "# gpu-execution-pack"
    # The pitch says what it answers, per execution, before anything about installing.
    assert "Per-execution answers" in pitch and "GPUs it was billed for" in pitch and "out of memory" in pitch
    assert not re.search(r"apt-get|unstable|Debian|pip install", screen)
    [picture] = re.findall(r"^!\[[^\]]+\]\(([^)]+)\)$", screen, re.MULTILINE)
    assert screen.index(picture) < screen.index("## Quick start")
    assert (README.parent / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    block = screen[screen.index("```sh\n") + 6 : -4]
    assert [line.split("#")[0].strip() for line in block.splitlines()] == ["make", "make demo", "make test"]


def commands_named() -> tuple[set[str], set[str]]:
    """The Makefile targets and the CLI's subcommands the Commands table's first column names."""
    make: set[str] = set()
    cli: set[str] = set()
    text = README.read_text()
    start = text.index("| command | what it does |")
    for row in text[start : text.find("\n\n", start)].splitlines()[2:]:
        cell = row.split(" | ")[0]
        spans = re.findall(r"`([^`]+)`", cell)
        named = make
        for span in spans:  # `make x` / `y`: y is a target too; `gpu-execution-pack x` / `y`: y a subcommand
            if span.startswith(("make", "gpu-execution-pack")):
                named = make if span.startswith("make") else cli
            words = span.removeprefix("make").removeprefix("gpu-execution-pack").split()
            named.add(words[0] if words else "all")  # a bare `make` is its default target
    return make, cli


def test_the_commands_table_names_every_make_target_and_every_subcommand():
    makefile = (README.parent / "Makefile").read_text()
    [phony] = re.findall(r"^\.PHONY: (.+)$", makefile, re.MULTILINE)
    subcommands = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    make, named_cli = commands_named()
    assert set(phony.split()) - make == set()
    assert set(subcommands) - named_cli == set()


def test_the_ops_repo_steps_name_the_paths_read_from_the_config_s_folder():
    """README said every relative path in the config is read from its folder; archive.url is read from the folder
    each command runs in (docs/configuration.md), so a user's archive landed elsewhere than the README said. The
    sentence names the keys ``relative_to`` reads from the config's folder, and archive.url apart."""
    from gpu_execution_pack.config import relative_to

    text = " ".join(README.read_text().split())
    start = text.index("Relative paths in it")
    sentence = text[start : text.index(" 3. ", start)]  # to the next step
    claimed, _, exception = sentence.partition("archive.url")
    named = set(re.findall(r"`([a-z_.*]+)`", claimed))
    sections = {"output": "rules_dir", "api": "keys_file", "archive": "url"}
    cfg = Config()
    cfg = dataclasses.replace(
        cfg,
        output=dataclasses.replace(cfg.output, rules_dir="r", dashboards_dir="d", docs_dir="o"),
        api=dataclasses.replace(cfg.api, keys_file="k"),
        archive=dataclasses.replace(cfg.archive, url="a.sqlite"),
    )
    moved = relative_to(cfg, Path("/elsewhere"))
    resolved = {
        f"{section}.{f.name}"
        for section in sections
        for f in dataclasses.fields(getattr(cfg, section))
        if getattr(getattr(moved, section), f.name) != getattr(getattr(cfg, section), f.name)
    }
    covered = {key for key in resolved if key in named or f"{key.split('.')[0]}.*" in named}
    assert covered == resolved and resolved, (sentence, resolved)
    assert "archive.url" not in resolved and exception, sentence


def test_the_commands_table_says_what_make_docs_writes_with_and_without_a_config():
    """The row said ``make docs [CONFIG=pack.yml]`` writes the four docs; with a config it writes the runbook and
    the report's reference only (the configuration and series references are the pack's own)."""
    from gpu_execution_pack.build import docs_outputs

    row = next(line for line in README.read_text().splitlines() if line.startswith("| `make docs"))
    with_config, _, without = row.partition("without")
    named = set(re.findall(r"`docs/([a-z]+\.md)`", with_config))
    assert named == {p.name for p in docs_outputs(Config(), "pack.yml")}, row
    extra = {p.name for p in docs_outputs(Config())} - named
    assert extra and extra == set(re.findall(r"`docs/([a-z]+\.md)`", without)), row
