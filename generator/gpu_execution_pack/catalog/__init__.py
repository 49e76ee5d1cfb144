"""The catalog: the domain model every other layer reads, and the one place that names exporter metrics.

It sits at the bottom of the package beside ``promql`` and imports nothing above it:

- ``labels``: the contract's labels on recorded series, and how exporters and Kubernetes spell theirs;
- ``units``: how an exporter's unit converts to the base unit we record (``UNITS``);
- ``signals``: one logical measurement each (``SIGNALS``), with the raw metric every exporter
  generation emits for it;
- ``series``: every recorded series (name, labels, unit, formulas over signals), grouped by level
  (``GPU_SERIES``, ``NODE_SERIES``, ``EXECUTION_SERIES``, ...); ``API_SERIES`` are the endpoint's.

Read it as ``from gpu_execution_pack import catalog; catalog.GPU_POWER``: this module re-exports every
public name of the four, so a new series or signal is one edit, in its own module.
"""

from __future__ import annotations

# Every public name of each module (none sets __all__): a new series or signal needs no edit here.
from .labels import *  # noqa: F403
from .series import *  # noqa: F403
from .signals import *  # noqa: F403
from .units import *  # noqa: F403
