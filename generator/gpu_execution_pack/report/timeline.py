"""Time counted from the samples' own timestamps: how long each recorded sample stands for.

The report's time figures (GPU-hours, energy from power, seconds throttled, over the OOM threshold,
under the waste threshold, stalled, shared, alerts firing) weight each sample by the gap to the
next one of the same series, never by an interval the config names: the rules may run at another
interval than the config says, the interval may have changed during the span, evaluations may have
been missed, and backfilled history was evaluated at whatever interval its backfill used.

A gap up to ``MAX_FILLED_GAP`` counts in full: missed evaluations within Prometheus' lookback are
time the GPU was still held (its series would still have been current then). A longer gap is lost
telemetry: the sample before it counts as the interval in effect (the last gap counted), as does a
series' last sample. A series with one sample counts ``fallback`` (the group's interval).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence

# Prometheus' default lookback (--query.lookback-delta): a recorded series the rules stop writing
# reads on for as long, so a longer gap between two samples of it is telemetry lost, not an evaluation missed.
MAX_FILLED_GAP = 300.0

Samples = Sequence[Sequence[float]]  # [[unix seconds, value], ...] in time order, as the client returns them


def weights(times: Sequence[float], fallback: float, end: float = math.inf) -> list[float]:
    """Seconds each sample at ``times`` (ascending) stands for: the gap to the next one, up to the cap, and
    never past ``end`` (the span's end: no sample stands for time after it).

    The cap is ``MAX_FILLED_GAP``, or half again the shortest gap where the rules ran slower than that."""
    if len(times) < 2:
        return [max(0.0, min(fallback, end - t)) for t in times]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    cap = max(MAX_FILLED_GAP, 1.5 * min(gaps))
    in_effect = next((g for g in gaps if g <= cap), fallback)
    out = []
    for gap in gaps:
        if gap <= cap:
            in_effect = gap
            out.append(gap)
        else:
            out.append(in_effect)
    out.append(in_effect)
    return [max(0.0, min(w, end - t)) for t, w in zip(times, out, strict=True)]


def seconds(samples: Samples, fallback: float, end: float = math.inf) -> float:
    """How long the series was recorded: its samples' weights summed."""
    return sum(weights([t for t, _ in samples], fallback, end))


def covered(samples: Samples, fallback: float) -> float:
    """How much of the time from its first to its last sample the series covers (gaps over the cap left out)."""
    return sum(weights([t for t, _ in samples], fallback)[:-1])


def integral(samples: Samples, fallback: float, end: float = math.inf) -> float:
    """The series integrated over time: each value times its sample's weight (watts to joules, 0/1 to seconds)."""
    return sum(v * w for (_, v), w in zip(samples, weights([t for t, _ in samples], fallback, end), strict=True))


def seconds_where(samples: Samples, fallback: float, at_least: float, end: float = math.inf) -> float:
    """How long the series was at or above ``at_least``."""
    times = [t for t, _ in samples]
    return sum(w for (_, v), w in zip(samples, weights(times, fallback, end), strict=True) if v >= at_least)


def spread(samples: Samples) -> float:
    """Seconds from the series' first sample to its last."""
    return samples[-1][0] - samples[0][0] if samples else 0.0


class Clock:
    """The evaluations of a group, from a series it records at every evaluation (``times``): what an alert's
    sample stands for, since ALERTS has samples only while it fires and its gaps say nothing of the interval."""

    def __init__(self, times: Sequence[float], fallback: float):
        self.times = sorted(set(times))
        self.weights = weights(self.times, fallback)
        self.fallback = fallback

    def at(self, t: float) -> float:
        """The interval of the evaluation at or just before ``t`` (the last one's after the clock ends)."""
        i = bisect.bisect_right(self.times, t) - 1
        if not self.weights:
            return self.fallback
        return self.weights[max(0, min(i, len(self.weights) - 1))]

    def firing_seconds(self, samples: Samples, end: float = math.inf) -> float:
        """How long a series present only while a condition holds (ALERTS) held it: each sample weighs the gap
        to its next one, at most the group's interval there, and never past ``end``."""
        times = [t for t, _ in samples]
        nexts = [b - a for a, b in itertools.pairwise(times)] + [math.inf]
        return sum(max(0.0, min(gap, self.at(t), end - t)) for t, gap in zip(times, nexts, strict=True))
