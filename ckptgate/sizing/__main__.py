"""Entry point for ``python -m ckptgate.sizing``."""

import sys

from ckptgate.pipes import quiet_on_closed_pipe
from ckptgate.sizing.cli import main

sys.exit(quiet_on_closed_pipe(main))
