"""GlusterFS on one machine: glusterd and its bricks in a network namespace of their own.

The storage teams that self-host checkpoints also buy: a GlusterFS server (Debian's
``glusterfs-server``; glusterd, one ``glusterfsd`` per brick) in a namespace on the host bed's
bridge, two volumes, and the FUSE client (``glusterfs``, Debian's ``glusterfs-client``) of
each volume on every client host. Built on the host bed's namespace machinery
(``tests.beds.hosts``: the bridge, the hosts, ``run``/``popen``/``mpirun``, the bounded
teardown); where root or a package is missing, :func:`gluster_bed` skips the calling test and
says why.

Layout (198.18.0.0/24, no route out; the bridge in a namespace of its own)::

    gluster 198.18.0.40   glusterd (port 24007) and the bricks' glusterfsd (49152 up), in
                          their own network and mount namespaces
    head    198.18.0.2    where ``mpirun`` and ``srun`` run
    node<i> 198.18.0.<10+i>  a client: volume ``dist`` at /ckpt/dist and ``replica`` at
                          /ckpt/replica through glusterfs, in its own mount and UTS namespaces

Volumes (``VOLUMES``): ``dist``, distributed over two bricks (each file on one of them: a
brick's death takes its files), and ``replica``, replica 2 (every file on both bricks; one may
die). Every brick is a directory of a tmpfs that exists only in the server's mount namespace
(memory-backed, gone with it); both volumes' bricks are on the one server, so the replica is
created with ``force`` (Gluster refuses a replica set on one host without it, and warns of
split-brain on replica 2: ``--mode=script`` answers its questions). The server's namespace has
its own tmpfs at ``/run`` (glusterd's socket, its pid files and the bricks') and the bed's
state directory bound at ``/var/lib/glusterd`` and ``/var/log/glusterfs``: nothing of this
machine's own GlusterFS state is read or written, and glusterd's state and every log are
readable from outside (``bed.state``).

API::

    with gluster_bed(clients=2, client_options={"node1": ["--attribute-timeout=600"]}) as bed:
        bed.hosts                        # the HostBed: run, popen, mpirun, link_down, stop...
        bed.mount_point("dist")          # "/ckpt/dist" on every client
        bed.gluster("volume", "info")    # the gluster CLI (--mode=script), in the server
        bed.set_option("replica", "performance.io-cache", "on")   # gluster volume set
        bed.graph("node0", "replica")    # the client's active volfile (its .meta)
        bed.brick_pids("replica")        # {brick path: pid of its glusterfsd}
        bed.kill_brick("replica", 1)     # SIGKILL that brick's glusterfsd
        bed.start_force("replica")       # gluster volume start replica force; bricks up
        bed.wait_connected("replica")    # every client connected to every brick again
        bed.client_path("node1", "replica", "x")  # that client's view, through /proc/PID/root
        bed.brick_read_bytes("replica")  # bytes the volume's bricks have read (rchar)

Teardown is the host bed's: every process in the bed's namespaces killed (glusterd, the bricks,
the self-heal daemon and the clients: killing a glusterfs client ends its FUSE connection),
the namespaces deleted, the state directory removed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ckptgate.storage.glusterfs import VOLFILE
from tests.beds import bed_missing
from tests.beds.hosts import (
    HEAD,
    BedOnHosts,
    Host,
    _add_client_hosts,
    _add_host,
    _client_namespaces,
    _running,
    _sh,
    _wait,
    add_server_host,
    bed_frame,
    bed_lacks,
    wait_for,
    write_agent,
)

TOOLS = ("ip", "unshare", "nsenter", "glusterd", "gluster", "glusterfs", "glusterfsd")
PACKAGES = "glusterfs-server glusterfs-client iproute2 util-linux"
SERVER = "gluster"
SERVER_ADDRESS = "198.18.0.40"
BRICKS_ROOT = "/run/bricks"
"""The server's tmpfs of bricks, in its own mount namespace."""
BRICKS_BYTES = 3 << 30
"""The bricks' tmpfs size: room for both volumes' checkpoints (memory, used as written)."""
VOLUMES: dict[str, tuple[str, ...]] = {
    "dist": (),
    "replica": ("replica", "2"),
}
"""Each volume and its ``gluster volume create`` layout words; two bricks each."""
BRICKS_PER_VOLUME = 2
MOUNT_ROOT = "/ckpt"
START_S = 60.0
"""Each step of the start (glusterd answering, a volume started, a client mounted) must end
within this: generous, for a busy 2-core machine; glusterd comes up in about 3 s."""


