"""MooseFS on one machine: a master and two chunkservers, each in a network namespace of its own.

The other self-hosted filesystem the storage teams buy: Debian's ``moosefs-master`` (one
``mfsmaster``, holding all metadata), ``moosefs-chunkserver`` (two ``mfschunkserver``, each
with one memory-backed disk) and ``moosefs-client`` (``mfsmount``, a FUSE client with its own
data cache policy, ``mfscachemode``) on every client host. Built on the host bed's namespace
machinery (``tests.beds.hosts``: the bridge, the hosts, ``run``/``popen``/``mpirun``, the
bounded teardown); where root or a package is missing, :func:`moosefs_bed` skips the calling
test and says why.

Layout (198.18.0.0/24, no route out; the bridge in a namespace of its own)::

    mfsmaster 198.18.0.50   mfsmaster (9419 metaloggers, 9420 chunkservers, 9421 clients)
    chunk0    198.18.0.51   mfschunkserver (9422), its disk a tmpfs in its own mount namespace
    chunk1    198.18.0.52   the same
    head      198.18.0.2    where ``mpirun`` and ``srun`` run
    node<i>   198.18.0.<10+i>  a client: the filesystem's root at /ckpt through mfsmount

Directories (``GOALS``): ``/ckpt/goal1`` (goal 1: each chunk on one chunkserver; its death
takes those chunks) and ``/ckpt/goal2`` (goal 2: every chunk on both; one may die), set with
``mfssetgoal`` (in 3.0 a goal N is the storage class named N). Every daemon's configuration,
the master's metadata and every log are in the bed's state directory (``bed.state``): nothing
of this machine's own MooseFS state is read or written. A chunkserver's disk is a tmpfs that
exists only in its mount namespace (memory-backed, gone with it).

API::

    with moosefs_bed(clients=2, client_options={"node1": ["mfscachemode=YES"]}) as bed:
        bed.hosts                        # the HostBed: run, popen, mpirun, link_down, stop...
        bed.target(2)                    # "/ckpt/goal2" on every client
        bed.tool("node0", "mfsgetgoal", "/ckpt/goal2")   # a client tool, on that client
        bed.kill_chunkserver(1)          # SIGKILL chunk1's mfschunkserver
        bed.start_chunkserver(1)         # start it again (its tmpfs kept); wait registered
        bed.stop_master() / bed.cont_master()   # SIGSTOP / SIGCONT the master
        bed.client_path("node1", "goal2/x")     # that client's view, through /proc/PID/root
        bed.chunk_read_bytes()           # bytes the chunkservers have read (rchar)

Teardown is the host bed's: every process in the bed's namespaces killed (the master, the
chunkservers and the clients: killing an mfsmount ends its FUSE connection), the namespaces
deleted, the state directory removed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
    write_agent,
)

TOOLS = ("ip", "unshare", "nsenter", "mfsmaster", "mfschunkserver", "mfsmount", "mfssetgoal")
PACKAGES = "moosefs-master moosefs-chunkserver moosefs-client iproute2 util-linux"
MASTER = "mfsmaster"
MASTER_ADDRESS = "198.18.0.50"
CHUNKSERVERS = ("chunk0", "chunk1")
EMPTY_METADATA = "/var/lib/mfs/metadata.mfs.empty"
DISK_BYTES = 6 << 30
"""Each chunkserver's tmpfs (memory, used as written). At 2 GiB each the restart read's second
round of writes (a 224 MB checkpoint, goal 2) failed with ENOSPC from mfsmount, the disks far
from full: the master stops handing out new 64 MiB chunks well before; 6 GiB does not."""
MOUNT_ROOT = "/ckpt"
GOALS = (1, 2)
START_S = 60.0
"""Each step of the start (the master answering, a chunkserver registered, a client mounted)
must end within this: generous, for a busy 2-core machine."""
IO_RETRIES = 3
"""mfsmount's retries of an I/O that fails (30 by default, a minute and more of backoff): a
chunk whose only copy died fails its write with EIO within seconds, named."""
LEAVE_SPACE = "16MiB"
"""What a chunkserver keeps free on its disk (256 MiB by default: an eighth of the tmpfs)."""


def chunkserver_address(index: int) -> str:
    return f"198.18.0.{51 + index}"


def _cfg(settings: Mapping[str, str]) -> str:
    return "".join(f"{key} = {value}\n" for key, value in settings.items())


@dataclass
class MooseBed(BedOnHosts):
    """The master, the chunkservers and the clients; see the module docstring for the API."""

    client_options: dict[str, list[str]] = field(default_factory=dict)
    daemons: dict[str, subprocess.Popen[str]] = field(default_factory=dict)

    @staticmethod
    def target(goal: int) -> str:
        """The directory of ``goal`` (``GOALS``), the same on every client."""
        return f"{MOUNT_ROOT}/goal{goal}"

    def tool(self, client: str, *argv: str, timeout_s: float = START_S) -> str:
        """A MooseFS client tool (``mfsgetgoal``...) on ``client``; its stdout."""
        return _sh(self.hosts.command(client, list(argv)), timeout_s=timeout_s)

    # The servers

    def _daemon(self, host: str, argv: list[str]) -> None:
        with (self.state / "log" / f"{host}.out").open("a") as log:
            self.daemons[host] = self.hosts.popen(host, argv, stdout=log, stderr=subprocess.STDOUT)

    def log_tail(self, host: str) -> str:
        return (self.state / "log" / f"{host}.out").read_text(errors="replace")[-2000:]

    def start_chunkserver(self, index: int) -> None:
        """Start chunkserver ``index`` (its disk as it was left); wait until it runs and the
        clients can write to it again (the master has it)."""
        name = CHUNKSERVERS[index]
        before = self._registrations(index)
        argv = ["mfschunkserver", "-f", "-c", str(self.state / f"{name}.cfg"), "start"]
        self._daemon(name, argv)
        _wait(lambda: self._listening(name, 9422), START_S, f"{name} listening")
        _wait(lambda: self._registrations(index) > before, START_S, f"{name} registered")

    def _registrations(self, index: int) -> int:
        """How often the master has registered chunkserver ``index`` (its log's ``register
        end`` lines)."""
        log = (self.state / "log" / f"{MASTER}.out").read_text(errors="replace")
        line = f"chunkserver register end (packet version: 6) - ip: {chunkserver_address(index)} "
        return log.count(line)

    def wait_space(self, client: str) -> None:
        """Wait until ``client`` sees every chunkserver's disk (the master learns a disk's size
        a moment after the chunkserver registers; a write before that finds no space)."""
        wanted = len(CHUNKSERVERS) * (DISK_BYTES - (64 << 20))

        def sized() -> bool:
            stats = os.statvfs(self.client_path(client))
            return stats.f_blocks * stats.f_frsize >= wanted

        _wait(sized, START_S, f"{client} seeing both chunkservers' disks")

    def _listening(self, host: str, port: int) -> bool:
        daemon = self.daemons[host]
        if daemon.poll() is not None:
            raise RuntimeError(f"moosefs bed: {host} exited; it said:\n{self.log_tail(host)}")
        done = self.hosts.run(host, ["ss", "-Hltn", f"sport = :{port}"], timeout_s=10)
        return f":{port}" in done.stdout

    def kill_chunkserver(self, index: int) -> int:
        """SIGKILL chunkserver ``index``; wait until it is gone; return its pid."""
        daemon = self.daemons[CHUNKSERVERS[index]]
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(timeout=START_S)
        return daemon.pid

    def stop_master(self) -> None:
        """SIGSTOP the master: it holds every lookup, open and chunk location, so clients
        block (a hung metadata server, not a dead one)."""
        os.kill(self.daemons[MASTER].pid, signal.SIGSTOP)

    def cont_master(self) -> None:
        os.kill(self.daemons[MASTER].pid, signal.SIGCONT)

    def chunk_read_bytes(self) -> int:
        """Bytes the running chunkservers have read through system calls (``rchar``: their
        chunk reads, plus the small requests they receive): compare two readings around a
        client's read to see what the servers served."""
        total = 0
        for name in CHUNKSERVERS:
            daemon = self.daemons.get(name)
            if daemon is None or not _running(daemon.pid):
                continue
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{daemon.pid}/io").read_text().splitlines():
                    if line.startswith("rchar:"):
                        total += int(line.split()[1])
        return total

    # The clients

    def client_pid(self, client: str) -> int:
        return self.daemons[client].pid

    def client_path(self, client: str, path: str = "") -> Path:
        """``path`` under the mount as ``client`` sees it, from this namespace (through its
        mfsmount's ``/proc/PID/root``): for a healthy mount."""
        root = f"/proc/{self.client_pid(client)}/root{MOUNT_ROOT}"
        return Path(root, path.lstrip("/"))

    def _mount(self, host: Host) -> None:
        """Start ``host``'s mfsmount (foreground) and wait until it is mounted."""
        extra = self.client_options.get(host.name, [])
        options = ",".join([f"mfsmaster={MASTER_ADDRESS}", f"mfsioretries={IO_RETRIES}", *extra])
        self._daemon(host.name, ["mfsmount", "-f", "-o", options, MOUNT_ROOT])

        def mounted() -> bool:
            if self.daemons[host.name].poll() is not None:
                raise RuntimeError(
                    f"moosefs bed: mfsmount on {host.name} exited:\n{self.log_tail(host.name)}"
                )
            done = self.hosts.run(host.name, ["cat", "/proc/self/mountinfo"])
            return any(
                line.split()[4] == MOUNT_ROOT and " - fuse mfs" in line
                for line in done.stdout.splitlines()
            )

        try:
            _wait(mounted, START_S, f"mfsmount mounted on {host.name}")
        except RuntimeError as error:
            raise RuntimeError(f"{error}; it said:\n{self.log_tail(host.name)}") from None


