"""ckptgate: storage acceptance for large-model training checkpoints.

The cluster profile's arithmetic is in ``ckptgate.sizing``; the pytest plugin (``pytest11``
entry point) in ``ckptgate.fixtures``; the checklist's test modules in ``ckptgate.acceptance``.
``docs/ARCHITECTURE.md`` maps every folder to its job.
"""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """``ckptgate.__version__``, read on first use: importing ``ckptgate.sizing`` stays pure
    (``importlib.metadata`` pulls in ``email`` and ``socket``)."""
    if name != "__version__":
        raise AttributeError(name)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ckptgate")
    except PackageNotFoundError:  # a checkout that was never installed
        return "0+unknown"
