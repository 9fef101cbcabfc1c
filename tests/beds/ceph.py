"""A real distributed filesystem and S3 server on one machine: Ceph in network namespaces.

The storage the suite's users buy, in CI: a Ceph cluster (Debian's ``ceph-mon ceph-mgr
ceph-osd ceph-mds ceph-fuse radosgw``) with every daemon in a network namespace of its own on
a bridge, CephFS mounted through ceph-fuse at the same path on every client, and RADOS Gateway
serving S3. Built on the host bed's namespace machinery (``tests.beds.hosts``: the bridge, the
hosts, ``run``/``popen``/``mpirun``, the bounded teardown); where root or a package is missing,
:func:`ceph_bed` skips the calling test and says why.

Layout (198.18.0.0/24, no route out; the bridge in a namespace of its own)::

    mon     198.18.0.20   ceph-mon (msgr2 only, port 3300)
    mgr     198.18.0.21   ceph-mgr
    mds     198.18.0.22   ceph-mds, one active, no standby
    rgw     198.18.0.23   radosgw, beast frontend on port 7480 (``bed.s3_url``)
    osd<i>  198.18.0.<30+i>  ceph-osd with the ``memstore`` object store (``osd_bytes`` each)
    head    198.18.0.2    where ``mpirun`` runs
    node<i> 198.18.0.<10+i>  a client: CephFS at ``mount_point`` through ceph-fuse, in its own
                          mount and UTS namespaces

Two data pools, chosen per directory through the ``ceph.dir.layout.pool`` xattr
(:meth:`CephBed.layout_dir`): ``replicated`` (size 2, min_size 1: one OSD may die and every
acknowledged byte survives; the file system's default) and ``single`` (size 1: an OSD's death
loses its objects, and memstore keeps nothing across a restart). The metadata pool is size 2.
Auth is off (``auth_*_required = none``) and every messenger runs in ``crc`` mode, so nothing
here is a secret; the S3 user's keys are fixed test values.

ceph-fuse runs with its object cacher off (``client_oc = false``): the suite drops the kernel's
cached pages before readback, and a cache of ceph-fuse's own would serve reads it cannot see.

API::

    with ceph_bed(clients=1, osds=2) as bed:
        bed.hosts                       # the HostBed: run, popen, mpirun, link_down, stop...
        bed.mount_point                 # "/ckpt" on every client
        bed.ceph("osd", "tree")         # the ceph CLI, in the mon's namespace
        bed.layout_dir("node0", "/ckpt/one", "single")
        bed.kill_osd(1); bed.start_osd(1); bed.wait_healthy()
        bed.stop_mds(); bed.cont_mds()  # SIGSTOP/SIGCONT the only MDS
        bed.stop_rgw(); bed.start_rgw()
        bed.fuse_connection("node0")    # the mount's /sys/fs/fuse/connections/N number
        bed.abort_mount("node0")        # write 1 to its abort: hung calls end with ENOTCONN
        bed.s3_url, bed.s3_option_args()  # for --target=s3://... --storage-option ...

Teardown is the host bed's: every process in the bed's namespaces killed (a hung ceph-fuse
included: killing it ends the FUSE connection), the namespaces deleted, the state directory
(under /run: mon store, OSD dirs, logs) removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
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
    _is_mount,
    _sh,
    _wait,
    bed_frame,
    bed_lacks,
    write_agent,
)

TOOLS = (
    "ip", "unshare", "nsenter", "mountpoint", "ceph", "ceph-mon", "ceph-mgr", "ceph-osd",
    "ceph-mds", "ceph-fuse", "radosgw", "radosgw-admin", "monmaptool", "ceph-authtool",
)  # fmt: skip
PACKAGES = "ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse radosgw iproute2 util-linux"
MON, MGR, MDS, RGW = "mon", "mgr", "mds", "rgw"
ADDRESSES = {HEAD: "198.18.0.2", MON: "198.18.0.20", MGR: "198.18.0.21", MDS: "198.18.0.22"}
RGW_ADDRESS = "198.18.0.23"
RGW_PORT = 7480
S3_KEY, S3_SECRET = "ckptbed", "ckptbed-secret"
"""Fixed test credentials of the bed's one S3 user (the server is reachable only in the bed)."""
POOL_PGS = 8
DATA_POOLS = {"replicated": 2, "single": 1, "first": 1}
"""The file system's data pools and their replica counts (the first is the default); ``first``
lies on osd.0 alone (CRUSH rule ``on-first``: device class ``first``), ``single`` on every OSD,
so the two hold the same data on one server and on all of them."""
LAGGY_S = 20.0
"""How long a PG may stay ``laggy`` in :meth:`CephBed.wait_healthy` before its primary is
marked down to peer again."""
START_S = 120.0
"""Each step of the start (the mon's quorum, every OSD up, the MDS active, the mount, RGW)
must finish within this: generous, for a busy 2-core machine; a normal start takes 20-40 s."""


