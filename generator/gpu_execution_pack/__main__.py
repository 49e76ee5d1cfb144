"""``python -m generator``: the gpu-execution-pack command."""

import sys

from gpu_execution_pack.cli import main

sys.exit(main())
