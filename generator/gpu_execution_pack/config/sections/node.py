"""Config keys of section ``node``: node_exporter facts, and where a target's host comes from."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.config.loader import opt


@dataclass(frozen=True)
class Node:
    host_identity: str = opt(
        "join",
        "Where a GPU's and a host's `hostname` comes from: `join` (the rules find each exporter target's host "
        "from the names the exporters publish, with the exact-first host map below) or `scrape` (your scrape "
        "config sets the target label `hostname` on both exporters' targets, as the generated scrape snippets "
        "do, e.g. from a Kubernetes pod's node; the rules read it as is and skip the host map). Under `scrape` "
        "an exporter's own `hostname` arrives as `exported_hostname` and is not read; a target without the "
        "label is recorded with an empty host.",
        "Your service discovery knows each target's node and you relabel it at scrape: `scrape` costs the "
        "per-GPU rules no join (docs/benchmarks.md).",
        choices=("join", "scrape"),
    )
    host_regex: str = opt(
        # An IPv4 address is a whole name (nodes named by their IP): its first number names no machine.
        "([0-9]+(?:[.][0-9]+){3}|[^.]+)(?:[.].*)?",
        "Regex whose first group is a host's name where the exporters spell it differently. A GPU's host is "
        "first the node whose nodename equals its host label (hostname, Hostname, or its exporter pod's "
        "Kubernetes node) exactly, and the series name it so (an FQDN both exporters give stays an FQDN); "
        "only where no nodename matches exactly are both names read through this regex, and a GPU and a host "
        "whose names agree after it are the same machine. The default keeps the short name, so `gpu-01` and "
        "`gpu-01.cluster.local` agree, and such hosts are named by their short name; an IPv4 address (a node "
        "named by its IP) stays whole. Where two machines' "
        "nodenames agree after it (`gpu-01.dc1.example.com` and `gpu-01.dc2.example.com`), no GPU is joined "
        "by that name: each node keeps its whole nodename, its GPUs find it only by an exact name or by the "
        "scrape address they share, and GpuExecutionHostNameCollision fires.",
        "Your host names differ only after the first dot (e.g. `rack1.gpu-01` and `rack2.gpu-01`): make both "
        "exporters report the same spelling (then they match exactly), or use `(.+)`.",
        kind="regex",
    )
    placeholder_nodenames: str = opt(
        "localhost|localhost[.]localdomain|[0-9a-f]{12}",
        "Regex of nodenames that name no machine: badly provisioned hosts, and node_exporter in a container "
        "without the host's UTS namespace (a 12-hex-digit container id). Such a node_exporter target is named by "
        "the dcgm-exporter scraped from the same address, or by that address.",
        "Your images ship another default hostname.",
        kind="regex_any",
    )
    cpu_rate_interval: str = opt(
        "",
        "Evaluation interval of the per-target host CPU rate, in a group of its own (`host_rates`). Empty: "
        "`rule_interval`, each evaluation rating each CPU's last two samples (irate). Set: each evaluation "
        "records `rate()` over this interval or `rate_window_fallback`, whichever is longer, so every recorded "
        "rate covers the time since the last; the host CPU series average the rates recorded within twice this "
        "interval (or `rate_window`, if longer), so that a late evaluation leaves no gap. The host CPU series "
        "then follow a change over both windows, and a CPU counter that steps back blanks them as long.",
        "Your hosts have many CPUs: the CPU rate reads every CPU's idle counter and is the served groups' "
        "most expensive rule (on 128-CPU hosts, about a third of their time, docs/benchmarks.md); at 1m it costs "
        "a quarter of what it does every 15 s.",
        kind="duration",
    )
    host_map_interval: str = opt(
        "1m",
        "Evaluation interval of the `hosts` group: the host maps (which host each exporter target is on) and the "
        "names two machines claim. Every per-GPU and per-host rule joins its target's newest map entry within "
        "Prometheus' 5-minute lookback, so a map evaluated less often than they are still names every host; only "
        "a target that appeared since the map's last evaluation waits for the next to be recorded (at most this "
        "long). Empty: `rule_interval`. At most 2m, so that a late evaluation stays within the lookback.",
        "Your targets come and go faster than a minute matters (new exporter pods' first minute of GPU series): "
        "shorten it, or set it empty to evaluate the maps with the per-GPU series, which costs the served groups "
        "the host map's whole work at every evaluation (docs/benchmarks.md).",
        kind="duration",
        empty_ok=True,
    )

    @property
    def at_scrape(self) -> bool:
        """Whether the scrape config names each target's host (``host_identity: scrape``)."""
        return self.host_identity == "scrape"
