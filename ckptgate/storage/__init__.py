"""The backends: one table of I/O operations (``operations.py``), its POSIX and fsspec
implementations, the registry that picks one, and what a filesystem or object store says about
itself. The run's own bookkeeping on the target is ``ckptgate.rundir``."""
