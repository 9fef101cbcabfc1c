"""Several hosts on one machine: network namespaces on a bridge, one serving sshfs.

A test bed for the suite's many-node behaviour (a node that hangs, loses its link or sees a
target that is not shared) without a cluster. Needs root and Debian's ``iproute2``,
``util-linux`` (unshare, nsenter), ``openssh-server``, ``sshfs`` and ``openmpi-bin``; where
any is missing, :func:`host_bed` skips the calling test and says why.

Layout (all addresses in 198.18.0.0/24, the benchmarking range; no default route anywhere, so
nothing leaves the machine; the bridge sits in a namespace of its own, so the machine's own
network namespace is not touched)::

    storage 198.18.0.1   sshd, root login by key only, listening only on this address,
                         serving the export directory (``bed.export``) over sftp
    head    198.18.0.2   where ``mpirun`` runs (the login node)
    node<i> 198.18.0.<10+i>  a client: its own network, mount and UTS namespaces (hostname
                         ``node<i>``), the export mounted with sshfs at ``bed.mount_point``
                         (``/ckpt``) in its own mount namespace; a client listed in
                         ``local`` mounts a private directory there instead (an unshared
                         target)

API::

    with host_bed(clients=3, local=(), mount_point="/ckpt") as bed:
        bed.clients                     # ["node0", "node1", "node2"]
        bed.run("node0", ["ls", "/ckpt"], timeout_s=10)      # CompletedProcess, in node0
        bed.popen("node1", [...])                            # Popen, in node1
        bed.mpirun([sys.executable, "-m", "pytest", ...], timeout_s=120)  # one per client
        bed.mpirun_command([...])       # the same as an argv, for Popen (run it from anywhere)
        bed.link_down("node1"); bed.link_up("node1")         # eth0 down/up in its namespace
        bed.stop("node1"); bed.cont("node1")                 # SIGSTOP/SIGCONT its processes
        bed.stop("node1", "storage")    # only its sshfs (that client's storage hangs)
        bed.stop("node1", "tasks")      # all but its sshfs (the node hangs, its mount does not)
        bed.stop("storage")             # sshd: the file server hangs for every client
        bed.reachable("node0", "node1", timeout_s=2)         # bool, bounded
        bed.pids("node1")               # processes in that host's network namespace

``mpirun`` starts one process per client (``--map-by ppr:1:node``) through an rsh agent
(``--mca plm_rsh_agent``), a script in the bed's state directory that ``nsenter``s the
client's network, mount and UTS namespaces chosen by the host name and runs the ``orted``
command line there; ``mpirun`` itself runs in ``head``. The processes inherit ``mpirun``'s
environment and working directory. sshfs runs with ``ServerAliveInterval=2`` and
``ServerAliveCountMax=3``: on a client whose link is down, calls on /ckpt block for about 6 to
8 s, then sshfs exits and unmounts, and /ckpt is an empty read-only tmpfs laid under the mount
(``EROFS`` on write, ``ENOENT`` on read), never this machine's own directory.

Teardown runs even after a failure and is bounded: every process in the bed's namespaces is
continued and killed, the namespaces are unmounted and deleted (the bridge with them), the
state directory is removed, and ``/ckpt`` (and ``/run/sshd``) when a bed made it and no other
bed is alive. iproute2's own ``/run/netns`` directory stays.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tests.beds import bed_missing

SUBNET = "198.18.0.0/24"
SERVER = "storage"
HEAD = "head"
PORT = 22
TOOLS = ("ip", "unshare", "nsenter", "sshd", "sshfs", "ssh-keygen", "mpirun", "mountpoint")
_LOCK = "/run"  # beds hold a shared flock on this directory; the last one takes it exclusive
_MARK = ".made-by-ckptbed"  # a file in a directory the bed made, removed by the last bed
_SSHFS_OPTIONS = (
    "BatchMode=yes",
    "StrictHostKeyChecking=yes",
    "IdentitiesOnly=yes",
    "ConnectTimeout=5",
    "ServerAliveInterval=2",
    "ServerAliveCountMax=3",
)
Processes = Literal["all", "storage", "tasks"]


def _which(tool: str) -> str | None:
    """``tool`` on PATH or in the sbin folders (sshd is in /usr/sbin, off a user's PATH)."""
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")


def _sh(argv: Sequence[str], timeout_s: float = 10, check: bool = True) -> str:
    """Run ``argv``, bounded; return stdout; raise with stderr where it fails and ``check``."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s)
    if check and done.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


@dataclass
class Host:
    """One host of the bed: its address and the namespaces a process enters to be on it."""

    name: str
    address: str
    netns: str  # the name under /run/netns
    mount_ns: Path | None = None  # persisted mount namespace (clients only)
    uts_ns: Path | None = None  # persisted UTS namespace (clients only)

    def nsenter(self) -> list[str]:
        """The ``nsenter`` prefix that runs a command on this host."""
        argv = ["nsenter", f"--net=/run/netns/{self.netns}"]
        if self.mount_ns is not None:
            argv.append(f"--mount={self.mount_ns}")
        if self.uts_ns is not None:
            argv.append(f"--uts={self.uts_ns}")
        return [*argv, "--"]


@dataclass
class HostBed:
    """A bridge, a server, a launcher and clients; see the module docstring for the API."""

    state: Path
    mount_point: str
    hosts: dict[str, Host] = field(default_factory=dict)
    clients: list[str] = field(default_factory=list)
    local: list[str] = field(default_factory=list)
    bridge_ns: str = ""
    _launched: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def server(self) -> str:
        """The file server's host name (``storage``)."""
        return SERVER

    @property
    def export(self) -> Path:
        """The directory the server exports (what every sharing client sees at /ckpt)."""
        return self.state / "export"

    # Running things on a host

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` prefixed so that it runs inside ``host``'s namespaces."""
        return [*self.hosts[host].nsenter(), *argv]

    def run(
        self, host: str, argv: Sequence[str], timeout_s: float = 30, **kwargs: object
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on ``host``, bounded by ``timeout_s``; output captured as text."""
        return subprocess.run(
            self.command(host, argv),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            **kwargs,  # type: ignore[call-overload]
        )

    def popen(self, host: str, argv: Sequence[str], **kwargs: object) -> subprocess.Popen[str]:
        """Start ``argv`` on ``host`` in a new session; the bed kills it at teardown."""
        return self._spawn(self.command(host, argv), **kwargs)

    def _spawn(self, argv: Sequence[str], **kwargs: object) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            list(argv),
            text=True,
            start_new_session=True,
            **kwargs,  # type: ignore[call-overload]
        )
        self._launched.append(process)
        return process

    def mpirun_command(self, argv: Sequence[str], hosts: Sequence[str] | None = None) -> list[str]:
        """``mpirun`` (run in ``head``) starting ``argv`` once on each of ``hosts``
        (default: every client), each inside that client's namespaces."""
        hosts = list(hosts or self.clients)
        return self.command(
            HEAD,
            [
                "mpirun",
                "--allow-run-as-root",
                "-np",
                str(len(hosts)),
                "--host",
                ",".join(f"{h}:1" for h in hosts),
                "--map-by",
                "ppr:1:node",
                "--mca",
                "plm_rsh_agent",
                str(self.state / "agent"),
                "--mca",
                "plm_rsh_no_tree_spawn",
                "1",
                "--mca",
                "oob_tcp_if_include",
                SUBNET,
                "--mca",
                "btl_tcp_if_include",
                SUBNET,
                "--mca",
                "btl",
                "self,tcp",
                "--mca",
                "orte_tmpdir_base",
                str(self.state / "ompi"),
                *argv,
            ],
        )

    def mpirun(
        self,
        argv: Sequence[str],
        hosts: Sequence[str] | None = None,
        timeout_s: float = 120,
        **kwargs: object,
    ) -> subprocess.CompletedProcess[str]:
        """Run :meth:`mpirun_command` to the end, bounded: past ``timeout_s`` the whole job
        (mpirun and what it started on the clients) is killed and TimeoutExpired raised."""
        process = self._spawn(
            self.mpirun_command(argv, hosts),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **kwargs,
        )
        try:
            out, err = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            for host in [*(hosts or self.clients), HEAD]:
                self.signal(host, signal.SIGKILL, "tasks")
            process.communicate(timeout=10)
            raise
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    # Faults

    def link_down(self, host: str) -> None:
        """Take ``host``'s only link (eth0) down in its namespace."""
        _sh(["ip", "-n", self.hosts[host].netns, "link", "set", "eth0", "down"])

    def link_up(self, host: str) -> None:
        """Bring ``host``'s link back up (its address and route come back with it)."""
        _sh(["ip", "-n", self.hosts[host].netns, "link", "set", "eth0", "up"])

    def pids(self, host: str, processes: Processes = "all") -> list[int]:
        """Processes in ``host``'s network namespace: all, only its storage daemon (sshfs on a
        client, sshd on the server) or all but it ("tasks")."""
        return _pids_in(self.hosts[host], processes)

    def signal(self, host: str, signum: int, processes: Processes = "all") -> list[int]:
        """Send ``signum`` to :meth:`pids`; return the pids signalled."""
        sent = []
        for pid in self.pids(host, processes):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
                sent.append(pid)
        return sent

    def stop(self, host: str, processes: Processes = "all") -> list[int]:
        """SIGSTOP ``host``'s processes (see :meth:`pids`): the node, or its storage, hangs."""
        return self.signal(host, signal.SIGSTOP, processes)

    def cont(self, host: str, processes: Processes = "all") -> list[int]:
        """SIGCONT what :meth:`stop` stopped."""
        return self.signal(host, signal.SIGCONT, processes)

    def reachable(self, source: str, target: str, timeout_s: float = 2) -> bool:
        """Whether ``source`` reaches ``target``'s address, within ``timeout_s``: a TCP
        connection to a closed port is refused by a reachable host and times out (or finds no
        route) otherwise."""
        probe = (
            "import socket, sys\n"
            "s = socket.socket(); s.settimeout(float(sys.argv[2]))\n"
            "try: s.connect((sys.argv[1], 9))\n"
            "except ConnectionRefusedError: sys.exit(0)\n"
            "except OSError: sys.exit(1)\n"
            "sys.exit(0)\n"
        )
        address = self.hosts[target].address
        done = self.run(
            source, ["python3", "-c", probe, address, str(timeout_s)], timeout_s=timeout_s + 10
        )
        return done.returncode == 0


@dataclass
class BedOnHosts:
    """What every bed laid over the host bed (Ceph, GlusterFS, MooseFS) forwards to it."""

    hosts: HostBed

    @property
    def state(self) -> Path:
        return self.hosts.state

    @property
    def clients(self) -> list[str]:
        return self.hosts.clients


def add_server_host(bed: HostBed, name: str, address: str, netns: str) -> Host:
    """A server host on the bridge with a private mount namespace of its own (persisted in
    the state directory as ``<name>.mnt``), for daemons whose memory-backed disks and state
    binds no other host sees."""
    host = Host(name, address, netns, mount_ns=bed.state / f"{name}.mnt")
    _add_host(bed, host)
    assert host.mount_ns is not None
    host.mount_ns.touch()
    _sh(["unshare", f"--mount={host.mount_ns}", "--propagation", "private", "true"])
    return host


def _ns_inode(path: str | Path) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino


def _pids_in(host: Host, processes: Processes = "all") -> list[int]:
    """Processes whose network namespace (or, for a client, mount namespace) is ``host``'s."""
    wanted = {("net", _ns_inode(f"/run/netns/{host.netns}"))}
    if host.mount_ns is not None:
        wanted.add(("mnt", _ns_inode(host.mount_ns)))
    daemons = {"sshd"} if host.name == SERVER else {"sshfs", "ssh"}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if not any(_ns_inode(f"/proc/{entry}/ns/{kind}") == ino for kind, ino in wanted):
                continue
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
        except OSError:
            continue  # gone, or a zombie
        if processes == "all" or (comm in daemons) == (processes == "storage"):
            found.append(int(entry))
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _is_mount(path: str | Path) -> bool:
    """Whether ``path`` is a mount point in this mount namespace (bind mounts included)."""
    with open("/proc/self/mountinfo") as mounts:
        return any(line.split()[4] == str(path) for line in mounts)


def _missing() -> str | None:
    """Why this machine cannot hold a bed, or None."""
    if os.geteuid() != 0:
        return "the host bed needs root (network and mount namespaces)"
    absent = [tool for tool in TOOLS if _which(tool) is None]
    if absent:
        return f"the host bed needs {', '.join(absent)} (iproute2, util-linux, openssh-server, "
        "sshfs, openmpi-bin)"
    if not os.path.exists("/dev/fuse"):
        return "the host bed needs /dev/fuse for sshfs"
    return None


def _make_dir(path: str, made: list[str]) -> None:
    """Make ``path`` if absent, marking it as the bed's so that the last bed removes it."""
    if not os.path.isdir(path):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o755)
        Path(path, _MARK).touch()
    if os.path.exists(os.path.join(path, _MARK)):
        made.append(path)


def _remove_made_dirs(made: list[str], lock: int) -> None:
    """Remove the marked directories if no other bed holds the lock."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return  # another bed is alive and uses them
    for path in made:
        with contextlib.suppress(OSError):
            if os.listdir(path) == [_MARK] and not _is_mount(path):
                os.unlink(os.path.join(path, _MARK))
                os.rmdir(path)


def _wait(predicate: object, timeout_s: float, what: str) -> None:
    """Poll ``predicate`` every 50 ms until true; RuntimeError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(f"host bed: {what} within {timeout_s} s")
        time.sleep(0.05)


def bed_lacks(
    name: str, root_for: str, tools: Sequence[str], packages: str, fuse_for: str
) -> str | None:
    """Why this machine cannot hold the bed ``name``, for what every FUSE bed on the host bed
    needs (root, ``tools`` from ``packages``, /dev/fuse for ``fuse_for``), or None."""
    if os.geteuid() != 0:
        return f"the {name} bed needs root ({root_for})"
    absent = [tool for tool in tools if _which(tool) is None]
    if absent:
        return f"the {name} bed needs {', '.join(absent)} (apt-get install {packages})"
    if not os.path.exists("/dev/fuse"):
        return f"the {name} bed needs /dev/fuse for {fuse_for}"
    return None


def wait_for(predicate: object, timeout_s: float, what: str) -> None:
    """The host bed's bounded poll, for the tests on the beds built on it."""
    _wait(predicate, timeout_s, what)


def _sshd_config(bed: HostBed, address: str) -> str:
    s = bed.state
    return "\n".join(
        [
            f"ListenAddress {address}:{PORT}",
            f"HostKey {s}/host_key",
            f"AuthorizedKeysFile {s}/authorized_keys",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "PidFile none",
            "MaxStartups 64",
            "Subsystem sftp internal-sftp",
            "",
        ]
    )


def _agent(bed: HostBed) -> str:
    """The rsh agent OpenMPI calls as ``agent [options] host command...``."""
    cases = "\n".join(
        f'  {name}) exec {shlex.join(bed.hosts[name].nsenter())} /bin/sh -c "$*" ;;'
        for name in bed.clients
    )
    return (
        "#!/bin/sh\n"
        "# OpenMPI rsh agent of a ckptgate host bed: run the command in the host's namespaces.\n"
        'while [ "${1#-}" != "$1" ]; do shift; done  # ssh-style options, if any\n'
        'host=$1; shift\ncase "$host" in\n'
        f'{cases}\n  *) echo "host bed agent: unknown host $host" >&2; exit 255 ;;\nesac\n'
    )


def _add_client_hosts(bed: HostBed, clients: int, prefix: str, state: Path) -> None:
    """The clients ``node0`` .. at 198.18.0.10 up, each with its network namespace
    (``{prefix}-node<i>``) and, named in ``state``, its own mount and UTS namespaces."""
    for index in range(clients):
        name = f"node{index}"
        bed.clients.append(name)
        client = Host(
            name,
            f"198.18.0.{10 + index}",
            f"{prefix}-{name}",
            mount_ns=state / f"{name}.mnt",
            uts_ns=state / f"{name}.uts",
        )
        _add_host(bed, client)


def _add_host(bed: HostBed, host: Host) -> None:
    """Create ``host``'s network namespace and wire it to the bridge."""
    bed.hosts[host.name] = host
    _sh(["ip", "netns", "add", host.netns])
    _sh(["ip", "-n", host.netns, "link", "set", "lo", "up"])
    port = f"v-{host.name}"
    _sh(
        [
            "ip",
            "-n",
            bed.bridge_ns,
            "link",
            "add",
            port,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            host.netns,
        ]
    )
    _sh(["ip", "-n", bed.bridge_ns, "link", "set", port, "master", "br0", "up"])
    _sh(["ip", "-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0"])
    _sh(["ip", "-n", host.netns, "link", "set", "eth0", "up"])


def _client_namespaces(bed: HostBed, host: Host) -> None:
    """Make ``host``'s mount and UTS namespaces (hostname ``host.name``), with an empty
    read-only tmpfs at the mount point for the client's mount to go over."""
    assert host.mount_ns is not None and host.uts_ns is not None
    host.mount_ns.touch()
    host.uts_ns.touch()
    _sh(
        [
            "unshare",
            f"--mount={host.mount_ns}",
            f"--uts={host.uts_ns}",
            "--propagation",
            "private",
            "hostname",
            host.name,
        ]
    )
    # An empty read-only tmpfs under the mount: when the client (sshfs, ceph-fuse) exits,
    # /ckpt is that (EROFS, ENOENT) rather than this machine's own directory.
    underlay = ["mount", "-t", "tmpfs", "-o", "ro,size=4k,mode=0555", "ckptbed-none"]
    _sh([*host.nsenter(), *underlay, bed.mount_point])


def _add_client(bed: HostBed, host: Host, shared: bool) -> None:
    """Make ``host``'s mount and UTS namespaces and mount /ckpt in them."""
    _client_namespaces(bed, host)
    if shared:
        options = [*_SSHFS_OPTIONS]
        options += [
            f"IdentityFile={bed.state}/id",
            f"UserKnownHostsFile={bed.state}/known_hosts",
        ]
        source = f"root@{bed.hosts[SERVER].address}:{bed.export}"
        mount = ["sshfs", "-o", ",".join(options), source, bed.mount_point]
    else:
        private = bed.state / f"local-{host.name}"
        private.mkdir()
        mount = ["mount", "--bind", str(private), bed.mount_point]
    _sh([*host.nsenter(), *mount], timeout_s=15)


def _teardown(bed: HostBed) -> list[str]:
    """Kill, unmount, delete; every step bounded and attempted; return what failed."""
    problems: list[str] = []
    for process in bed._launched:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
    present = [h for h in bed.hosts.values() if os.path.exists(f"/run/netns/{h.netns}")]

    def alive() -> list[int]:
        pids = []
        for host in present:
            with contextlib.suppress(OSError):
                pids += _pids_in(host)
        return pids

    killed: set[int] = set()
    deadline = time.monotonic() + 10
    while (pids := alive()) and time.monotonic() < deadline:
        for pid in pids:
            for signum in (signal.SIGCONT, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)
        killed.update(pids)
        time.sleep(0.05)
    # A killed process leaves its namespaces before it is gone: wait for the exit to finish.
    while (pids := [p for p in killed if _running(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pids:
        problems.append(f"processes still alive: {sorted(pids)}")
    for process in bed._launched:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
    for host in bed.hosts.values():
        for path in (host.mount_ns, host.uts_ns):
            if path is not None and _is_mount(path):
                unmounted = subprocess.run(["umount", path], capture_output=True, timeout=10)
                if unmounted.returncode != 0:
                    subprocess.run(["umount", "-l", path], capture_output=True, timeout=10)
    for netns in [*(h.netns for h in bed.hosts.values()), bed.bridge_ns]:
        if netns and os.path.exists(f"/run/netns/{netns}"):
            done = subprocess.run(
                ["ip", "netns", "del", netns], capture_output=True, text=True, timeout=10
            )
            if done.returncode != 0:
                problems.append(f"ip netns del {netns}: {done.stderr.strip()}")
    if _is_mount(bed.state):
        subprocess.run(["umount", "-l", bed.state], capture_output=True, timeout=10)
    shutil.rmtree(bed.state, ignore_errors=True)
    if bed.state.exists():
        problems.append(f"could not remove {bed.state}")
    return problems


@contextlib.contextmanager
def bed_frame(
    marker: str, prefix: str, ns_prefix: str, mount_point: str
) -> Iterator[tuple[HostBed, str, list[str]]]:
    """What every bed on this machinery starts from and ends with: the beds' shared lock on
    /run, a state directory ``/run/<prefix>-<token>-...`` bound on itself and private (for the
    namespace files), a bridge in a namespace of its own, ``mount_point`` made (and marked as
    the bed's); yields the empty bed, its token (the namespaces' names are
    ``<ns_prefix>-<token>-<host>``) and the list
    of directories made, which the caller may add to (``_make_dir``).

    A namespace this machine cannot make skips the calling test through ``bed_missing``
    (``marker``). On the way out, after a failure too: the bounded teardown, the made
    directories removed by the last bed alive, RuntimeError naming what teardown left.
    """
    lock = os.open(_LOCK, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(lock, fcntl.LOCK_SH)
    made: list[str] = []
    token = secrets.token_hex(3)
    state = Path(tempfile.mkdtemp(prefix=f"{prefix}-{token}-", dir="/run"))
    bed = HostBed(state=state, mount_point=mount_point, bridge_ns=f"{ns_prefix}-{token}-bridge")
    problems: list[str] = []
    try:
        try:
            _sh(["ip", "netns", "add", bed.bridge_ns])
        except RuntimeError as error:
            bed_missing(marker, f"cannot make a network namespace here: {error}")
        _sh(["ip", "-n", bed.bridge_ns, "link", "add", "br0", "type", "bridge"])
        _sh(["ip", "-n", bed.bridge_ns, "link", "set", "br0", "up"])
        _make_dir(mount_point, made)
        # The namespace files live on a private mount, as unshare's persistence asks.
        _sh(["mount", "--bind", str(state), str(state)])
        _sh(["mount", "--make-private", str(state)])
        (state / "ompi").mkdir()
        yield bed, token, made
    finally:
        try:
            problems = _teardown(bed)
        finally:
            _remove_made_dirs(made, lock)
            os.close(lock)
    if problems:
        raise RuntimeError(f"{marker} bed teardown: " + "; ".join(problems))


@contextlib.contextmanager
def host_bed(
    clients: int = 2,
    local: Collection[int] = (),
    mount_point: str = "/ckpt",
    setup_timeout_s: float = 20,
) -> Iterator[HostBed]:
    """A bed of ``clients`` clients (``node0``...), a server and a launcher; clients whose
    index is in ``local`` get a private directory at ``mount_point`` instead of the export.

    Skips the calling test, saying why, where the machine cannot hold one; tears everything
    down on the way out, after a failure too (and fails the test if teardown left anything).
    """
    reason = _missing()
    if reason:
        bed_missing("hosts", reason)
    if not 1 <= clients <= 200:
        raise ValueError(f"clients must be 1 to 200, not {clients}")
    started = time.monotonic()
    with bed_frame("hosts", "ckptbed", "ckb", mount_point) as (bed, token, made):
        state = bed.state
        _make_dir("/run/sshd", made)  # sshd's privilege-separation directory
        (state / "export").mkdir()
        for key in ("host_key", "id"):
            _sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", key, "-f", str(state / key)])
        shutil.copy(state / "id.pub", state / "authorized_keys")
        server = Host(SERVER, "198.18.0.1", f"ckb-{token}-{SERVER}")
        _add_host(bed, server)
        host_key = (state / "host_key.pub").read_text().split()[:2]
        (state / "known_hosts").write_text(f"{server.address} {' '.join(host_key)}\n")
        (state / "sshd_config").write_text(_sshd_config(bed, server.address))
        sshd = [_which("sshd") or "sshd", "-D", "-e", "-f", str(state / "sshd_config")]
        with (state / "sshd.log").open("w") as log:
            bed.popen(SERVER, sshd, stdout=log, stderr=subprocess.STDOUT)
        _add_host(bed, Host(HEAD, "198.18.0.2", f"ckb-{token}-{HEAD}"))
        _add_client_hosts(bed, clients, f"ckb-{token}", state)
        _wait(lambda: "listening" in (state / "sshd.log").read_text(), 10, "sshd listening")
        for index, name in enumerate(bed.clients):
            _add_client(bed, bed.hosts[name], shared=index not in local)
            if index in local:
                bed.local.append(name)
        write_agent(bed)
        if time.monotonic() - started > setup_timeout_s:
            raise RuntimeError(f"host bed: setup took over {setup_timeout_s} s")
        yield bed


def write_agent(bed: HostBed) -> None:
    """The bed's rsh agent for mpirun (``_agent``), at ``<state>/agent``, executable."""
    agent = bed.state / "agent"
    agent.write_text(_agent(bed))
    agent.chmod(0o755)