def osd_host(index: int) -> str:
    return f"osd{index}"


def _conf(state: Path, osd_bytes: int) -> str:
    """ceph.conf: every path inside the bed's state directory, auth off, crc messengers, small
    memory, fast failure detection (an OSD killed is marked down in seconds)."""
    s = state
    lines = [
        "[global]",
        f"fsid = {uuid.uuid4()}",
        f"mon_host = v2:{ADDRESSES[MON]}:3300",
        "public_network = 198.18.0.0/24",
        "ms_bind_ipv6 = false",
        "auth_cluster_required = none",
        "auth_service_required = none",
        "auth_client_required = none",
        "ms_cluster_mode = crc",
        "ms_service_mode = crc",
        "ms_client_mode = crc secure",
        "ms_mon_cluster_mode = crc",
        "ms_mon_service_mode = crc",
        "ms_mon_client_mode = crc secure",
        f"keyring = {s}/keyring",
        f"run_dir = {s}/run",
        "admin_socket = $run_dir/$name.asok",
        f"log_file = {s}/log/$name.log",
        "log_to_stderr = false",
        "err_to_stderr = true",
        "pid_file = ",
        f"mon_data = {s}/mon/$id",
        f"mgr_data = {s}/mgr/$id",
        f"mds_data = {s}/mds/$id",
        f"osd_data = {s}/osd/$id",
        f"rgw_data = {s}/rgw/$id",
        f"exec_dir = {s}/run",
        "crash_dir = /nonexistent",
        "osd_objectstore = memstore",
        f"memstore_device_bytes = {osd_bytes}",
        "osd_crush_chooseleaf_type = 0",
        "osd_pool_default_size = 2",
        "osd_pool_default_min_size = 1",
        f"osd_pool_default_pg_num = {POOL_PGS}",
        f"osd_pool_default_pgp_num = {POOL_PGS}",
        "osd_pool_default_pg_autoscale_mode = off",
        "mon_allow_pool_size_one = true",
        "mon_allow_pool_delete = true",
        "mon_max_pg_per_osd = 1000",
        "mon_osd_down_out_interval = 0",  # never out: a restarted OSD takes its PGs back
        "osd_heartbeat_interval = 1",
        "osd_heartbeat_grace = 5",
        "mon_osd_min_down_reporters = 1",
        "mds_beacon_grace = 600",  # a stopped MDS stays the active one: the client waits on it
        "mds_cache_memory_limit = 134217728",
        "client_oc = false",
        "client_mount_timeout = 30",
        # Recovery at full speed: the OSDs count as hdd, whose default sleeps 0.1 s between
        # recovery ops (a refilled memstore OSD then took minutes).
        "osd_recovery_sleep = 0",
        "osd_recovery_sleep_hdd = 0",
        "osd_recovery_max_active = 8",
        "osd_max_backfills = 8",
        "osd_op_num_shards = 1",
        "osd_op_num_threads_per_shard = 2",
        "rgw_frontends = beast endpoint=" + f"{RGW_ADDRESS}:{RGW_PORT}",
        "rgw_dns_name = ",
        "rgw_enable_usage_log = false",
        # Deleted objects' data is collected at once, not after RGW's default two hours: the
        # checklist's files, deleted, must free the room the next test needs.
        "rgw_gc_obj_min_wait = 0",
        "rgw_gc_processor_period = 5",
        "rgw_gc_processor_max_time = 5",
        "",
    ]
    return "\n".join(lines)


