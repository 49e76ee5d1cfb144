"""The ``gpu-execution-pack`` command: generate, check, test and document the rule pack."""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from gpu_execution_pack import __version__, build, extras, promtool, testsuites
from gpu_execution_pack.config import Config, ConfigError, load_config, load_config_document
from gpu_execution_pack.config.loader import MAX_DURATION_SECONDS
from gpu_execution_pack.docs.configuration import defaults_yaml
from gpu_execution_pack.output import KUBERNETES_DIR, config_as_named, stale_files, write_all
from gpu_execution_pack.rules.files import RULE_FILE_SUFFIX, rule_files

DEFAULT_BUILD_DIR = Path("build/promtool")
DEFAULT_RULES_DIR = Path("rules")  # the checkout's, where `test` runs from it
# As the endpoint's tenant parameter with a key to every tenant: one id two tenants hold is theirs to tell apart.
# An empty tenant is the GPUs without the label, as a PromQL matcher `label=""` selects them: an id that a tenant and
# unlabelled GPUs (bare metal beside Kubernetes) both hold is two executions, and the 409 names both.
TENANT_HELP = (
    "the tenant (api.tenant_label's value) whose execution it is, where several hold the id ('': the GPUs without "
    "the label)"
)
CLUSTER_HELP = (
    "the cluster (value of cluster_label) that holds the execution; needed only when several clusters hold its id"
)


def written(files: dict[Path, str], source: str, shown: str | None = None, **options: Any) -> list[Path]:
    """``write_all(files, **options)``, a failure to write named by the option or key that chose the place
    (``source``) and the path (``shown``, as the user gave it, else the one that failed)."""
    try:
        return write_all(files, **options)
    except OSError as err:
        where = shown or err.filename or "there"
        raise ConfigError(f"{source}: cannot write {where}: {err.strerror or err}") from None


def folder_on_the_way(folder: Path, source: str) -> None:
    """Refuse ``folder`` before any work where a file stands in its place or on its way (the suites take
    seconds to build); what else stops the writing is named when it happens, by ``written``."""
    for place in (folder, *folder.parents):
        if place.exists():
            if not place.is_dir():
                raise ConfigError(f"{source}: cannot write {folder}: {os.strerror(errno.ENOTDIR)}")
            return


def output_source(args: argparse.Namespace, output_key: str) -> str:
    """What chose an output folder: --output-dir where given, else the config key."""
    return "--output-dir" if getattr(args, "output_dir", None) else f"output.{output_key}"


# The files in an output folder the pack owns, by glob: one of them it no longer writes is named (``no_more``). The
# PrometheusRules' folder too: a user applies it whole, so a file the pack wrote there before (the archiver's
# Deployment, before it moved to archive/) would be deployed on.
RULE_PATTERNS = (f"*{RULE_FILE_SUFFIX}", f"{KUBERNETES_DIR}/*.yaml")
DASHBOARD_PATTERNS = ("*.json",)


def no_more(files: dict[Path, str], directory: Path, patterns: tuple[str, ...]) -> None:
    """A note on standard error for each file in ``directory`` matching ``patterns`` that ``files`` leaves out."""
    for pattern in patterns:
        for old in stale_files(files, directory, pattern):
            print(f"note: {old} is not generated any more; remove it if nothing else writes it", file=sys.stderr)


def _write(files: dict[Path, str], directory: Path, patterns: tuple[str, ...], source: str) -> int:
    changed = written(files, source)
    no_more(files, directory, patterns)
    print(f"generated {len(files)} files in {directory}/ ({len(changed)} changed)")
    return 0


def config_for(args: argparse.Namespace, output_key: str = "") -> Config:
    """The config ``--config`` names (or the defaults), with ``--output-dir`` replacing ``output.<output_key>``."""
    cfg = load_config(args.config)
    if output_key and getattr(args, "output_dir", None):
        cfg = dataclasses.replace(cfg, output=dataclasses.replace(cfg.output, **{output_key: args.output_dir}))
    return cfg


