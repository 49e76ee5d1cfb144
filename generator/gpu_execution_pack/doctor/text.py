"""The doctor's checklist as text (one line per check, the fix under it) and as JSON."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from .checks import STATUSES, Item, worst

WIDTH = max(len(s) for s in STATUSES)


def render(items: list[Item], where: str) -> str:
    lines = [f"gpu-execution-pack doctor: {where}"]
    check_width = max(len(i.check) for i in items)
    for item in items:
        lines.append(f"  {item.status.upper():<{WIDTH}}  {item.check:<{check_width}}  {item.found}")
        if item.fix and item.status != "pass":  # an info's fix is a choice (a field to enable), still said
            lines.append(f"  {'':<{WIDTH}}  {'':<{check_width}}  -> {item.fix}")
    counts = {s: sum(i.status == s for i in items) for s in STATUSES}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items() if n))
    return "\n".join(lines) + "\n"


def document(items: list[Item], where: str) -> dict[str, Any]:
    return {"prometheus": where, "status": worst(items), "checks": [asdict(i) for i in items]}
