"""The phase table: what a GPU and its host do in each named phase of an execution.

Values are given in the units the older exporters use (percent, MiB, MHz, W, degrees C, bytes/s); the
oracle (``scenario.oracle``) turns them into base units with its own constants. A ``GpuLoad`` field named
``<signal key>_<unit>`` (``pcie_rx_bytes_per_second``) is what the GPU publishes for that catalog signal,
in one of the oracle's units (``oracle.LOAD_UNITS``): a new signal's load is one field here, with a default.
Values are chosen so that every conversion is exact in floating point (integer MiB and MHz, percent
divided by 100, dyadic CPU shares): promtool 2.42 compares sample values exactly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class GpuLoad:
    """What one GPU reports during a phase (older exporters' units); given by keyword in the phase table."""

    util_percent: float
    mem_used_mib: int
    mem_used_end_mib: int | None = None  # a linear ramp to this value over the phase, else flat
    power_watts: float
    temp_celsius: float
    sm_clock_mhz: int
    mem_clock_mhz: int
    pcie_rx_bytes_per_second: int
    pcie_tx_bytes_per_second: int
    # Profiling activity (percent of cycles) on whole GPUs. Unset: the engines are active half the
    # time GPU_UTIL counts (so a rule that read them for utilisation would fail); on MIG instances
    # always as much as the utilisation, which is read from them. Tensor pipes unset: half the
    # engines; memory interface: a quarter of the utilisation; SM activity as the engines, SM
    # occupancy a quarter of them.
    engine_active_percent: float | None = None
    tensor_active_percent: float | None = None
    dram_active_percent: float | None = None
    # Throttle evidence, published only where a scenario exports those optional fields.
    clock_event_reasons: int = 0
    power_violation_share: float = 0.0  # of wall time, held down by the power limit
    thermal_violation_share: float = 0.0


@dataclass(frozen=True, kw_only=True)
class HostLoad:
    """What one execution adds to a host during a phase. CPU shares are dyadic (n/8)."""

    cpu_busy: float
    ram_used_bytes: int
    ram_used_end_bytes: int | None = None  # a linear ramp to this value over the phase, else flat


@dataclass(frozen=True)
class Phase:
    name: str
    minutes: int
    gpu: GpuLoad
    host: HostLoad


# H100-like numbers: 80 GiB usable framebuffer, 700 W enforced limit.
PHASES: dict[str, Phase] = {
    p.name: p
    for p in (
        Phase(
            "loading",
            5,
            GpuLoad(
                util_percent=4,
                mem_used_mib=4096,
                power_watts=110.5,
                temp_celsius=36,
                sm_clock_mhz=1755,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=2_000_000_000,
                pcie_tx_bytes_per_second=50_000_000,
            ),
            HostLoad(cpu_busy=0.75, ram_used_bytes=32 * 1024**3),
        ),
        Phase(
            "compute",
            10,
            GpuLoad(
                util_percent=97,
                mem_used_mib=61440,
                power_watts=650.25,
                temp_celsius=68,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "memory_ramp",
            10,
            GpuLoad(
                util_percent=92,
                mem_used_mib=61440,
                mem_used_end_mib=81408,
                power_watts=640,
                temp_celsius=70,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=300_000_000,
                pcie_tx_bytes_per_second=100_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=56 * 1024**3),
        ),
        Phase(
            "throttled",
            10,
            # SW power cap and SW thermal slowdown bits (0x4 | 0x20).
            GpuLoad(
                util_percent=95,
                mem_used_mib=65536,
                power_watts=699.5,
                temp_celsius=86,
                sm_clock_mhz=1410,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
                clock_event_reasons=0x24,
                power_violation_share=0.75,
                thermal_violation_share=0.5,
            ),
            HostLoad(cpu_busy=0.375, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "idle",
            5,
            GpuLoad(
                util_percent=0,
                mem_used_mib=512,
                power_watts=72.25,
                temp_celsius=31,
                sm_clock_mhz=345,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=0,
                pcie_tx_bytes_per_second=0,
                clock_event_reasons=0x1,
            ),
            HostLoad(cpu_busy=0, ram_used_bytes=4 * 1024**3),
        ),
        # Phases the alert tests use.
        Phase(
            "leak",  # framebuffer grows from 60 % to 97.5 % over 15 minutes...
            15,
            GpuLoad(
                util_percent=90,
                mem_used_mib=49152,
                mem_used_end_mib=79872,
                power_watts=610,
                temp_celsius=71,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=300_000_000,
                pcie_tx_bytes_per_second=100_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "oom",  # ... and on to 100 % over 5, when the framework gives up
            5,
            GpuLoad(
                util_percent=90,
                mem_used_mib=79872,
                mem_used_end_mib=81920,
                power_watts=610,
                temp_celsius=71,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=300_000_000,
                pcie_tx_bytes_per_second=100_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "host_leak",  # host RAM grows from 128 GiB to 254 GiB of 256 GiB over 40 minutes
            40,
            GpuLoad(
                util_percent=93,
                mem_used_mib=61440,
                power_watts=630,
                temp_celsius=69,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=120 * 1024**3, ram_used_end_bytes=246 * 1024**3),
        ),
        Phase(
            "capped",  # at the power limit with the SM clock pulled down (SW power cap bit)
            30,
            GpuLoad(
                util_percent=96,
                mem_used_mib=61440,
                power_watts=699.5,
                temp_celsius=79,
                sm_clock_mhz=1410,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
                clock_event_reasons=0x4,
                power_violation_share=0.75,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "hot",  # at 88 °C, under the power limit
            15,
            GpuLoad(
                util_percent=95,
                mem_used_mib=61440,
                power_watts=560,
                temp_celsius=88,
                sm_clock_mhz=1830,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
                clock_event_reasons=0x20,
                power_violation_share=0.0,
                thermal_violation_share=0.625,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "stalled",  # waiting on input, the host CPU mostly idle
            40,
            GpuLoad(
                util_percent=6,
                mem_used_mib=30720,
                power_watts=120,
                temp_celsius=40,
                sm_clock_mhz=1755,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=20_000_000,
                pcie_tx_bytes_per_second=1_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=24 * 1024**3),
        ),
        Phase(
            "hung",  # a deadlocked NCCL collective: kernels resident (GPU_UTIL high), the engines idle
            30,
            GpuLoad(
                util_percent=98,
                mem_used_mib=61440,
                power_watts=160,
                temp_celsius=48,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=0,
                pcie_tx_bytes_per_second=0,
                engine_active_percent=2,
                tensor_active_percent=0,
                dram_active_percent=1,
            ),
            HostLoad(cpu_busy=0.125, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "fp32",  # busy engines doing FP32 maths: the tensor pipes idle
            30,
            GpuLoad(
                util_percent=96,
                mem_used_mib=61440,
                power_watts=580,
                temp_celsius=66,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
                engine_active_percent=88,
                tensor_active_percent=0,
                dram_active_percent=40,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "tensor",  # busy engines on the tensor cores (mixed precision)
            30,
            GpuLoad(
                util_percent=96,
                mem_used_mib=61440,
                power_watts=660,
                temp_celsius=70,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
                engine_active_percent=90,
                tensor_active_percent=45,
                dram_active_percent=50,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        # Two pods time-slicing one GPU, each its own processes' share (KUBERNETES_VIRTUAL_GPUS): together
        # under 100 % and within the framebuffer.
        Phase(
            "sliced_heavy",
            10,
            GpuLoad(
                util_percent=60,
                mem_used_mib=45056,
                power_watts=150,
                temp_celsius=61,
                sm_clock_mhz=1695,
                mem_clock_mhz=6251,
                pcie_rx_bytes_per_second=100_000_000,
                pcie_tx_bytes_per_second=20_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=16 * 1024**3),
        ),
        Phase(
            "sliced_light",
            10,
            GpuLoad(
                util_percent=25,
                mem_used_mib=22528,
                power_watts=110,
                temp_celsius=52,
                sm_clock_mhz=1695,
                mem_clock_mhz=6251,
                pcie_rx_bytes_per_second=50_000_000,
                pcie_tx_bytes_per_second=10_000_000,
            ),
            HostLoad(cpu_busy=0.125, ram_used_bytes=8 * 1024**3),
        ),
        Phase(
            "sliced_fill",  # each pod under half the framebuffer, together nearly all of it
            10,
            GpuLoad(
                util_percent=45,
                mem_used_mib=39424,
                power_watts=140,
                temp_celsius=58,
                sm_clock_mhz=1695,
                mem_clock_mhz=6251,
                pcie_rx_bytes_per_second=80_000_000,
                pcie_tx_bytes_per_second=20_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=16 * 1024**3),
        ),
        Phase(
            "cpu_bound",  # pre-processing saturates the host CPU
            40,
            GpuLoad(
                util_percent=9,
                mem_used_mib=30720,
                power_watts=140,
                temp_celsius=42,
                sm_clock_mhz=1755,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=50_000_000,
                pcie_tx_bytes_per_second=1_000_000,
            ),
            HostLoad(cpu_busy=0.875, ram_used_bytes=24 * 1024**3),
        ),
    )
}

TRAINING = ("loading", "compute", "memory_ramp", "throttled", "idle")
