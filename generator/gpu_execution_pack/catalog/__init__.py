"""The catalog: the domain model every other layer reads, and the one place that names exporter metrics.

It sits at the bottom of the package beside ``promql`` and imports nothing above it:

- ``labels``: the contract's labels on recorded series, and how exporters and Kubernetes spell theirs;
- ``units``: how an exporter's unit converts to the base unit we record (``UNITS``);
- ``signals``: one logical measurement each (``SIGNALS``), with the raw metric every exporter
  generation emits for it;
- ``series``: every recorded series (name, labels, unit, formulas over signals), grouped by level
  (``GPU_SERIES``, ``NODE_SERIES``, ``EXECUTION_SERIES``, ...); ``API_SERIES`` are the endpoint's.

Read it as ``from gpu_execution_pack import catalog; catalog.GPU_POWER``: this module re-exports every
public name the four define, so a new series or signal is one edit, in its own module.
"""

from __future__ import annotations

from types import ModuleType as _ModuleType

from . import labels as _labels
from . import series as _series
from . import signals as _signals
from . import units as _units

# Every public name of each module (none sets __all__): a new series or signal needs no edit here.
from .labels import *  # noqa: F403
from .series import *  # noqa: F403
from .signals import *  # noqa: F403
from .units import *  # noqa: F403


def _defined_here(value: object) -> bool:
    """Whether a module-level value is the catalog's own: a constant, or a class, function or instance of the
    catalog's; not a module or what it imports from promql, dataclasses, typing or __future__."""
    if isinstance(value, _ModuleType):
        return False
    owner = getattr(value, "__module__", None)
    return owner is None or owner.startswith(__name__ + ".")


# What the star imports above may bring: the four modules' own public names, nothing they import.
__all__ = sorted(
    {
        name
        for module in (_labels, _units, _signals, _series)
        for name, value in vars(module).items()
        if not name.startswith("_") and _defined_here(value)
    }
)
# The star imports above also bound what the modules import (match, selector, dataclass, ...): unbind
# them, so that no reader leans on the catalog for a PromQL helper.
for _name in [n for n in vars() if not n.startswith("_") and n not in __all__]:
    if not isinstance(globals()[_name], _ModuleType) or _name == "math":  # the submodules stay
        del globals()[_name]
