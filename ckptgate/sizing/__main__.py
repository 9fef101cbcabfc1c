"""Entry point for ``python -m ckptgate.sizing``."""

import sys

from ckptgate.sizing.cli import main

sys.exit(main())
