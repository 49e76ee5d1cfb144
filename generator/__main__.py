"""``python -m generator``: the gpu-execution-pack command."""

import sys

from generator.cli import main

sys.exit(main())