@dataclass
class CephBed(BedOnHosts):
    """A Ceph cluster and its clients; see the module docstring for the API."""

    osds: int = 0
    conf: Path = Path()
    daemons: dict[str, subprocess.Popen[str]] = field(default_factory=dict)

    @property
    def mount_point(self) -> str:
        return self.hosts.mount_point

    @property
    def s3_url(self) -> str:
        """RGW's S3 endpoint (reachable from the bed's hosts only)."""
        return f"http://{RGW_ADDRESS}:{RGW_PORT}"

    def s3_options(self) -> dict[str, object]:
        """s3fs options for the bed's S3 user, as ``S3FileSystem(**...)`` takes them. No
        region: RGW's zone group is ``default``, and s3fs would send a region as the bucket's
        location constraint (signing takes ``AWS_DEFAULT_REGION``)."""
        return {
            "key": S3_KEY,
            "secret": S3_SECRET,
            "endpoint_url": self.s3_url,
        }

    def s3_option_args(self) -> list[str]:
        """The same as ``--storage-option`` arguments."""
        return [
            f"--storage-option=key={S3_KEY}",
            f"--storage-option=secret={S3_SECRET}",
            f"--storage-option=endpoint_url={self.s3_url}",
        ]

    # The cluster

    def ceph(self, *args: str, timeout_s: float = 60) -> str:
        """The ceph CLI (in the mon's namespace); its stdout; RuntimeError where it fails."""
        argv = ["ceph", "-c", str(self.conf), "--connect-timeout", "20", *args]
        return _sh(self.hosts.command(MON, argv), timeout_s=timeout_s)

    def ceph_json(self, *args: str) -> object:
        return json.loads(self.ceph(*args, "--format=json"))

    def _daemon(self, host: str, argv: Sequence[str], name: str) -> subprocess.Popen[str]:
        log = (self.state / "log" / f"{name}.out").open("a")
        with log:
            process = self.hosts.popen(
                host, [*argv, "-f", "-c", str(self.conf)], stdout=log, stderr=subprocess.STDOUT
            )
        self.daemons[name] = process
        return process

    def _kill(self, name: str, signum: int = signal.SIGKILL) -> None:
        process = self.daemons[name]
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signum)
        if signum == signal.SIGKILL:
            process.wait(timeout=30)

    def start_osd(self, index: int) -> None:
        """Start OSD ``index`` (again): memstore keeps nothing a SIGKILL interrupted."""
        self._daemon(osd_host(index), ["ceph-osd", "-i", str(index)], f"osd.{index}")

    def kill_osd(self, index: int) -> None:
        """SIGKILL OSD ``index`` and wait until the monitors mark it down."""
        self._kill(f"osd.{index}")
        _wait(lambda: index not in self.osds_up(), START_S, f"osd.{index} marked down")

    def osds_up(self) -> set[int]:
        dump = self.ceph_json("osd", "dump")
        assert isinstance(dump, dict)
        return {osd["osd"] for osd in dump["osds"] if osd["up"]}

    def wait_healthy(self, timeout_s: float = 3 * START_S) -> None:
        """Every OSD up and every PG active+clean (recovery done), bounded."""

        laggy_since: dict[str, float] = {}
        repeered: set[int] = set()

        def clean() -> bool:
            if len(self.osds_up()) != self.osds:
                return False
            status = self.ceph_json("pg", "stat")
            assert isinstance(status, dict)
            states = status["pg_summary"]["num_pg_by_state"]
            total = status["pg_summary"]["num_pgs"]
            if any("laggy" in s["name"] for s in states):
                self._repeer_laggy(laggy_since, repeered)
            return sum(s["num"] for s in states if s["name"] == "active+clean") == total

        try:
            _wait(clean, timeout_s, "every PG active+clean")
        except RuntimeError as error:
            raise RuntimeError(f"{error}: {self.ceph('pg', 'stat').strip()}") from None

    def _repeer_laggy(self, laggy_since: dict[str, float], repeered: set[int]) -> None:
        """A PG recreated empty on a size-1 pool can stay ``laggy`` (its read lease never
        renewed, client ops "waiting for readable") for minutes: once one has been laggy for
        ``LAGGY_S``, mark its primary down, as an operator would, so it peers again (once per
        OSD per wait)."""
        listed = self.ceph_json("pg", "ls", "laggy")
        assert isinstance(listed, dict)
        now = time.monotonic()
        for pg in listed.get("pg_stats", []):
            since = laggy_since.setdefault(pg["pgid"], now)
            primary = int(pg["acting_primary"])
            if now - since > LAGGY_S and primary not in repeered:
                repeered.add(primary)
                self.ceph("osd", "down", str(primary))

    def recreate_lost_pgs(self, pool: str) -> list[str]:
        """Recreate ``pool``'s PGs that no live OSD holds (stale: their only OSD came back
        empty), empty, as an operator accepting the loss does (``ceph osd force-create-pg``);
        the PGs recreated."""
        listed = self.ceph_json("pg", "ls-by-pool", pool, "stale")
        assert isinstance(listed, dict)
        lost = [pg["pgid"] for pg in listed.get("pg_stats", [])]
        for pgid in lost:
            self.ceph("osd", "force-create-pg", pgid, "--yes-i-really-mean-it")
        return lost

    def objects(self, pool: str) -> set[str]:
        """The names of the RADOS objects in ``pool`` (CephFS data: ``<inode hex>.<index>``)."""
        listing = ["rados", "-c", str(self.conf), "-p", pool, "ls"]
        return set(_sh(self.hosts.command(MON, listing), timeout_s=60).split())

    def stop_mds(self) -> None:
        """SIGSTOP the only MDS: metadata calls hang until :meth:`cont_mds`."""
        self._kill("mds.a", signal.SIGSTOP)

    def cont_mds(self) -> None:
        self._kill("mds.a", signal.SIGCONT)

    def stop_rgw(self) -> None:
        """SIGKILL radosgw: S3 calls get connection refused until :meth:`start_rgw`."""
        self._kill("rgw")

    def start_rgw(self) -> None:
        self._daemon(RGW, ["radosgw", "-n", "client.rgw"], "rgw")
        _wait(self._rgw_answers, START_S, "radosgw answering")

    def rgw_collect_garbage(self) -> None:
        """Free the room of deleted S3 objects now (``radosgw-admin gc process``)."""
        gc = ["radosgw-admin", "-c", str(self.conf), "gc", "process", "--include-all"]
        _sh(self.hosts.command(RGW, gc), timeout_s=START_S)

    def _rgw_answers(self) -> bool:
        probe = (
            "import socket, sys\n"
            "try: socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close()\n"
            "except OSError: sys.exit(1)\n"
        )
        done = self.hosts.run(HEAD, ["python3", "-c", probe, RGW_ADDRESS, str(RGW_PORT)])
        return done.returncode == 0

    # The clients

    def layout_dir(self, client: str, path: str, pool: str) -> None:
        """Make directory ``path`` on ``client`` and put the files made under it in ``pool``."""
        self.hosts.run(client, ["mkdir", "-p", path], timeout_s=60).check_returncode()
        setxattr = (
            "import os, sys; os.setxattr(sys.argv[1], 'ceph.dir.layout.pool', sys.argv[2].encode())"
        )
        self.hosts.run(
            client, ["python3", "-c", setxattr, path, pool], timeout_s=60
        ).check_returncode()

    def _fuse_mounted(self, client: str) -> bool:
        """Whether a FUSE mount is at the mount point on ``client`` (read from mountinfo)."""
        done = self.hosts.run(client, ["cat", "/proc/self/mountinfo"])
        return any(
            line.split()[4] == self.mount_point and line.split(" - ")[1].startswith("fuse")
            for line in done.stdout.splitlines()
        )

    def fuse_connection(self, client: str) -> int:
        """The FUSE connection number of ``client``'s mount (its device minor), read from
        mountinfo: no call on the mount itself, which may hang."""
        done = self.hosts.run(client, ["cat", "/proc/self/mountinfo"])
        for line in done.stdout.splitlines():
            fields = line.split()
            if fields[4] == self.mount_point and "fuse" in line.split(" - ")[1]:
                return int(fields[2].split(":")[1])
        raise RuntimeError(f"ceph bed: no FUSE mount at {self.mount_point} on {client}")

    def client_path(self, client: str, path: str = "") -> Path:
        """``path`` under the mount point as ``client`` sees it, from this namespace (through
        its ceph-fuse's ``/proc/PID/root``): for polling a healthy mount, never a hung one."""
        pid = self.daemons[f"fuse.{client}"].pid
        return Path(f"/proc/{pid}/root{self.mount_point}", path.lstrip("/"))

    def remount(self, client: str) -> None:
        """Mount CephFS afresh on ``client``: kill its ceph-fuse (which ends its FUSE
        connection), unmount, evict its session at the MDS (so that the caps a dead client held
        stop blocking the new one), mount again."""
        name = f"fuse.{client}"
        self._kill(name)
        host = self.hosts.hosts[client]
        # From mountinfo, never a call on the mount: an aborted FUSE mount stays mounted, and
        # answers every call (mountpoint's stat too) with ENOTCONN until it is unmounted. Only
        # the FUSE mount goes: the bed's read-only underlay stays beneath it.
        while self._fuse_mounted(client):
            _sh([*host.nsenter(), "umount", "-l", self.mount_point])
        sessions = self.ceph_json("tell", "mds.a", "session", "ls")
        assert isinstance(sessions, list)
        for session in sessions:
            if session.get("client_metadata", {}).get("entity_id") == name:
                self.ceph("tell", "mds.a", "client", "evict", f"id={session['id']}")
        _client_mount(self, host)

    def abort_mount(self, client: str) -> int:
        """Abort ``client``'s FUSE connection (``/sys/fs/fuse/connections/N/abort``): calls
        hung in the kernel end with ENOTCONN. Returns N."""
        number = self.fuse_connection(client)
        Path(f"/sys/fs/fuse/connections/{number}/abort").write_text("1")
        return number