def cmd_generate(args: argparse.Namespace) -> int:
    cfg = config_for(args, "rules_dir")
    files = build.rule_outputs(cfg, args.config) | build.archive_outputs(cfg, args.config)
    return _write(files, Path(cfg.output.rules_dir), RULE_PATTERNS, output_source(args, "rules_dir"))


def cmd_dashboards(args: argparse.Namespace) -> int:
    cfg = config_for(args, "dashboards_dir")
    files = build.dashboard_outputs(cfg, args.config)
    return _write(files, Path(cfg.output.dashboards_dir), DASHBOARD_PATTERNS, output_source(args, "dashboards_dir"))


def cmd_docs(args: argparse.Namespace) -> int:
    cfg = config_for(args, "docs_dir")
    files = build.docs_outputs(cfg, args.config)
    changed = written(files, output_source(args, "docs_dir"))
    for path in files:
        print(f"{path}: {'updated' if path in changed else 'up to date'}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """What the config generates is up to date, keeps the alert and dashboard conventions, and promtool accepts it."""
    cfg = config_for(args)
    files = build.generated_files(cfg, args.config)
    stale = build.stale(files)
    if stale:
        regenerate = "generate, dashboards and docs" + (f" with --config {args.config}" if args.config else "")
        print(f"stale generated files (run gpu-execution-pack {regenerate}, and commit them):", file=sys.stderr)
        for p in stale:
            print(f"  {p}", file=sys.stderr)
        return 1
    problems = build.convention_problems(cfg, files, args.config)
    if problems:
        print("generated output breaks the pack's conventions:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print(build.check_rules(files))
    # Not a failure (the folder may hold files of the user's own), but said: CI is where a leftover is seen.
    no_more(files, Path(cfg.output.rules_dir), RULE_PATTERNS)
    no_more(files, Path(cfg.output.dashboards_dir), DASHBOARD_PATTERNS)
    rules = sum(p.name.endswith(RULE_FILE_SUFFIX) for p in files)
    print(f"conventions: {rules} rule files and {sum(p.suffix == '.json' for p in files)} dashboards pass")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Validate a config by generating its rules into a scratch directory and checking them."""
    cfg = load_config(args.config)
    with tempfile.TemporaryDirectory() as tmp:
        files = rule_files(cfg, Path(tmp))
        write_all(files)
        promtool.check_rules(sorted(files))
    print(f"{args.config or 'built-in defaults'}: valid; {len(files)} rule files pass promtool check rules")
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    """Build the promtool suites from the scenario library for the config (or the defaults' variants) and run them."""
    if args.rules_dir is not None and not Path(args.rules_dir).is_dir():
        raise ConfigError(f"--rules-dir: {args.rules_dir} is not a folder; give the folder holding tests/*.test.yml")
    cfg = load_config(args.config) if args.config else None
    variants = testsuites.config_variants(cfg) if cfg else testsuites.default_variants()
    build_dir = Path(args.build_dir)
    folder_on_the_way(build_dir, "--build-dir")
    files = testsuites.suite_files(variants, build_dir)
    written(files, "--build-dir")
    tests = testsuites.suite_test_paths(files)
    rules_dir = Path(args.rules_dir or DEFAULT_RULES_DIR)
    handwritten = sorted((rules_dir / "tests").glob("*.test.yml")) if not args.config else []
    print(promtool.test_rules(tests + handwritten).output.strip())
    # Named here, not left to promtool's output, whose format differs between Prometheus 2 and 3.
    print("\n".join(f"passed: {path}" for path in tests + handwritten))
    # A config's run has no hand-written suites (they test the pack's own rules): none is named, not "0".
    also = f" and {len(handwritten)} hand-written suites" if handwritten else ""
    print(f"{len(tests)} generated suites in {build_dir}/{also} pass")
    return 0


def _require_extra(extra: str, command: str) -> None:
    """Stop with the install hint, before anything starts, where ``command`` needs an extra not installed."""
    if hint := extras.extra_hint(extra, command):
        raise ConfigError(hint)


def ask_prometheus(args: argparse.Namespace, work, then=None, cfg: Config | None = None) -> Any:
    """``work(cfg, client)``'s document, against the configured (or --prometheus) query API within the
    request deadline; on a refusal, the message on stderr and the exit code (2: the request, 3: Prometheus).

    ``then(document)``, if given, runs past the deadline with the client still open (a stream read
    piece by piece, each within its own timeout) and its result is returned instead. ``cfg``: the config
    already loaded (else -c's is).
    """
    import asyncio

    from gpu_execution_pack.query import params, prometheus

    if cfg is None:
        cfg = load_config(args.config)

    async def run() -> Any:
        client = prometheus.PrometheusClient.for_config(cfg.api, url=args.prometheus)
        try:
            with prometheus.deadline(cfg.api.timeout_seconds, client.url):
                document = await work(cfg, client)
            return document if then is None else await then(document)
        finally:
            await client.close()

    try:
        return asyncio.run(run())
    except prometheus.PrometheusUnreachable as err:
        print(f"error: {err}; set --prometheus or api.prometheus_url", file=sys.stderr)
        return 3
    except (params.RequestError, prometheus.PrometheusError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2 if err.status < 500 else 3


def print_json(body: dict) -> None:
    json.dump(body, sys.stdout, indent=2)
    sys.stdout.write("\n")


def cmd_query(args: argparse.Namespace) -> int:
    """Print one execution's metrics as the endpoint would answer (every tenant): from Prometheus, else from the
    archive (``archive.url``) where Prometheus no longer has the execution.

    A window the endpoint would stream (more than STREAM_POINTS points) is written as compact JSON
    as it is fetched, so memory does not grow with the range; a shorter one is indented. As in the
    endpoint, api.timeout_seconds bounds the request up to its first piece, then each piece.
    """
    _require_extra("api", "query")
    import orjson

    from gpu_execution_pack.api import metrics, stream
    from gpu_execution_pack.query.execution import ExecutionMetrics

    out = sys.stdout.buffer

    async def write(answer: bytes | stream.MetricsStream) -> dict | None:
        if isinstance(answer, bytes):
            return orjson.loads(answer)
        async for part in answer.body():
            out.write(part)
        out.write(b"\n")
        out.flush()
        return None

    async def answer(cfg: Config, client: Any) -> bytes | stream.MetricsStream:
        # The archive where Prometheus no longer has the execution, as the endpoint answers.
        return await with_archive(
            cfg,
            lambda store: metrics.respond(
                store,
                ExecutionMetrics(cfg, client),
                args.execution_id,
                args.start,
                args.end,
                args.step,
                tenant=args.tenant,
                timeout=cfg.api.timeout_seconds,
                series=args.series,
                cluster=args.cluster,
            ),
        )

    try:
        body = ask_prometheus(args, answer, then=write)
    except stream.StreamAborted as err:
        print(f"error: {err}; the JSON written so far is cut short", file=sys.stderr)
        return 3
    if isinstance(body, int):
        return body
    if body is not None:
        print_json(body)
    return 0


async def with_archive(cfg: Config, work) -> Any:
    """``work(store)`` with the configured archive open (None: none configured, or no such SQLite file)."""
    from gpu_execution_pack.archive import reader

    store = reader.open_store(cfg.archive.url)
    try:
        return await work(store)
    finally:
        if store is not None:
            store.close()


DEFAULT_TOP = 20  # report --since: the executions listed


def cmd_report(args: argparse.Namespace) -> int:
    """One execution's report (jobstats-style, or --json), or with --since the fleet ranked by GPU-hours wasted."""
    _require_extra("api", "report")
    from gpu_execution_pack.archive import reader
    from gpu_execution_pack.report import html, text

    if args.execution_id is not None and args.since is not None:
        print("error: give an EXECUTION_ID or --since DURATION, not both", file=sys.stderr)
        return 2
    if args.execution_id is None and args.since is None:
        print("error: give an EXECUTION_ID, or --since DURATION for the fleet view", file=sys.stderr)
        return 2
    if args.html is not None and args.json:
        print("error: --html and --json: give one of them", file=sys.stderr)
        return 2
    # Options of the other view are refused, not ignored: the answer would not be what was asked.
    if args.since is not None and (args.start or args.end):
        print(
            "error: --start and --end narrow one execution's report; the fleet view (--since) takes neither",
            file=sys.stderr,
        )
        return 2
    if args.execution_id is not None and args.top is not None:
        print("error: --top applies to the fleet view (--since), not to one execution's report", file=sys.stderr)
        return 2
    if args.since is not None:
        body = ask_prometheus(
            args,
            lambda cfg, client: with_archive(
                cfg,
                lambda store: reader.fleet_summary(
                    cfg,
                    client,
                    store,
                    args.since,
                    DEFAULT_TOP if args.top is None else args.top,
                    tenant=args.tenant,
                    cluster=args.cluster,
                ),
            ),
        )
    elif args.html is not None:
        body = ask_prometheus(
            args,
            lambda cfg, client: with_archive(
                cfg,
                lambda store: reader.execution_page(
                    cfg, client, store, args.execution_id, args.start, args.end, args.tenant, args.cluster
                ),
            ),
        )
    else:
        body = ask_prometheus(
            args,
            lambda cfg, client: with_archive(
                cfg,
                lambda store: reader.execution_summary(
                    cfg, client, store, args.execution_id, args.start, args.end, args.tenant, args.cluster
                ),
            ),
        )
    if isinstance(body, int):
        return body
    if args.html == "-":  # as --write-config -: the page to standard output
        sys.stdout.write(body if isinstance(body, str) else html.render_fleet(body))
    elif args.html is not None:
        # Written whole or not at all (output.write_all: a temporary file, then renamed).
        written({Path(args.html): body if isinstance(body, str) else html.render_fleet(body)}, "--html", args.html)
        print(f"wrote {args.html}", file=sys.stderr)
    elif args.json:
        print_json(body)
    else:
        sys.stdout.write(text.render_fleet(body) if args.since is not None else text.render_execution(body))
    return 0


def overwrites_comments(config: str, target: str) -> bool:
    """Whether writing ``target`` would replace the config file ``config`` and a comment in it."""
    try:
        if not Path(target).exists() or not os.path.samefile(config, target):
            return False
        return any(line.lstrip().startswith("#") for line in Path(config).read_text(encoding="utf-8").splitlines())
    except (OSError, UnicodeDecodeError):  # not a file we can compare or read: the write itself says what is wrong
        return False


def cmd_doctor(args: argparse.Namespace) -> int:
    """The live deployment against the config: a checklist (exit 1 on a fail), or with --write-config the
    config it should have."""
    _require_extra("api", "doctor")
    from gpu_execution_pack.doctor import advice, checks, probe, text
    from gpu_execution_pack.query import prometheus

    # Refused before Prometheus is asked: an empty name would write nothing and say nothing.
    if args.write_config is not None and not args.write_config.strip():
        print("error: --write-config: empty; accepted: a file path, or - for standard output", file=sys.stderr)
        return 2
    # With -, standard output carries the config alone, so that it can be piped or redirected to a file.
    to_stdout = args.write_config == "-"
    if to_stdout and args.json:
        print("error: --json and --write-config -: both print to standard output; give one of them", file=sys.stderr)
        return 2
    # The config file read once: --write-config keeps its keys, and a pipe (-c /dev/stdin) has none the second time.
    cfg, user = load_config_document(args.config) if args.config else (Config(), None)
    if args.config and args.write_config and not to_stdout and overwrites_comments(args.config, args.write_config):
        print(
            f"error: --write-config: {args.write_config} is the config given with -c, and the comments in it would be "
            "lost (the written config keeps its keys, not its comments); write to another file and merge by hand, "
            "or give - to print it",
            file=sys.stderr,
        )
        return 2
    deployment = ask_prometheus(args, probe.probe, cfg=cfg)
    if isinstance(deployment, int):
        return deployment
    where = prometheus.redacted(args.prometheus or cfg.api.prometheus_url)  # no password in the header or a CI log
    items = checks.checklist(cfg, deployment)
    status = 1 if checks.worst(items) == "fail" else 0
    if args.json:
        print_json(text.document(items, where))
    else:
        (sys.stderr if to_stdout else sys.stdout).write(text.render(items, where))
    if args.write_config is None:
        return status
    mode = None
    if args.config:
        try:
            # A new file gets the user's config's mode: it may hold a password (archive.url) not for all to read.
            mode = os.stat(args.config).st_mode & 0o777
        except OSError as err:  # read a moment ago: it went since
            raise ConfigError(f"{args.config}: cannot read the config file: {err.strerror}") from None
    # Its relative paths are read from its folder: rewritten to name the same files from FILE's folder as
    # named (a symlink's own, where the written config will be loaded from), or with - the working directory.
    body = advice.suggested_config(
        user,
        cfg,
        deployment,
        read_from=Path(args.config).parent if args.config else None,
        written_to=Path.cwd() if to_stdout else Path(args.write_config).parent,
        fails=sum(item.status == "fail" for item in items),
        prometheus_url=args.prometheus,
    )
    if to_stdout:
        sys.stdout.write(body)
        return status
    # Written whole or not at all, through a symlink, an existing file keeping its mode (output.write_all).
    written({Path(args.write_config): body}, "--write-config", args.write_config, mode=mode, keep_existing=True)
    print(f"wrote {args.write_config}", file=sys.stderr)
    return status


MAX_FOLLOW_PASSES = 10**9  # --follow runs until stopped; a bound keeps the loop finite all the same
# The shortest --follow interval: 1ms ran passes back to back, a busy loop on Prometheus and the database. 1s is
# the pack's floor for every duration it reads as a step or window (the endpoint's step, the fleet's since, a
# follow pass's own listing window), and a pass rarely takes less; an execution is archived only ended_after
# (15m) past its end anyway, so anything over a few minutes buys nothing, but that is the user's choice to make.
MIN_FOLLOW = "1s"


def cmd_archive(args: argparse.Namespace) -> int:
    """Archive the ended executions of the last --since, once or (--follow) every interval until stopped."""
    import asyncio
    import time

    _require_extra("api", "archive")
    _require_extra("archive", "archive")
    from gpu_execution_pack.archive import archiver
    from gpu_execution_pack.archive.store import DATABASE_ERRORS, Store, one_line
    from gpu_execution_pack.promql import parse_duration_seconds
    from gpu_execution_pack.query import params, prometheus

    cfg = load_config(args.config)
    window = _duration("--since", args.since, parse_duration_seconds)
    every = _duration("--follow", args.follow, parse_duration_seconds, MIN_FOLLOW) if args.follow else 0.0
    store = Store.open(args.url or cfg.archive.url, source="--url" if args.url else "archive.url")
    if store is None:
        raise ConfigError("archive.url: empty; accepted: a SQLite file path or a postgresql:// URL")

    async def one_pass(seconds: float, at: float) -> archiver.Tally:
        client = prometheus.PrometheusClient.for_config(cfg.api, url=args.prometheus)
        try:
            return await archiver.archive_window(cfg, client, store, seconds, at)
        finally:
            await client.close()

    watermark: float | None = None  # --follow: after a complete pass, later passes read only the time since
    completed = False
    try:
        for _ in range(MAX_FOLLOW_PASSES):
            started, at = time.monotonic(), time.time()
            try:
                tally = asyncio.run(one_pass(archiver.follow_window(cfg, window, watermark, at), at))
                watermark = archiver.watermark_after(cfg, at)
                completed = True  # the archive is kept, records or not
                for reason in tally.skipped:
                    print(f"warning: archive: {reason}", file=sys.stderr, flush=True)
                print(f"archive: {tally.line()} ({time.monotonic() - started:.1f} s)", flush=True)
            except (params.RequestError, prometheus.PrometheusError) as err:
                print(f"error: {err}", file=sys.stderr, flush=True)
                # A malformed URL is no outage to wait out: --follow would print it every pass, forever.
                if not every or isinstance(err, prometheus.InvalidPrometheusURL):
                    return 2 if err.status < 500 else 3
            except DATABASE_ERRORS as err:  # the archive's database went away: say so, and retry next pass
                print(f"error: archive.url: {one_line(err)}", file=sys.stderr, flush=True)
                if not every:
                    return 3
            if not every:
                return 0
            time.sleep(max(0.0, every - (time.monotonic() - started)))
    finally:
        # No pass completed and nothing was written (Prometheus unreachable, say): a SQLite file this run created
        # would be a schema alone, taken for an archive by the next command. It goes.
        if completed:
            store.close()
        else:
            store.close_and_remove_if_new_and_empty()
    return 0


def _duration(name: str, value: str, parse, least: str = "") -> float:
    """``value`` of option ``name`` in seconds: a duration above 0 (at least ``least`` where given) and at most
    292y, else a ConfigError naming the option and what it accepts."""
    try:
        seconds = parse(value)
    except ValueError:
        seconds = 0
    floor = parse(least) if least else 0.0
    # Past 292y, Prometheus refuses the query: the mistake is ours to say.
    if not (0 < seconds <= MAX_DURATION_SECONDS and seconds >= floor):
        lowest = f"of at least {least}" if least else "above 0"
        raise ConfigError(
            f"{name}: {value!r} is not accepted; accepted: a Prometheus duration {lowest} and at most 292y, "
            "e.g. 30d or 5m"
        )
    return seconds


def check_port(option: str, port: int) -> None:
    if not 0 <= port <= 65535:
        raise ConfigError(f"{option}: {port} is not accepted; accepted: 0 (a free port) to 65535")


def check_listenable(host: str, port: int) -> None:
    """Refuse, naming the option, a host that does not resolve or an address taken, before the server starts (its
    own errors name neither). The socket is closed at once: the server binds its own."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as err:
        raise ConfigError(f"--host: {host!r} does not resolve ({err}); give an address or name to listen on") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as err:
            raise ConfigError(f"--host/--port: cannot listen on {host}:{port}: {err.strerror}") from None


def cmd_serve(args: argparse.Namespace) -> int:
    _require_extra("api", "serve")
    from gpu_execution_pack.api import app, server

    if args.workers < 1:
        raise ConfigError(f"--workers: {args.workers} is not accepted; accepted: 1 or more")
    check_port("--port", args.port)
    # Built here first in every case: a bad config or missing keys fail before any worker starts.
    cfg = load_config(args.config)
    served = app.create_app(cfg, insecure_no_auth=args.insecure_no_auth)
    # The archive too, which the app opens when it starts: a file that is no archive, or a database that does not
    # answer, is one line here, not a traceback in the server's startup (and with workers, a clean exit 0).
    from gpu_execution_pack.archive import reader

    if store := reader.open_store(cfg.archive.url):
        store.close()
    check_listenable(args.host, args.port)
    if args.workers == 1:
        server.run(served, args.host, args.port, 1)
        return 0
    os.environ[server.CONFIG_ENV] = str(Path(args.config).resolve()) if args.config else ""
    os.environ[server.INSECURE_ENV] = "1" if args.insecure_no_auth else ""
    server.run(server.FACTORY, args.host, args.port, args.workers)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The demo fleet in a Prometheus on 127.0.0.1 with live exporters and the endpoint, until Ctrl-C."""
    from gpu_execution_pack.demo import run

    for name in ("prometheus_port", "api_port"):
        check_port(f"--{name.replace('_', '-')}", getattr(args, name))
    try:
        return run.run(args.dir, args.prometheus_port, args.api_port)
    except run.DemoError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def cmd_defaults(args: argparse.Namespace) -> int:
    sys.stdout.write(defaults_yaml())
    return 0


def add_demo(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser(
        "demo",
        help="a day of a small NVIDIA and AMD fleet in a Prometheus on 127.0.0.1, live exporters and the endpoint, "
        "until Ctrl-C (needs prometheus and promtool)",
    )
    d.add_argument("--dir", help="folder for its data, config and logs (default: a temporary one, removed at the end)")
    d.add_argument("--prometheus-port", type=int, default=0, help="Prometheus' port (default 0: a free one)")
    d.add_argument("--api-port", type=int, default=0, help="the endpoint's port (default 0: a free one)")
    d.set_defaults(func=cmd_demo)


ARCHIVE_HELP = "write ended executions' records (report and series) to the archive"


def add_archive(a: argparse.ArgumentParser) -> None:
    """The ``archive`` command's options."""
    a.add_argument("--since", default="1h", help="archive executions with samples in this last duration (default 1h)")
    a.add_argument(
        "--follow", metavar="INTERVAL", help=f"run a pass every INTERVAL (e.g. 5m; at least {MIN_FOLLOW}) until stopped"
    )
    a.add_argument("--prometheus", help="Prometheus URL (default: api.prometheus_url)")
    a.add_argument("--url", help="the archive (default: archive.url): a SQLite file path or a postgresql:// URL")
    a.set_defaults(func=cmd_archive)


def with_config(cmd: argparse.ArgumentParser) -> argparse.ArgumentParser:
    cmd.add_argument("--config", "-c", help="YAML config file (default: built-in defaults)")
    return cmd


def with_output(cmd: argparse.ArgumentParser, key: str) -> argparse.ArgumentParser:
    cmd.add_argument("--output-dir", "-o", help=f"write here instead of output.{key} of the config")
    return with_config(cmd)


def add_file_commands(sub: argparse._SubParsersAction) -> None:
    """The commands that write or check the generated files."""
    with_output(sub.add_parser("generate", help="write the rule files"), "rules_dir").set_defaults(func=cmd_generate)
    with_output(
        sub.add_parser("dashboards", help="write the dashboards and their provisioning files"), "dashboards_dir"
    ).set_defaults(func=cmd_dashboards)
    with_config(sub.add_parser("check", help="fail if generated files are stale; promtool check rules")).set_defaults(
        func=cmd_check
    )
    with_config(sub.add_parser("validate", help="validate a config and the rules it yields")).set_defaults(
        func=cmd_validate
    )
    t = with_config(
        sub.add_parser("test", help="build the promtool suites for the config from the scenario library and run them")
    )
    t.add_argument("--build-dir", default=str(DEFAULT_BUILD_DIR), help="where the suites are written")
    t.add_argument(
        "--rules-dir",
        help=f"hand-written suites in <rules-dir>/tests/ are run too (default: {DEFAULT_RULES_DIR}, where it exists)",
    )
    t.set_defaults(func=cmd_test)
    with_output(
        sub.add_parser(
            "docs",
            help="write the runbook with the config's figures (with the defaults, also the pack's reference docs)",
        ),
        "docs_dir",
    ).set_defaults(func=cmd_docs)
    sub.add_parser("defaults", help="print the default config as YAML").set_defaults(func=cmd_defaults)


def add_reading_commands(sub: argparse._SubParsersAction) -> None:
    """The commands that read a live Prometheus: an execution's metrics, its report, the doctor."""
    q = with_config(
        sub.add_parser(
            "query", help="print an execution's metrics as JSON, read from Prometheus (else the archive, if configured)"
        )
    )
    q.add_argument("execution_id")
    q.add_argument("--prometheus", help="Prometheus URL (default: api.prometheus_url)")
    q.add_argument("--start", help="ISO 8601 (default: the execution's first sample)")
    q.add_argument("--end", help="ISO 8601 (default: its last sample, or now while it reports)")
    q.add_argument("--step", help="Prometheus duration (default 15s)")
    q.add_argument("--cluster", help=CLUSTER_HELP)
    q.add_argument("--tenant", help=TENANT_HELP)
    q.add_argument(
        "--series", help="API series names, separated by commas, as the endpoint's series parameter (default: its own)"
    )
    q.set_defaults(func=cmd_query)
    r = with_config(
        sub.add_parser("report", help="an execution's report with verdicts, or (--since) the fleet ranked by waste")
    )
    r.add_argument("execution_id", nargs="?", metavar="EXECUTION_ID")
    r.add_argument("--since", help="fleet view: executions with samples in this last duration, e.g. 7d")
    r.add_argument("--top", type=int, help=f"fleet view: how many executions to list (default {DEFAULT_TOP})")
    r.add_argument("--json", action="store_true", help="print the JSON document the summary endpoint serves")
    r.add_argument(
        "--html",
        metavar="FILE",
        help="write the report as one self-contained HTML page with charts (opens offline); - for standard output",
    )
    r.add_argument("--prometheus", help="Prometheus URL (default: api.prometheus_url)")
    r.add_argument("--start", help="ISO 8601 (default: the execution's first sample)")
    r.add_argument("--end", help="ISO 8601 (default: its last sample)")
    r.add_argument("--cluster", help=CLUSTER_HELP + "; with --since, only that cluster's executions")
    r.add_argument("--tenant", help=TENANT_HELP + "; with --since, only that tenant's executions")
    r.set_defaults(func=cmd_report)
    d = with_config(sub.add_parser("doctor", help="check a live deployment against the config (exit 1 on a fail)"))
    d.add_argument("--prometheus", help="Prometheus URL (default: api.prometheus_url)")
    d.add_argument("--json", action="store_true", help="print the checklist as JSON (for CI)")
    d.add_argument(
        "--write-config",
        metavar="FILE",
        help="write the config the deployment should have to FILE, its relative paths rewritten to name the same "
        "files from FILE's folder; with -, print it to standard output (its paths as read from the working "
        "directory) and the checklist to standard error",
    )
    d.set_defaults(func=cmd_doctor)
    add_archive(with_config(sub.add_parser("archive", help=ARCHIVE_HELP)))


def add_serve_command(sub: argparse._SubParsersAction) -> None:
    sv = with_config(sub.add_parser("serve", help="serve GET /api/v2/external/execution/{id}/metrics"))
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8080)
    sv.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve every tenant without a key (a local test only; keys come from api.keys_file or GPU_PACK_API_KEYS)",
    )
    sv.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes (default 1); the endpoint's JSON work is CPU-bound, so up to one per core helps",
    )
    sv.set_defaults(func=cmd_serve)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu-execution-pack", description=__doc__)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    add_file_commands(sub)
    add_reading_commands(sub)
    add_serve_command(sub)
    add_demo(sub)
    return p