REAPER = (
    "import ctypes, os, sys\n"
    "ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER\n"
    "if os.fork() == 0:\n"
    "    os.execvp(sys.argv[1], sys.argv[1:])\n"
    "while True:\n"
    "    try:\n"
    "        os.wait()\n"
    "    except ChildProcessError:\n"
    "        break\n"
)
"""glusterd's parent: a subreaper that reaps every process glusterd leaves (the bricks
daemonize, so their parent is the nearest subreaper, else the machine's pid 1). On this
project's machine, whose pid 1 is not an init that reaps at once, a killed brick stayed a
zombie for over a minute, glusterd took its pid file's process for alive, and ``volume start
force`` started nothing."""


def brick_path(volume: str, index: int) -> str:
    return f"{BRICKS_ROOT}/{volume}{index}"


@dataclass
class GlusterBed(BedOnHosts):
    """glusterd, its bricks and the clients; see the module docstring for the API."""

    clients_options: dict[str, list[str]] = field(default_factory=dict)
    daemons: dict[str, subprocess.Popen[str]] = field(default_factory=dict)

    @staticmethod
    def mount_point(volume: str) -> str:
        """Where ``volume`` is mounted on every client."""
        return f"{MOUNT_ROOT}/{volume}"

    # The server

    def gluster(self, *args: str, timeout_s: float = START_S) -> str:
        """The gluster CLI in the server's namespaces (``--mode=script``: no questions); its
        stdout; RuntimeError where it fails."""
        argv = ["gluster", "--mode=script", *args]
        return _sh(self.hosts.command(SERVER, argv), timeout_s=timeout_s)

    def set_option(self, volume: str, key: str, value: str) -> None:
        """``gluster volume set`` (a started volume's clients switch to the new graph by
        themselves, a moment later)."""
        self.gluster("volume", "set", volume, key, value)

    def brick_pids(self, volume: str) -> dict[str, int]:
        """Each running brick of ``volume`` and its glusterfsd's pid, found among the server's
        processes by the ``--brick-name`` glusterd started it with."""
        wanted = {brick_path(volume, i) for i in range(BRICKS_PER_VOLUME)}
        found: dict[str, int] = {}
        for pid in self.hosts.pids(SERVER):
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
                if "--brick-name" in argv and _running(pid):
                    brick = argv[argv.index("--brick-name") + 1]
                    if brick in wanted:
                        found[brick] = pid
        return found

    def kill_brick(self, volume: str, index: int) -> int:
        """SIGKILL brick ``index`` of ``volume`` (its glusterfsd); wait until it is gone;
        return its pid."""
        path = brick_path(volume, index)
        pid = self.brick_pids(volume)[path]
        os.kill(pid, signal.SIGKILL)
        _wait(lambda: not _running(pid), START_S, f"brick {path} gone")
        return pid

    def start_force(self, volume: str) -> None:
        """``gluster volume start VOLUME force``: every brick that is down starts again; wait
        until each runs and every client is connected to it."""
        self.gluster("volume", "start", volume, "force")
        self.wait_bricks(volume)
        self.wait_connected(volume)

    def wait_bricks(self, volume: str) -> None:
        """Wait (bounded) until every brick of ``volume`` runs."""
        _wait(
            lambda: len(self.brick_pids(volume)) == BRICKS_PER_VOLUME,
            START_S,
            f"every brick of {volume} running",
        )

    def wait_connected(self, volume: str) -> None:
        """Wait (bounded) until every client's connection to every brick of ``volume`` is up
        (``connected = 1`` in each protocol/client translator's ``.meta`` private dump): a
        restarted brick is reconnected to by the clients a few seconds later."""

        def connected() -> bool:
            graphs = [self.client_path(c, volume, ".meta/graphs/active") for c in self.clients]
            return all(
                "connected = 1" in (graph / f"{volume}-client-{i}" / "private").read_text()
                for graph in graphs
                for i in range(BRICKS_PER_VOLUME)
            )

        _wait(connected, START_S, f"every client connected to every brick of {volume}")

    def brick_read_bytes(self, volume: str) -> int:
        """Bytes the running bricks of ``volume`` have read through system calls (``rchar``
        of each glusterfsd: the bricks' file reads, plus the small requests they receive):
        compare two readings around a client's read to see what the servers served."""
        total = 0
        for pid in self.brick_pids(volume).values():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/io").read_text().splitlines():
                    if line.startswith("rchar:"):
                        total += int(line.split()[1])
        return total

    # The clients

    def client_pid(self, client: str, volume: str) -> int:
        return self.daemons[f"{client}.{volume}"].pid

    def client_path(self, client: str, volume: str, path: str = "") -> Path:
        """``path`` under ``volume``'s mount as ``client`` sees it, from this namespace
        (through its glusterfs process's ``/proc/PID/root``): for a healthy mount."""
        root = f"/proc/{self.client_pid(client, volume)}/root{self.mount_point(volume)}"
        return Path(root, path.lstrip("/"))

    def graph(self, client: str, volume: str) -> str:
        """The client's active graph of ``volume`` (``.meta/graphs/active/volfile``)."""
        return self.client_path(client, volume, VOLFILE).read_text()

    def _mount(self, host: Host, volume: str) -> None:
        """Start ``host``'s glusterfs client of ``volume`` (foreground, its log in the state
        directory) and wait until it is mounted."""
        name = f"{host.name}.{volume}"
        argv = [
            "glusterfs", "-N", f"--volfile-server={SERVER_ADDRESS}", f"--volfile-id={volume}",
            f"--log-file={self.state}/log/client-{name}.log", "--log-level=WARNING",
            *self.clients_options.get(host.name, []), self.mount_point(volume),
        ]  # fmt: skip
        with (self.state / "log" / f"client-{name}.out").open("w") as log:
            self.daemons[name] = self.hosts.popen(
                host.name, argv, stdout=log, stderr=subprocess.STDOUT
            )

        def mounted() -> bool:
            if self.daemons[name].poll() is not None:
                raise RuntimeError(f"gluster bed: glusterfs for {name} exited")
            done = self.hosts.run(host.name, ["cat", "/proc/self/mountinfo"])
            return any(
                line.split()[4] == self.mount_point(volume) and "fuse.glusterfs" in line
                for line in done.stdout.splitlines()
            )

        try:
            _wait(mounted, START_S, f"glusterfs mounted {volume} on {host.name}")
        except RuntimeError as error:
            client_log = self.state / "log" / f"client-{name}.log"
            exists = client_log.exists()
            tail = client_log.read_text(errors="replace")[-2000:] if exists else ""
            raise RuntimeError(f"{error}; its log ends:\n{tail}") from None


