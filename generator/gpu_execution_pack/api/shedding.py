"""Load shedding: requests that ask Prometheus share a budget of points in flight, and the process a memory bound.

Each such request takes ``BASE_WEIGHT`` points on arrival (the span lookup), a report
``REPORT_WEIGHT``; a metrics request, once its window is known, its points per series (at most
``metrics.STREAM_POINTS``: a stream counts as the largest document built in memory) times the series
it asks for. What does not fit is answered at once (429, ``Retry-After``) instead of queueing
towards the deadline; while the process's resident memory is over ``api.max_memory_mb``, new work
is refused (503) as long as some is in flight, and so is work in flight whose answer from Prometheus is
still growing (``reading_more``): requests admitted together could each read up to ``api.max_answer_mb``.
Alone, a request always runs, and so does the oldest request holding points when it asks for more (or
reads on): otherwise two requests admitted together could each be
refused their window because of the other, and a burst would answer nothing but 429.
When the last request in flight ends after a large one, freed memory is handed back to the system
(``gc`` and glibc's ``malloc_trim``), since glibc otherwise keeps a burst's peak resident.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import logging
import os
from contextvars import ContextVar

from gpu_execution_pack.query.params import RequestError

BASE_WEIGHT = 2_000  # points every request that asks Prometheus holds (about a day at 1 m, one series)
# What a report (an execution's summary, the fleet view) holds: its *_over_time queries read whole spans,
# as heavy for Prometheus as a long window's document (measured: bench/burst.py, docs/api-limits.md).
REPORT_WEIGHT = 100_000
TRIM_AFTER_POINTS = 200_000  # past this many points served since the last trim, trim when idle
log = logging.getLogger("gpu_execution_pack.api")


def resident_bytes() -> int | None:
    """This process's resident memory (Linux's /proc), None where it cannot be read."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _malloc_trim() -> None:
    """glibc's ``malloc_trim(0)``: free pages at the top of the heap and inside it go back to the system."""
    name = ctypes.util.find_library("c")
    with contextlib.suppress(OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim this way
        ctypes.CDLL(name).malloc_trim(0)


class Shedder:
    """The points in flight in this process (each worker has its own) and the memory bound."""

    def __init__(self, max_points: int, max_memory_bytes: int, retry_after_seconds: int):
        self.capacity = max_points
        self.max_memory_bytes = max_memory_bytes
        self.retry_after = str(retry_after_seconds)
        self.in_flight = 0
        self.served_since_trim = 0
        self.holding: dict[int, None] = {}  # the tickets holding points, oldest first (insertion order)
        self.tickets = 0  # tickets handed out, for their numbers

    def refuse(self, status: int, why: str) -> RequestError:
        return RequestError(
            status, f"{why}; retry after {self.retry_after} s", headers={"Retry-After": self.retry_after}
        )

    def number(self) -> int:
        """A new ticket's number: later tickets, higher numbers."""
        self.tickets += 1
        return self.tickets

    def oldest(self, ticket: int) -> bool:
        """Whether ``ticket`` has held points longest of those holding any."""
        return next(iter(self.holding), None) == ticket

    def take(self, points: int, held: int = 0, ticket: int = 0) -> int:
        """Admit ``points`` more for request ``ticket``, already holding ``held``; what was taken (capped so that
        no request holds more than the capacity: any one request can run alone). Else the 429 or 503 saying why.
        The oldest request holding points is always admitted more, so a burst always finishes one request."""
        weight = max(0, min(points, self.capacity - held))
        if self.in_flight > held and not (held and self.oldest(ticket)):  # others are in flight
            if self.in_flight + weight > self.capacity:
                raise self.refuse(
                    429, f"busy: {self.in_flight} of {self.capacity} points in flight (api.max_points_in_flight)"
                )
            resident = resident_bytes()
            if resident is not None and resident > self.max_memory_bytes:
                raise self.refuse(503, f"busy: memory over {self.max_memory_bytes // 2**20} MB (api.max_memory_mb)")
        self.in_flight += weight
        if weight:
            self.holding.setdefault(ticket)
        return weight

    def check_memory(self, ticket: int) -> None:
        """The 503 ``take`` answers past the memory bound, for request ``ticket`` already running whose answer from
        Prometheus is growing: admitted together, many requests could each read up to api.max_answer_mb at once.
        As in ``take``, a request alone goes on, and so does the oldest of those holding points."""
        if len(self.holding) > (ticket in self.holding) and not self.oldest(ticket):  # others are in flight
            resident = resident_bytes()
            if resident is not None and resident > self.max_memory_bytes:
                raise self.refuse(503, f"busy: memory over {self.max_memory_bytes // 2**20} MB (api.max_memory_mb)")

    def give_back(self, weight: int, ticket: int = 0) -> None:
        """Release ``weight`` points; the last request out trims memory after enough was served."""
        self.holding.pop(ticket, None)
        self.in_flight -= weight
        self.served_since_trim += weight
        if self.in_flight == 0 and self.served_since_trim >= TRIM_AFTER_POINTS:
            self.served_since_trim = 0
            gc.collect()
            _malloc_trim()


class Ticket:
    """One request's share of a :class:`Shedder`: taken in steps, given back once (``release``)."""

    def __init__(self, shedder: Shedder):
        self.shedder = shedder
        self.weight = 0
        self.number = shedder.number()

    def take(self, points: int) -> None:
        """Hold ``points`` in all (only what is more than already held is taken)."""
        if points > self.weight:
            self.weight += self.shedder.take(points - self.weight, self.weight, self.number)

    def release(self) -> None:
        weight, self.weight = self.weight, 0
        if weight:
            self.shedder.give_back(weight, self.number)


# The ticket of the request the current task works for (set by the route, inherited by the tasks it starts): what
# the Prometheus client's reading of an answer is checked against (``reading_more``).
CURRENT: ContextVar[Ticket | None] = ContextVar("ticket", default=None)


def reading_more() -> None:
    """Called by the Prometheus client as an answer it reads grows: the 503 of ``Shedder.check_memory`` for the
    current request, if any."""
    ticket = CURRENT.get()
    if ticket is not None:
        ticket.shedder.check_memory(ticket.number)