def _missing() -> str | None:
    """Why this machine cannot hold a MooseFS bed, or None."""
    reason = bed_lacks(
        "moosefs", "network and mount namespaces, mfsmount", TOOLS, PACKAGES, "mfsmount"
    )
    if reason:
        return reason
    if not os.path.exists(EMPTY_METADATA):
        return f"the moosefs bed needs {EMPTY_METADATA} (moosefs-master makes it)"
    return None


def _master(bed: MooseBed, token: str) -> None:
    """The master's namespaces, its configuration and empty metadata, mfsmaster answering."""
    state = bed.state
    add_server_host(bed.hosts, MASTER, MASTER_ADDRESS, f"ckm-{token}-{MASTER}")
    data = state / "master"
    data.mkdir()
    (data / "metadata.mfs").write_bytes(Path(EMPTY_METADATA).read_bytes())
    (state / "mfsexports.cfg").write_text("*  /  rw,alldirs,admin,maproot=0:0\n*  .  rw\n")
    (state / "mfstopology.cfg").write_text("")
    settings = {
        "WORKING_USER": "root",
        "WORKING_GROUP": "root",
        "DATA_PATH": str(data),
        "EXPORTS_FILENAME": str(state / "mfsexports.cfg"),
        "TOPOLOGY_FILENAME": str(state / "mfstopology.cfg"),
        "NICE_LEVEL": "0",
        "REPLICATIONS_DELAY_INIT": "0",
    }
    (state / f"{MASTER}.cfg").write_text(_cfg(settings))
    bed._daemon(MASTER, ["mfsmaster", "-f", "-c", str(state / f"{MASTER}.cfg"), "start"])
    _wait(lambda: bed._listening(MASTER, 9421), START_S, "mfsmaster answering")


