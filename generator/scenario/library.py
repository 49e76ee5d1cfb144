"""The scenarios the pack's tests run: every case the rules must get right has one here."""

from __future__ import annotations

from dataclasses import replace

from generator.scenario.model import TRAINING, Execution, Gpu, Host, Scenario


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
