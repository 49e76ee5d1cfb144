"""The report for a terminal: a jobstats-style summary with bars, then the verdicts as notes."""

from __future__ import annotations

from typing import Any

from gpu_execution_pack.report.numbers import figure, percent_text

BAR_WIDTH = 30


def bar(percent: float | None) -> str:
    """``[|||||||          ]  23.4 %``; an empty bar and ``n/a`` without data."""
    filled = 0 if percent is None else round(max(0.0, min(percent, 100.0)) / 100 * BAR_WIDTH)
    return f"[{'|' * filled}{' ' * (BAR_WIDTH - filled)}] {percent_text(percent):>7}"


def gib(value: float | None) -> str:
    return "n/a" if value is None else figure(value / 1024**3, "GiB")


def duration(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{s:02d}"


def device(d: dict[str, Any]) -> str:
    """``host GPU n`` (``/instance`` on MIG), as the report's rows name a GPU."""
    return f"{d['hostname']} GPU {d['gpu']}" + (f"/{d['migInstance']}" if d["migInstance"] else "")


# What the engines did, beside utilisation (which counts time with any kernel resident).
ACTIVITY_ROWS = (
    ("graphicsEngineActivePercent", "graphics engine active"),
    ("tensorActivePercent", "tensor pipes active"),
    ("dramActivePercent", "memory interface active"),
)


def activity_lines(utilization: dict[str, Any]) -> list[str]:
    """The activity means over the run, for those the exporter publishes."""
    return [f"    {label:<24} {bar(utilization[key])}" for key, label in ACTIVITY_ROWS if key in utilization]


def printable(value: Any) -> Any:
    """``value`` (a document, or anything in it) with every string's characters that a terminal would act on
    escaped (``\\x1b``, ``\\n``, ``\\u2028``): a label value is the exporter's, or a job's, to choose, and one
    with an escape sequence or a line break would retitle the terminal or forge lines of the report."""
    if isinstance(value, str):
        if value.isprintable():
            return value
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in value)
    if isinstance(value, dict):
        return {k: printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable(v) for v in value]
    return value


def render_execution(doc: dict[str, Any]) -> str:
    """One execution's report document as text."""
    doc = printable(doc)
    gpus, u, mem, power, cost = doc["gpus"], doc["utilization"], doc["memory"], doc["power"], doc["cost"]
    lines = [
        "=" * 72,
        f"  GPU execution report: {doc['executionId']}" + (f" (cluster {doc['cluster']})" if "cluster" in doc else ""),
        "=" * 72,
        f"  Span:      {doc['start']} to {doc['end']} ({duration(doc['durationSeconds'])})"
        + ("  [running]" if doc["running"] else ""),
        *(
            [f"  Source:    the archive (series kept at {doc.get('step')} steps)"]
            if doc.get("source") == "archive"
            else []
        ),
        f"  GPUs:      {gpus['count']} x {', '.join(gpus['models'])}"
        + (f" (MIG {', '.join(gpus['migProfiles'])})" if gpus["migProfiles"] else ""),
        f"  Hosts:     {', '.join(h['hostname'] for h in doc['hosts']) or 'n/a'}",
        "",
        "  GPU utilisation",
    ]
    lines += [f"    {device(d):<24} {bar(d['utilizationPercent'])}" for d in gpus["devices"]]
    heavy = u["heavyPhase"]
    lines += [
        f"    {'mean over the run':<24} {bar(u['gpuMeanPercent'])}",
        f"    {'mean in the heavy phase':<24} {bar(heavy['gpuMeanPercent'])}",
        f"    {'host CPU':<24} {bar(u['hostCpuMeanPercent'])}",
    ]
    lines += activity_lines(u)
    lines += [
        "",
        "  GPU memory (peak)",
    ]
    lines += [
        f"    {device(d):<24} {bar(d['memoryPeakPercent'])}  {gib(d['memoryPeakBytes'])}" for d in gpus["devices"]
    ]
    lines += [
        f"    above the OOM threshold ({percent_text(mem['oomThresholdPercent'])}): "
        f"{duration(mem['secondsAboveOomThreshold'])}",
        f"    host RAM peak: {gib(mem['hostRamPeakBytes'])} ({percent_text(mem['hostRamPeakPercent'])})",
        "",
        "  Power",
        f"    energy: {figure(power['energyKwh'], 'kWh')} (from {power['energySource'].replace('_', ' ')})",
        f"    mean power: {figure(power['powerMeanWatt'], 'W')} of a {figure(power['powerLimitMeanWatt'], 'W')} limit",
        f"    power-throttled: {duration(power['powerThrottledSeconds'])}, "
        f"thermal-throttled: {duration(power['thermalThrottledSeconds'])}, "
        f"hottest: {figure(power['temperatureMaxCelsius'], '°C')}",
        "",
        "  Cost",
        f"    GPU-hours billed {figure(cost['gpuHoursBilled'])}, worked {figure(cost['gpuHoursWorked'])}"
        f" (efficiency {percent_text(cost['efficiencyPercent'])}): {figure(cost['cost'], cost['currency'])}",
    ]
    if "energyCost" in cost:
        lines.append(f"    energy cost: {figure(cost['energyCost'], cost['currency'])}")
    if "co2eKg" in cost:
        lines.append(f"    emissions: {figure(cost['co2eKg'], 'kg')} CO2e")
    if doc["alerts"]:
        lines += ["", "  Alerts that fired"]
        lines += [f"    {a['alertname']} ({a['severity']}) for {duration(a['firingSeconds'])}" for a in doc["alerts"]]
    lines += ["", "  Notes"]
    for v in doc["verdicts"]:
        lines += [f"    * [{v['code']}] {v['summary']}", f"      {v['advice']}"]
    lines += [f"    * {note}" for note in doc.get("notes", [])]
    return "\n".join(lines) + "\n"


