"""Live progress on node 0's terminal: one line per running phase, for every node together.

The sampler (``ckptgate.engine.sampler``) hands each new ``NodeProgress`` of this node to
``LiveProgress.update``; the other nodes' latest come from ``peers`` (their heartbeats). A
phase shorter than ``show_after_s`` prints nothing, unless the display has been silent for
``max_silence_s``: a string of short phases (an untimed verification, data generation, a
readback) then shows the one under way, so that no stretch of a run passes without a line. A
phase is timed from when its run began on this node (the ranks may prepare before the common
start: such a line says so). On a terminal the line is redrawn in place every
``tty_every_s``; in a batch log (not a tty) a new line is written every ``batch_every_s``;
either way a phase that printed writes its last line, ``done in ...``, when it ends. Between
runs, the parent's own work (collection, a fixture's set-up, the cleanup) is named by ``tick``
after the same silence. The line reads

    ckptgate: write burst  1.20 GB / 4.00 GB (30.0%)  610 MB/s  ETA 4.59 s  slowest node 1
    global rank 3 (21.0%)  [2 nodes, 16 ranks]

Output goes through ``write_line`` and ``rewrite`` (the plugin passes pytest's terminal
reporter's, with capture suspended), and the clock is injected, so tests need no terminal
and no waiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ckptgate.engine.sampler import NodeProgress, Peers
from ckptgate.sizing.units import format_bytes, format_count, format_rate, format_seconds

SHOW_AFTER_S = 2.0
"""A phase shorter than this prints nothing (a tmpfs CI run stays as quiet as before)."""
TTY_EVERY_S = 0.5
"""How often the redrawn line changes on a terminal."""
BATCH_EVERY_S = 4.0
"""How often a batch log gets a line during one phase (under 5 s with the watch loop's 0.2 s
steps between samples)."""
MAX_SILENCE_S = 3.5
"""How long the display stays silent, across phases, before it shows a phase shorter than
``show_after_s`` (once that phase is ``MIN_AGE_S`` old: with the watch loop's 0.2 s steps and
the parent's work between runs, no gap reaches 5 s)."""
MIN_AGE_S = 0.5
"""A phase this young is never shown (its line would read 0 B at 0 B/s)."""


def _no_peers() -> dict[int, NodeProgress]:
    return {}


def progress_line(parts: Sequence[NodeProgress], since_begin_s: float | None = None) -> str:
    """One line for one phase over ``parts`` (one ``NodeProgress`` per node, node 0 first):
    done of the total, aggregate rate, slowest rank, ETA. ``since_begin_s``, at the end: the
    time since the run began on this node, named beside ``done in`` (timed from the common
    start) where the ranks' preparation before it took ``MIN_AGE_S`` or more."""
    first = parts[0]
    done_bytes = sum(p.bytes for p in parts)
    done_files = sum(p.files for p in parts)
    total_bytes = sum(p.total_bytes for p in parts)
    total_files = sum(p.total_files for p in parts)
    bytes_per_s = sum(p.bytes_per_s for p in parts)
    files_per_s = sum(p.files_per_s for p in parts)
    if total_bytes or (done_bytes and not total_files):
        amount = format_bytes(done_bytes)
        if total_bytes:
            amount += f" / {format_bytes(total_bytes)} ({done_bytes / total_bytes:.1%})"
        rate, left, per_s = format_rate(bytes_per_s), total_bytes - done_bytes, bytes_per_s
    else:
        amount = f"{format_count(done_files)} files"
        if total_files:
            amount = (
                f"{format_count(done_files)} / {format_count(total_files)} files "
                f"({done_files / total_files:.1%})"
            )
        rate, left, per_s = f"{format_count(round(files_per_s))} files/s", 0, files_per_s
        left = total_files - done_files if total_files else 0
    # ETA before the slowest rank: a narrow terminal cuts the redrawn line from the right
    fields = [f"ckptgate: {first.phase}", amount, rate]
    counted = bool(done_bytes or done_files or total_bytes or total_files)
    if not counted:
        # a task that counts nothing (DCP's ranks joining their group): "0 files" says less
        # than nothing; its time says it is under way
        fields = [fields[0]]
        if first.running and first.released:
            fields.append(f"{format_seconds(first.elapsed_s)} so far")
    if first.running and not first.released:
        fields.append(f"before the common start ({format_seconds(first.elapsed_s)})")
    elif first.running and left > 0 and per_s > 0:
        fields.append(f"ETA {format_seconds(left / per_s)}")
    elif not first.running:
        behind = sum(p.running for p in parts[1:])
        if behind:  # node 0's ranks are done; the others' beats lag by up to a beat
            fields.append(
                f"node {first.node} done in {format_seconds(first.elapsed_s)}, "
                f"{behind} other node{'s' if behind != 1 else ''} running at the last beat"
            )
        else:
            done = f"done in {format_seconds(first.elapsed_s)}"
            prepared_s = (since_begin_s or 0.0) - first.elapsed_s
            if first.released and since_begin_s is not None and prepared_s >= MIN_AGE_S:
                done += f" ({format_seconds(since_begin_s)} with the ranks' preparation)"
            fields.append(done)
    slowest = min(
        parts,
        key=lambda p: p.slowest_fraction if p.slowest_fraction is not None else 2.0,
    )
    if slowest.slowest and first.running and counted:  # at the end every rank is done
        where = f"node {slowest.node} " if len(parts) > 1 else ""
        share = f" ({slowest.slowest_fraction:.1%})" if slowest.slowest_fraction is not None else ""
        fields.append(f"slowest {where}{slowest.slowest}{share}")
    ranks = sum(p.ranks for p in parts)
    nodes = f"{len(parts)} nodes, " if len(parts) > 1 else ""
    fields.append(f"[{nodes}{ranks} ranks]")
    return "  ".join(fields)


class LiveProgress:
    """Node 0's live progress line (see the module docstring); ``enabled`` False (``-q``, or
    a node other than 0) prints nothing."""

    def __init__(
        self,
        write_line: Callable[[str], None],
        rewrite: Callable[[str], None],
        *,
        tty: bool,
        enabled: bool = True,
        peers: Peers = _no_peers,
        clock: Callable[[], float] = time.monotonic,
        show_after_s: float = SHOW_AFTER_S,
        tty_every_s: float = TTY_EVERY_S,
        batch_every_s: float = BATCH_EVERY_S,
        max_silence_s: float = MAX_SILENCE_S,
    ) -> None:
        self.write_line = write_line
        self.rewrite = rewrite
        self.tty = tty
        self.enabled = enabled
        self.peers = peers
        self.clock = clock
        self.show_after_s = show_after_s
        self.every_s = tty_every_s if tty else batch_every_s
        self.max_silence_s = max_silence_s
        self._runs: dict[tuple[str, int], _RunShown] = {}
        self._quiet_since: float | None = clock()  # silent since the display began
        self._lock = threading.Lock()

    def update(self, mine: NodeProgress) -> None:
        """This node's newest snapshot of one run (called by a sampler every watch step; the
        contention readers' pool has its own sampler, on another thread, beside the writers')."""
        if not self.enabled:
            return
        with self._lock:
            self._update(mine, self.clock())

    def _update(self, mine: NodeProgress, now: float) -> None:
        if self._quiet_since is None:
            self._quiet_since = now
        key = (mine.phase, mine.nth)
        run = self._runs.get(key)
        if run is None:
            run = self._runs[key] = _RunShown(began_s=now)
        if not mine.released:  # preparing, or an untimed task: its age is the run's
            mine = replace(mine, elapsed_s=now - run.began_s)
        if not mine.running:
            if run.shown:
                self._show(self._line(mine, since_begin_s=now - run.began_s), run, final=True)
            del self._runs[key]
            return
        age_s = max(now - run.began_s, mine.elapsed_s)
        quiet_s = now - self._quiet_since
        if run.shown and now - run.last_shown_s < self.every_s:
            return
        too_soon = quiet_s < self.max_silence_s or age_s < MIN_AGE_S
        if not run.shown and age_s < self.show_after_s and too_soon:
            return
        self._show(self._line(mine), run, final=False)

    def heard(self) -> None:
        """Something else was printed (pytest's own progress): the silence starts again."""
        with self._lock:
            self._quiet_since = self.clock()

    def tick(self, activity: str, since_s: float, write: Callable[[str], bool]) -> bool:
        """The parent's own work, outside any rank pool's run (collecting, a fixture's set-up
        between runs, the cleanup at the end): once the display has been silent for
        ``max_silence_s``, a line naming ``activity`` and how long it has taken since
        ``since_s`` (this display's clock), through ``write`` (a thread's: it may decline,
        returning False). Nothing while a run is under way: its own line speaks. Returns
        whether it printed."""
        if not self.enabled:
            return False
        with self._lock:
            now = self.clock()
            if self._quiet_since is None:
                self._quiet_since = now
            if self._runs or now - self._quiet_since < self.max_silence_s:
                return False
            if not write(f"ckptgate: {activity}  {format_seconds(now - since_s)} so far"):
                return False
            self._quiet_since = self.clock()
            return True

    def _line(self, mine: NodeProgress, since_begin_s: float | None = None) -> str:
        others = [
            p
            for node, p in sorted(self.peers().items())
            if node != mine.node and (p.phase, p.nth) == (mine.phase, mine.nth)
        ]
        return progress_line([mine, *others], since_begin_s)

    def _show(self, line: str, run: _RunShown, final: bool) -> None:
        if not self.tty:
            self.write_line(line)
        else:
            self.rewrite(line)
            if final:
                self.write_line("")  # the phase's last line stays; pytest goes on below
        run.shown = True
        run.last_shown_s = self._quiet_since = self.clock()


@dataclass
class _RunShown:
    """What the display did for one run under way: when it began here, whether it printed."""

    began_s: float
    shown: bool = False
    last_shown_s: float = 0.0
