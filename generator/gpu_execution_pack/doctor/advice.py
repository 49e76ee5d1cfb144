"""``doctor --write-config``: the config the deployment should have, the user's own keys kept.

Each change comes from a fact of the deployment (what its exporters publish, how its targets are
labelled, how many clusters share the store), never from a guess; the file says what changed and
why, and what a pinned config costs later.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpu_execution_pack.config import Config, ConfigError, cluster_scope, config_from_mapping
from gpu_execution_pack.config.loader import redacted
from gpu_execution_pack.output import to_yaml
from gpu_execution_pack.promql.durations import duration_text, parse_duration_seconds

from .checks import generations_found, hosts_named_at_scrape, slowest_read_target, vendors_found
from .probe import Deployment

# Hosts with this many CPUs make the per-CPU idle rate the served groups' costliest rule (docs/benchmarks.md:
# 128 CPUs, about a third of their time); rating them once a minute costs a quarter of every 15 s.
MANY_CPUS = 64
CPU_RATE_INTERVAL = "1m"
# The rates' windows in scrape intervals: rate() and irate() still find two samples in four intervals with a scrape
# missed, as the default rate_window_fallback (4m) does for Prometheus' default 1m scrape. Where the slowest scrape
# the rules read is faster, a shorter fallback reads fewer samples: at 15 s, 1m (rate_window's own, so each DCGM
# counter's rate is one window, not two), and the host CPU rate reads a quarter of its samples.
RATE_WINDOW_SCRAPES = 4
# make bench at 10,000 GPUs on issue 39's two fleet shapes (docs/benchmarks.md, "Fleet shapes"): the served
# groups' time against the floor's, with the defaults and with the config doctor wrote for that fleet. A test
# holds these figures to the report (tests/test_bench_report.py).
SAVING = (
    "At 10,000 GPUs (make bench, docs/benchmarks.md) the served groups took 3.97x the floor's time with the\n"
    "# defaults and 1.93x with the config doctor wrote, on hosts of 128 CPUs; 4.87x and 4.04x on hosts of 32\n"
    "# CPUs with dcgm-exporter's profiling fields."
)
WARNING = (
    "A pinned config reads only what the fleet had when doctor ran: an exporter of another generation or\n"
    "# vendor added later goes unrecorded, and a scrape slowed past rate_window_fallback leaves rates empty.\n"
    "# Run `gpu-execution-pack doctor -c <this file>` after changing exporters or scrape intervals (and in\n"
    "# CI): its vendors, dcgm generations and scrape intervals checks fail when the fleet no longer matches."
)


# The keys load_config reads from the config file's folder where they are relative (config.relative_to): a
# config written to another folder must name them from there to mean the same files. A test holds this list
# to what load_config resolves.
FOLDER_RELATIVE_KEYS: tuple[str, ...] = (
    "output.rules_dir",
    "output.dashboards_dir",
    "output.docs_dir",
    "api.keys_file",
)


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, key = dotted.split(".")
    for name in parents:
        # A section with only comments under it is null in YAML, and the config accepts it as empty.
        if data.get(name) is None:
            data[name] = {}
        data = data[name]
    data[key] = value


def rebase_paths(data: dict[str, Any], read_from: Path, written_to: Path) -> None:
    """Rewrite in ``data`` each relative path of FOLDER_RELATIVE_KEYS, as read from a config in folder
    ``read_from``, so that a config in folder ``written_to`` names the same file; absolute ones are kept."""
    for dotted in FOLDER_RELATIVE_KEYS:
        *parents, key = dotted.split(".")
        section: Any = data
        for name in parents:
            section = section.get(name) if isinstance(section, dict) else None
        value = section.get(key) if isinstance(section, dict) else None
        # As config.relative_to reads them: an empty value is no path, an absolute one is the same from anywhere.
        if isinstance(value, str) and value and not Path(value).is_absolute():
            section[key] = os.path.relpath(os.path.abspath(read_from / value), os.path.abspath(written_to))


def changes(cfg: Config, d: Deployment, prometheus_url: str | None = None) -> dict[str, tuple[Any, str]]:
    """Each key the deployment's facts call for, with its value (None: said, not written) and why;
    ``prometheus_url`` is the one doctor read (--prometheus), which the config needs for `doctor -c` (and
    everything else) to read the same one."""
    out: dict[str, tuple[Any, str]] = {}
    if prometheus_url and prometheus_url.rstrip("/") != cfg.api.prometheus_url.rstrip("/"):
        if redacted(prometheus_url) == prometheus_url:
            out["api.prometheus_url"] = (prometheus_url, "the Prometheus doctor read (--prometheus)")
        else:  # a password given on the command line is not written into a file: the user decides where it goes
            out["api.prometheus_url"] = (
                None,
                f"unchanged: the Prometheus doctor read ({redacted(prometheus_url)}) carries a password, "
                "not written here",
            )
    vendors = vendors_found(cfg, d)
    if vendors and vendors != cfg.vendors:
        out["vendors"] = (list(vendors), "the GPU exporters found")
    generations = generations_found(d.metric_names)
    if "nvidia" in vendors and generations != cfg.dcgm.generations:
        out["dcgm.generations"] = (list(generations), "the dcgm-exporter metric names found")
    if hosts_named_at_scrape(d) and not cfg.node.at_scrape:
        out["node.host_identity"] = ("scrape", "every target carries the target label hostname")
    if d.max_cpus_per_host >= MANY_CPUS and not cfg.node.cpu_rate_interval:
        out["node.cpu_rate_interval"] = (CPU_RATE_INTERVAL, f"hosts of up to {d.max_cpus_per_host} CPUs")
    if (slowest := slowest_read_target(d)) is not None:
        scrape = slowest.interval_seconds
        fallback = max(parse_duration_seconds(cfg.rate_window), RATE_WINDOW_SCRAPES * scrape)
        if fallback != parse_duration_seconds(cfg.rate_window_fallback):
            out["rate_window_fallback"] = (
                duration_text(fallback),
                f"the slowest scrape the rules read is every {duration_text(scrape)} ({slowest.job})",
            )
    several = sorted(label for label, values in d.cluster_values.items() if len(values) > 1)
    if several and not cluster_scope(cfg).enabled:
        out["cluster_label"] = (several[0], f"{len(d.cluster_values[several[0]])} clusters in one store")
    return out


def suggested_config(
    user: Any,
    cfg: Config,
    d: Deployment,
    *,
    read_from: Path | None = None,
    written_to: Path | None = None,
    fails: int = 0,
    prometheus_url: str | None = None,
) -> str:
    """The YAML of ``user``'s config (its keys kept) with the deployment's facts set, checked by loading it.

    ``read_from`` and ``written_to`` are the folders of the user's config and of the file written, when both
    are known: its relative paths are rewritten to name the same files from there. ``fails`` is how many of
    the checklist's checks failed, so that a file that changes nothing does not read as the fleet fitting.
    """
    if user is None:  # an empty file
        user = {}
    if not isinstance(user, Mapping):  # load_config refuses this first; never a traceback all the same
        raise ConfigError(f"top level: expected a mapping of keys, got {type(user).__name__}")
    data = copy.deepcopy(dict(user))
    if read_from is not None and written_to is not None:
        rebase_paths(data, read_from, written_to)
    advised = changes(cfg, d, prometheus_url)
    for key, (value, reason) in list(advised.items()):
        if value is None:
            continue
        before = copy.deepcopy(data)
        _set(data, key, value)
        try:
            # Each change checked as it is made: a fact past what the config accepts (a scrape every 1000y asks
            # for a 4000y window) leaves its key out, said in the file, rather than write a config load refuses.
            config_from_mapping(data, "the suggested config")
        except ConfigError as err:
            data = before
            refused = str(err).removeprefix("the suggested config: ")
            advised[key] = (None, f"not written, the config would refuse {value!r} ({refused}); {reason}")
    config_from_mapping(data, "the suggested config")  # a ConfigError here is a bug of ours, not the user's
    why = "\n".join(f"#   {key}: {reason}" for key, (_, reason) in advised.items())
    if not why:  # say only what is known: the facts doctor reads ask for nothing, the checklist may still fail
        why = "#   nothing the deployment's facts call for" + (
            f"; the checklist's {fails} fail{'s' if fails > 1 else ''} need{'' if fails > 1 else 's'} changes "
            "this file does not make (see the fixes it prints)"
            if fails
            else ""
        )
    return (
        f"# Written by gpu-execution-pack doctor from the live deployment. Changed:\n{why}\n# {SAVING}\n# {WARNING}\n"
        + (to_yaml(data) if data else "{}\n")
    )