def _missing() -> str | None:
    """Why this machine cannot hold a GlusterFS bed, or None."""
    reason = bed_lacks(
        "gluster", "network and mount namespaces, glusterd", TOOLS, PACKAGES, "the glusterfs client"
    )
    if reason:
        return reason
    absent = [d for d in ("/var/lib/glusterd", "/var/log/glusterfs") if not os.path.isdir(d)]
    if absent:
        return f"the gluster bed needs {', '.join(absent)} (glusterfs-server makes them)"
    return None


def _server(bed: GlusterBed, token: str) -> None:
    """The server's network and mount namespaces, glusterd in them, answering."""
    state = bed.state
    server = add_server_host(bed.hosts, SERVER, SERVER_ADDRESS, f"ckg-{token}-{SERVER}")
    for folder in ("lib", "log"):
        (state / folder).mkdir()
    # The binds first: the state directory is under /run, which the next tmpfs hides.
    inside = [
        ["mount", "--bind", str(state / "lib"), "/var/lib/glusterd"],
        ["mount", "--bind", str(state / "log"), "/var/log/glusterfs"],
        ["mount", "-t", "tmpfs", "-o", "mode=0755", "ckptgluster-run", "/run"],
        ["mkdir", BRICKS_ROOT, "/run/gluster"],
        ["mount", "-t", "tmpfs", "-o", f"size={BRICKS_BYTES},mode=0755", "ckptgluster-bricks",
         BRICKS_ROOT],
    ]  # fmt: skip
    for argv in inside:
        _sh([*server.nsenter(), *argv])
    glusterd = [
        sys.executable, "-c", REAPER,
        "glusterd", "-N", "--log-level=WARNING", "--log-file=/var/log/glusterfs/glusterd.log",
    ]  # fmt: skip
    with (state / "log" / "glusterd.out").open("w") as log:
        bed.daemons["glusterd"] = bed.hosts.popen(
            SERVER, glusterd, stdout=log, stderr=subprocess.STDOUT
        )

    def answers() -> bool:
        if bed.daemons["glusterd"].poll() is not None:
            tail = (state / "log" / "glusterd.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"gluster bed: glusterd exited; its log ends:\n{tail}")
        done = bed.hosts.run(SERVER, ["gluster", "--mode=script", "volume", "list"], timeout_s=20)
        return done.returncode == 0

    _wait(answers, START_S, "glusterd answering")


def _volumes(bed: GlusterBed, options: Mapping[str, Mapping[str, str]]) -> None:
    """Create and start every volume of ``VOLUMES``, with ``options`` set before the start."""
    for volume, layout in VOLUMES.items():
        bricks = [f"{SERVER_ADDRESS}:{brick_path(volume, i)}" for i in range(BRICKS_PER_VOLUME)]
        bed.gluster("volume", "create", volume, *layout, "transport", "tcp", *bricks, "force")
        for key, value in options.get(volume, {}).items():
            bed.set_option(volume, key, value)
        bed.gluster("volume", "start", volume)
        bed.wait_bricks(volume)


def _client(bed: GlusterBed, host: Host) -> None:
    """``host``'s mount and UTS namespaces, a mount point per volume under the read-only
    underlay, and each volume mounted there."""
    _client_namespaces(bed.hosts, host)
    made = ["mount", "-o", "remount,rw", MOUNT_ROOT]
    _sh([*host.nsenter(), *made])
    _sh([*host.nsenter(), "mkdir", *(bed.mount_point(v) for v in VOLUMES)])
    _sh([*host.nsenter(), "mount", "-o", "remount,ro", MOUNT_ROOT])
    for volume in VOLUMES:
        bed._mount(host, volume)


@contextlib.contextmanager
def gluster_bed(
    clients: int = 1,
    client_options: Mapping[str, Sequence[str]] | None = None,
    volume_options: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[GlusterBed]:
    """A GlusterFS server with the volumes of ``VOLUMES`` (``volume_options``: volume ->
    {option: value}, set before the start), mounted on ``clients`` clients (``node0``...), each
    client's glusterfs given its ``client_options`` (``--attribute-timeout=600``...).

    Skips the calling test, saying why, where the machine cannot hold one; tears everything
    down on the way out, after a failure too (and fails the test if teardown left anything).
    """
    reason = _missing()
    if reason:
        bed_missing("gluster", reason)
    if not 1 <= clients <= 20:
        raise ValueError(f"clients must be 1 to 20, not {clients}")
    with bed_frame("gluster", "ckptgluster", "ckg", MOUNT_ROOT) as (hosts, token, _):
        options = {name: list(values) for name, values in (client_options or {}).items()}
        bed = GlusterBed(hosts=hosts, clients_options=options)
        _server(bed, token)
        _volumes(bed, volume_options or {})
        _add_host(hosts, Host(HEAD, "198.18.0.2", f"ckg-{token}-{HEAD}"))
        _add_client_hosts(hosts, clients, f"ckg-{token}", hosts.state)
        for name in hosts.clients:
            _client(bed, hosts.hosts[name])
        for volume in VOLUMES:
            bed.wait_connected(volume)
        write_agent(hosts)
        yield bed


__all__ = ["VOLUMES", "GlusterBed", "brick_path", "gluster_bed", "wait_for"]
