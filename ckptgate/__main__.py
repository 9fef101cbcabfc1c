"""``python -m ckptgate``: the ``ckptgate`` command."""

import sys

from ckptgate.cli import main

sys.exit(main())
