"""The runs that several checks share: the write campaign's rounds (``write.py``: items 1, 3
and 5 judge them, and the restart, contention and DCP checks reuse them), the scaling sweep
(``sweep.py``), and what every check gets from the run (``context.py``). They measure; the
judgements are the checks' (``ckptgate.checks``)."""
