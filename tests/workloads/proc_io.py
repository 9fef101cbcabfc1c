"""What a rank process's system calls moved, as the kernel counts it (``/proc/PID/io``)."""

from __future__ import annotations

from pathlib import Path


def io_bytes(pids: list[int], counter: str) -> int:
    """The sum over ``pids`` of ``counter``: ``wchar`` (bytes passed to write calls) or
    ``rchar`` (bytes read calls returned), whatever the storage beneath did with them."""
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith(f"{counter}:"):
                total += int(line.split()[1])
    return total
