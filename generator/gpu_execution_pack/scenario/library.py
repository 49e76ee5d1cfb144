"""The scenarios the pack's tests run: every case the rules must get right has one here."""

from __future__ import annotations

from dataclasses import replace

from gpu_execution_pack.scenario.model import TRAINING, Execution, Gpu, Host, Scenario, XidEvent


def training() -> Scenario:
    """Two executions sharing host h1, one of them also on h2, and a GPU nobody holds.

    e1 runs the full training profile on 4 GPUs over two hosts; e2 starts later on two other
    GPUs of h1, so both get h1's RAM and CPU while their phases differ.
    """
    h1 = [Gpu("h1", i) for i in range(5)]
    h2 = [Gpu("h2", i) for i in range(2)]
    e1 = Execution("train-0001", (h1[0], h1[1], h2[0], h2[1]), TRAINING, util_offsets=(0, -2, -4, -6))
    e2 = Execution(
        "train-0002", (h1[2], h1[3]), ("loading", "compute", "throttled"), start_minute=3, util_offsets=(1, -1)
    )
    return Scenario(
        "training",
        __doc__ or "",
        (Host("h1"), Host("h2")),
        (e1, e2),
        unowned_gpus=(h1[4],),
    )


def training_in(generation: str, host_label: str = "") -> Scenario:
    """The training scenario as one exporter generation (and host label spelling) publishes it."""
    name = f"training, dcgm-exporter {generation}" + (f" with label {host_label}" if host_label else "")
    return training().with_generation(generation, name, host_label)


def mixed_generations() -> Scenario:
    """h1 still runs dcgm-exporter 4.8 (Hostname label), h2 already runs 4.10."""
    s = training()
    return replace(s, name="training, h1 on 4.8 and h2 on 4.10", hosts=(Host("h1", "4.8"), Host("h2", "4.10")))


def mig() -> Scenario:
    """MIG: e3 holds two instances of one A100, e4 one instance of another; one instance is free.

    Device-wide fields (power, temperature, clocks) repeat on every instance: the per-execution
    power sum must count e3's GPU once.
    """
    model = "NVIDIA A100-SXM4-80GB"

    def instance(index: int, gi: str) -> Gpu:
        return Gpu("m1", index, model, mig_instance=gi, mig_profile="3g.40gb", mem_total_mib=40960)

    e3 = Execution("mig-0003", (instance(0, "1"), instance(0, "2")), TRAINING)
    e4 = Execution("mig-0004", (instance(1, "1"),), ("compute", "idle"), start_minute=3)
    return Scenario(
        "mig", mig.__doc__ or "", (Host("m1", "4.9"),), (e3, e4), unowned_gpus=(instance(1, "2"),), minutes=40
    )


def missing_optional(missing: frozenset[str], name: str) -> Scenario:
    """One execution on 2 GPUs whose exporter publishes no power limit or PCIe series."""
    e = Execution("solo-0005", (Gpu("h3", 0), Gpu("h3", 1)), ("compute", "idle"))
    return Scenario(name, missing_optional.__doc__ or "", (Host("h3"),), (e,), missing=missing)


def default_suite() -> list[Scenario]:
    """Scenarios the default configuration's rules are tested on."""
    return [
        training_in("4.8"),
        training_in("4.8", host_label="hostname"),  # 4.8.3 renamed Hostname to hostname
        training_in("4.9"),
        training_in("4.10"),
        mixed_generations(),
        mig(),
        missing_optional(
            frozenset({"power_limit_enforced", "pcie_rx", "pcie_tx"}),
            "no enforced power limit and no PCIe: requested limit used, others intact",
        ),
        missing_optional(
            frozenset({"power_limit_enforced", "power_limit_requested"}),
            "no power limit at all: no power limit series, others intact",
        ),
    ]


def attribution_suite() -> list[Scenario]:
    """Scenarios every attribution mode is tested on."""
    return [training_in("4.8"), mig()]


# --- Alert scenarios ----------------------------------------------------------------------
# Each puts a faulty execution beside a healthy one of the same shape, so every alert test
# shows the alert naming the right execution and staying quiet on the other.


def oom_crash() -> Scenario:
    """A leak to 100 % of GPU memory that ends in a crash, beside a steady job on the same host."""
    h = [Gpu("h4", i) for i in range(4)]
    leak = Execution("leak-0006", (h[0], h[1]), ("loading", "leak", "oom"), util_offsets=(0, -2))
    steady = Execution("steady-0007", (h[2], h[3]), ("loading", "compute", "compute"))
    return Scenario(
        "GPU memory leak ending in a crash", oom_crash.__doc__ or "", (Host("h4"),), (leak, steady), minutes=35
    )