def tenant_shown(tenant: str) -> str:
    """A fleet view's one tenant in its heading; "" is the GPUs whose series carry no tenant label."""
    return f"tenant {tenant}" if tenant else "the GPUs without a tenant label"


def names_tenants(doc: dict[str, Any]) -> bool:
    """Whether the fleet view ``doc`` names each row's tenant: where it covers every tenant (``tenant`` null: a key
    to every tenant, no tenant asked for) and a row carries one. One id may be two tenants' executions, and the
    rows shown (``--top 1``, or the top rows of one tenant) cannot tell a reader over every tenant whose each is.
    A view of one tenant's executions says its tenant once, in its heading."""
    return doc.get("tenant") is None and any(row.get("tenant") for row in doc["top"])


def render_fleet(doc: dict[str, Any]) -> str:
    """The fleet ranking as a table, most GPU-hours wasted first; a cluster column where rows name one."""
    doc = printable(doc)
    clustered = any("cluster" in row for row in doc["top"])
    tenanted = names_tenants(doc)
    scoped = "" if doc.get("tenant") is None else f" of {tenant_shown(doc['tenant'])}"
    lines = [
        f"Executions{scoped} in the last {doc['since']}: {doc['executions']}; "
        f"GPU-hours billed {figure(doc['gpuHoursBilled'])}, wasted {figure(doc['gpuHoursWasted'])}",
        *doc.get("notes", []),
        "",
        (f"{'cluster':<16} " if clustered else "")
        + (f"{'tenant':<16} " if tenanted else "")
        + f"{'execution':<28} {'GPUs':>4} {'billed':>9} {'wasted':>9} {'eff.':>7}  verdicts",
    ]
    for row in doc["top"]:
        cluster = f"{row.get('cluster', ''):<16} " if clustered else ""
        tenant = f"{row.get('tenant') or '-':<16} " if tenanted else ""
        lines.append(
            f"{cluster}{tenant}{row['executionId']:<28} {row['gpus']:>4} {figure(row['gpuHoursBilled']):>9} "
            f"{figure(row['gpuHoursWasted']):>9} {percent_text(row['efficiencyPercent']):>7}  "
            + ", ".join(row["verdicts"])
        )
    return "\n".join(lines) + "\n"