# Options naming a file, folder or URL: an empty value (`-o ""`, a shell variable unset) is refused, not read as
# the option left out, which silently wrote to the default place (--prometheus says it with the URL's shape).
NON_EMPTY_OPTIONS = {
    "config": "--config",
    "output_dir": "--output-dir",
    "build_dir": "--build-dir",
    "rules_dir": "--rules-dir",
    "html": "--html",
    "write_config": "--write-config",
    "url": "--url",
    "dir": "--dir",
}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for dest, option in NON_EMPTY_OPTIONS.items():
        if getattr(args, dest, None) == "":
            print(f"error: {option}: empty; give a value, or leave the option out for its default", file=sys.stderr)
            return 2
    if getattr(args, "config", None):  # as a generated file's header names it, from the repository's root
        args.config = config_as_named(args.config)
    try:
        status = args.func(args)
        sys.stdout.flush()  # a full disk under `> pack.yml` shows here, not as a traceback at exit
        return status
    except (ConfigError, promtool.PromtoolError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`| head`): standard output to nowhere, so that the flush at exit raises nothing
        # more, and the status a shell gives a process that SIGPIPE ended.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13
    except OSError as err:
        # Writing standard output failed (no space, a quota, an I/O error): what a file the command writes fails
        # with is named by ``written``, and carries the file's name.
        if err.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO) or err.filename is not None:
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the flush at exit fails no more
        print(f"error: cannot write standard output: {os.strerror(err.errno)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C while a command waits (on Prometheus, say): one line, 128 + SIGINT
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
