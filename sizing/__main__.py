"""Entry point for ``python -m sizing``."""

import sys

from ckptgate.sizing.cli import main

sys.exit(main())
