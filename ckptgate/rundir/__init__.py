"""The run's bookkeeping on the target: its run directory, the manifest of what it made, its
lease, the host registry of overlapping runs, the bounded janitor, the removal of exactly what
it made, and ``ckptgate verify`` and ``ckptgate clean`` for a kept or dead run. ``target.py``
composes them with a backend (``ckptgate.storage``) into the ``Target`` a session holds."""