def _chunkserver(bed: MooseBed, index: int, token: str) -> None:
    """Chunkserver ``index``: its namespaces, a tmpfs disk only it sees, its configuration."""
    name = CHUNKSERVERS[index]
    state = bed.state
    host = add_server_host(bed.hosts, name, chunkserver_address(index), f"ckm-{token}-{name}")
    disk, data = state / f"{name}.disk", state / name
    disk.mkdir()
    data.mkdir()
    tmpfs = ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES},mode=0755", f"ckptmfs-{name}"]
    _sh([*host.nsenter(), *tmpfs, str(disk)])
    (state / f"{name}.hdd").write_text(f"{disk}\n")
    settings = {
        "WORKING_USER": "root",
        "WORKING_GROUP": "root",
        "DATA_PATH": str(data),
        "HDD_CONF_FILENAME": str(state / f"{name}.hdd"),
        "HDD_LEAVE_SPACE_DEFAULT": LEAVE_SPACE,
        "HDD_TEST_SPEED": "0",
        "MASTER_HOST": MASTER_ADDRESS,
        "NICE_LEVEL": "0",
    }
    (state / f"{name}.cfg").write_text(_cfg(settings))
    bed.start_chunkserver(index)


def _goals(bed: MooseBed) -> None:
    """Make each goal's directory, its goal set, on the first client."""
    first = bed.clients[0]
    bed.wait_space(first)
    for goal in GOALS:
        bed.tool(first, "mkdir", bed.target(goal))
        bed.tool(first, "mfssetgoal", str(goal), bed.target(goal))
        # a deleted file's chunks freed at once, not kept a day in the trash
        bed.tool(first, "mfssettrashtime", "0", bed.target(goal))


@contextlib.contextmanager
def moosefs_bed(
    clients: int = 1, client_options: Mapping[str, Sequence[str]] | None = None
) -> Iterator[MooseBed]:
    """A MooseFS master and two chunkservers, its root mounted at /ckpt on ``clients``
    clients (``node0``...), each client's mfsmount given its ``client_options`` (``-o``
    options: ``mfscachemode=YES``, ``mfsattrcacheto=600``...), the directories of ``GOALS``
    made.

    Skips the calling test, saying why, where the machine cannot hold one; tears everything
    down on the way out, after a failure too (and fails the test if teardown left anything).
    """
    reason = _missing()
    if reason:
        bed_missing("moosefs", reason)
    if not 1 <= clients <= 20:
        raise ValueError(f"clients must be 1 to 20, not {clients}")
    with bed_frame("moosefs", "ckptmfs", "ckm", MOUNT_ROOT) as (hosts, token, _):
        options = {name: list(values) for name, values in (client_options or {}).items()}
        bed = MooseBed(hosts=hosts, client_options=options)
        (hosts.state / "log").mkdir()
        _master(bed, token)
        for index in range(len(CHUNKSERVERS)):
            _chunkserver(bed, index, token)
        _add_host(hosts, Host(HEAD, "198.18.0.2", f"ckm-{token}-{HEAD}"))
        _add_client_hosts(hosts, clients, f"ckm-{token}", hosts.state)
        for name in hosts.clients:
            _client_namespaces(hosts, hosts.hosts[name])
            bed._mount(hosts.hosts[name])
        _goals(bed)
        write_agent(hosts)
        yield bed


__all__ = ["CHUNKSERVERS", "GOALS", "MooseBed", "moosefs_bed"]
