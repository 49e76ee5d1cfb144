"""The config's sections, one module per top-level key of the YAML file (``alerts.py`` for ``alerts:``).

Each module declares its section's keys as a frozen dataclass, every key an ``opt(...)`` with its
default, what it is and why one would change it (``section(...)`` for a nested one), and checks what
its keys alone decide in ``__post_init__``. ``config.schema`` assembles them into ``Config`` and checks
what relates several sections. A new section: its module here, and its line in ``schema.Config``.
"""