def _missing() -> str | None:
    """Why this machine cannot hold a Ceph bed, or None."""
    return bed_lacks("ceph", "network and mount namespaces", TOOLS, PACKAGES, "ceph-fuse")


def _mount_fusectl() -> None:
    """fusectl at /sys/fs/fuse/connections, for :meth:`CephBed.abort_mount` (left mounted:
    it is the kernel's, empty of anything but live connections)."""
    if not _is_mount("/sys/fs/fuse/connections"):
        _sh(["mount", "-t", "fusectl", "fusectl", "/sys/fs/fuse/connections"])


def _client(bed: CephBed, host: Host) -> None:
    """Make ``host``'s mount and UTS namespaces and mount CephFS there with ceph-fuse."""
    _client_namespaces(bed.hosts, host)
    _client_mount(bed, host)


def _client_mount(bed: CephBed, host: Host) -> None:
    """Start ``host``'s ceph-fuse and wait until CephFS is mounted."""
    fuse = ["ceph-fuse", "--id", f"fuse.{host.name}", bed.mount_point]
    bed._daemon(host.name, fuse, f"fuse.{host.name}")

    def mounted() -> bool:
        done = bed.hosts.run(host.name, ["cat", "/proc/self/mountinfo"])
        return any(
            line.split()[4] == bed.mount_point and "ceph-fuse" in line
            for line in done.stdout.splitlines()
        )

    try:
        _wait(mounted, START_S, f"ceph-fuse mounted on {host.name}")
    except RuntimeError as error:
        logs = [bed.state / "log" / f"fuse.{host.name}.out"]
        logs += sorted((bed.state / "log").glob(f"client.fuse.{host.name}*.log"))
        tails = [p.read_text(errors="replace")[-1500:] for p in logs if p.exists()]
        raise RuntimeError(f"{error}; its logs end:\n" + "\n".join(tails)) from None