def host_oom() -> Scenario:
    """Host RAM of h5 fills up: both executions on h5 are told, the one also on h6 only for h5."""
    leak = Execution("hostleak-0008", (Gpu("h5", 0),), ("loading", "host_leak"))
    neighbour = Execution(
        "neighbour-0009", (Gpu("h5", 1), Gpu("h6", 0)), ("loading", "compute", "compute", "compute", "compute")
    )
    hosts = (Host("h5"), Host("h6"))
    return Scenario("host RAM filling up", host_oom.__doc__ or "", hosts, (leak, neighbour), minutes=55)


def power_capped() -> Scenario:
    """90 minutes at the power limit with the SM clock pulled down, beside an uncapped job."""
    capped = Execution("capped-0010", (Gpu("h7", 0), Gpu("h7", 1)), ("compute", "capped", "capped", "capped", "idle"))
    steady = Execution("steady-0011", (Gpu("h7", 2),), ("compute",) * 10 + ("idle",))
    return Scenario("power capped for 90 minutes", power_capped.__doc__ or "", (Host("h7"),), (capped, steady))


def capped_from_start(exported: frozenset[str], name: str) -> Scenario:
    """At the power limit from the first minute: only an exported max clock (or reasons) can confirm it."""
    e = Execution("capped-0012", (Gpu("h8", 0),), ("capped", "idle"))
    return Scenario(name, capped_from_start.__doc__ or "", (Host("h8"),), (e,), exported=exported)


def no_power_limit(exported: frozenset[str], name: str) -> Scenario:
    """No power limit is exported: power throttling rests on the reasons bitmask, or stays quiet."""
    e = Execution("nolimit-0013", (Gpu("h9", 0),), ("compute", "capped", "idle"))
    missing = frozenset({"power_limit_enforced", "power_limit_requested"})
    return Scenario(name, no_power_limit.__doc__ or "", (Host("h9"),), (e,), missing=missing, exported=exported)


def hot() -> Scenario:
    """15 minutes at 88 °C with thermal reasons and counters exported, beside a cool job."""
    hot_ = Execution("hot-0014", (Gpu("h10", 0),), ("compute", "hot", "compute"))
    cool = Execution("cool-0015", (Gpu("h10", 1),), ("compute", "compute", "compute", "compute"))
    exported = frozenset({"clocks_event_reasons", "thermal_violation", "power_violation"})
    return Scenario("GPU running hot", hot.__doc__ or "", (Host("h10"),), (hot_, cool), exported=exported)


def waste() -> Scenario:
    """Two stalled executions, one waiting on I/O and one CPU-bound, and one that idles only while loading."""
    io = Execution("stall-0016", (Gpu("h11", 0), Gpu("h11", 1)), ("loading", "stalled", "compute"))
    cpu = Execution("cpubound-0017", (Gpu("h12", 0),), ("loading", "cpu_bound", "compute"))
    warmup = Execution("warmup-0018", (Gpu("h13", 0),), ("loading", "compute", "compute", "compute", "compute"))
    hosts = (Host("h11"), Host("h12"), Host("h13"))
    return Scenario("GPUs held but barely used", waste.__doc__ or "", hosts, (io, cpu, warmup))


def dcgm_lost() -> Scenario:
    """h14's exporter is down from minute 12 to 50, during a job; on h15 a job ends and its GPU reports on."""
    lost = Execution("lost-0019", (Gpu("h14", 0), Gpu("h14", 1)), ("compute", "compute", "compute"))
    done = Execution("done-0020", (Gpu("h15", 0),), ("compute", "loading"))
    hosts = (Host("h14", dcgm_outage=(12, 50)), Host("h15"))
    return Scenario("dcgm-exporter down", dcgm_lost.__doc__ or "", hosts, (lost, done), minutes=60)


def xid() -> Scenario:
    """GPU 0 reports Xid 79 mid-job; GPU 1 holds Xid 31 from before the job, which is old news."""
    e = Execution("xid-0021", (Gpu("h16", 0), Gpu("h16", 1)), ("compute", "compute", "compute"), start_minute=5)
    events = (XidEvent("h16", 0, 17, 79), XidEvent("h16", 1, 1, 31))
    return Scenario("Xid errors", xid.__doc__ or "", (Host("h16"),), (e,), xid_events=events, minutes=40)


def alert_suite() -> list[Scenario]:
    """Scenarios the alert rules are tested on (with the built-in defaults)."""
    return [
        oom_crash(),
        host_oom(),
        power_capped(),
        capped_from_start(frozenset(), "capped from the start, no max clock: quiet"),
        capped_from_start(frozenset({"max_sm_clock"}), "capped from the start, max clock exported"),
        no_power_limit(frozenset(), "no power limit and no reasons: power throttling quiet"),
        no_power_limit(frozenset({"clocks_event_reasons"}), "no power limit: reasons bitmask decides"),
        hot(),
        mig(),
        waste(),
        dcgm_lost(),
        xid(),
        training_in("4.8"),
    ]