def _start_cluster(bed: CephBed) -> None:
    s = bed.state
    for folder in ("run", "log", "mon/a", "mgr/x", "mds/a", "rgw/rgw"):
        (s / folder).mkdir(parents=True)
    conf = bed.conf
    _sh(["ceph-authtool", "--create-keyring", str(s / "keyring"), "--gen-key", "-n", "mon."])
    monmap = s / "monmap"
    fsid = next(line for line in conf.read_text().splitlines() if line.startswith("fsid"))
    _sh(["monmaptool", "--create", "--fsid", fsid.split()[-1], str(monmap)])
    _sh(["monmaptool", "--addv", "a", f"[v2:{ADDRESSES[MON]}:3300]", str(monmap)])
    mkfs = ["ceph-mon", "-c", str(conf), "--mkfs", "-i", "a", "--monmap", str(monmap)]
    _sh(bed.hosts.command(MON, mkfs), timeout_s=START_S)
    bed._daemon(MON, ["ceph-mon", "-i", "a"], "mon.a")
    bed.ceph("mon", "enable-msgr2", timeout_s=START_S)
    bed._daemon(MGR, ["ceph-mgr", "-i", "x"], "mgr.x")
    for index in range(bed.osds):
        osd_uuid = str(uuid.uuid4())
        number = bed.ceph("osd", "new", osd_uuid).strip()
        assert number == str(index), number
        (s / "osd" / number).mkdir(parents=True)
        mkfs = ["ceph-osd", "-c", str(conf), "-i", number, "--mkfs", "--osd-uuid", osd_uuid]
        _sh(bed.hosts.command(osd_host(index), mkfs), timeout_s=START_S)
        bed.start_osd(index)
    _wait(lambda: len(bed.osds_up()) == bed.osds, START_S, "every OSD up")
    bed.ceph("osd", "crush", "rm-device-class", "osd.0")
    bed.ceph("osd", "crush", "set-device-class", "first", "osd.0")
    bed.ceph("osd", "crush", "rule", "create-replicated", "on-first", "default", "osd", "first")
    bed.ceph("osd", "pool", "create", "metadata", str(POOL_PGS))
    for pool, size in DATA_POOLS.items():
        rule = ["replicated", "on-first"] if pool == "first" else []
        bed.ceph("osd", "pool", "create", pool, str(POOL_PGS), str(POOL_PGS), *rule)
        bed.ceph("osd", "pool", "set", pool, "size", str(size), "--yes-i-really-mean-it")
    default = next(iter(DATA_POOLS))
    bed.ceph("fs", "new", "cephfs", "metadata", default)
    for pool in list(DATA_POOLS)[1:]:
        bed.ceph("fs", "add_data_pool", "cephfs", pool)
    bed._daemon(MDS, ["ceph-mds", "-i", "a"], "mds.a")

    def mds_active() -> bool:
        dump = bed.ceph_json("fs", "dump")
        assert isinstance(dump, dict)
        infos = dump["filesystems"][0]["mdsmap"]["info"].values() if dump["filesystems"] else []
        return any(info["state"] == "up:active" for info in infos)

    _wait(mds_active, START_S, "the MDS active")


def _start_rgw(bed: CephBed) -> None:
    user = [
        "radosgw-admin", "-c", str(bed.conf), "user", "create", "--uid=ckptbed",
        "--display-name=ckptbed", f"--access-key={S3_KEY}", f"--secret={S3_SECRET}",
    ]  # fmt: skip
    _sh(bed.hosts.command(RGW, user), timeout_s=START_S)
    bed.start_rgw()


@contextlib.contextmanager
def ceph_bed(
    clients: int = 1,
    osds: int = 2,
    rgw: bool = True,
    mount_point: str = "/ckpt",
    osd_bytes: int = 3 << 29,
) -> Iterator[CephBed]:
    """A Ceph cluster of ``osds`` memstore OSDs (``osd_bytes`` of memory at most each), a
    mon, a mgr, an MDS and (``rgw``) radosgw, with CephFS mounted at ``mount_point`` on
    ``clients`` clients (``node0``...).

    Skips the calling test, saying why, where the machine cannot hold one; tears everything
    down on the way out, after a failure too (and fails the test if teardown left anything).
    """
    reason = _missing()
    if reason:
        bed_missing("ceph", reason)
    if not 1 <= clients <= 20 or not 1 <= osds <= 8:
        raise ValueError(f"clients must be 1 to 20 and osds 1 to 8, not {clients}, {osds}")
    with bed_frame("ceph", "ckptceph", "ckc", mount_point) as (hosts, token, _):
        state = hosts.state
        bed = CephBed(hosts=hosts, osds=osds, conf=state / "ceph.conf")
        _mount_fusectl()
        bed.conf.write_text(_conf(state, osd_bytes))
        servers = {**ADDRESSES, RGW: RGW_ADDRESS}
        servers.update({osd_host(i): f"198.18.0.{30 + i}" for i in range(osds)})
        for name, address in servers.items():
            _add_host(hosts, Host(name, address, f"ckc-{token}-{name}"))
        _add_client_hosts(hosts, clients, f"ckc-{token}", state)
        _start_cluster(bed)
        for name in hosts.clients:
            _client(bed, hosts.hosts[name])
        if rgw:
            _start_rgw(bed)
        write_agent(hosts)
        yield bed


def wait_for(predicate: object, timeout_s: float, what: str) -> None:
    """The host bed's bounded poll, for the tests on this bed."""
    _wait(predicate, timeout_s, what)
