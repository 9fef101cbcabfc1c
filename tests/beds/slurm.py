"""A Slurm cluster on the host bed: slurmctld on ``head``, one slurmd on each client.

The suite's users launch it with Slurm (``srun --mpi=pmix``, ``sbatch``); this bed lets the
suite's own tests do the same on one machine. It lays Slurm over a host bed
(``tests/beds/hosts.py``): munged with a key the bed makes, ``slurmctld`` in the head
namespace (``198.18.0.2``), a ``slurmd -N node<i>`` in each client's namespaces (its own
address, so every slurmd keeps Slurm's one port). Every config, spool, log, socket and key
lives in the host bed's state directory (``<state>/slurm``); nothing of this machine's own
``/etc/slurm`` or ``/etc/munge`` is read or written. Needs root and Debian's ``slurmctld``,
``slurmd``, ``slurm-client``, ``munge`` and ``libpmix-dev`` (and the host bed's packages);
where any is missing, :func:`slurm_bed` skips the calling test and says why.

Settings a real site would tune, chosen here so faults end in seconds: proctrack/linuxproc and
task/none (no cgroups in a namespace), ``SlurmdTimeout`` 10 s (a node whose slurmd is gone is
DOWN within it and its jobs end as NODE_FAIL), ``KillWait`` 5 s (scancel's SIGTERM, then
SIGKILL), ``MpiDefault`` none (the test says ``--mpi=pmix`` as the README does). Each node
reads its own copy of the same ``slurm.conf`` beside its own ``mpi.conf``, so that every
slurmd keeps its PMIx client files in a directory of its own (``PMIxCliTmpDirBase``).

API::

    with host_bed(clients=3) as hosts, slurm_bed(hosts) as slurm:
        slurm.nodes                                  # ["node0", "node1", "node2"]
        slurm.target, slurm.target_view              # the target as the nodes see it
                                                     # (/ckpt), and as this process does
        slurm.srun_command(["ckptgate", "run", ...], nodes=3)   # argv: srun in head
        slurm.run_in_head(["sinfo"], timeout_s=10)   # any Slurm client command, in head
        job = slurm.sbatch(script_path, nodes=3, output=path)   # job id (str)
        slurm.wait_job(job, timeout_s=300)           # the job's final state ("COMPLETED")
        slurm.scancel(job)
        slurm.kill_slurmd("node1")                   # SIGKILL that node's slurmd alone
        slurm.env                                    # SLURM_CONF and the MPI settings

Teardown (after a failure too, bounded): every job is cancelled, the daemons get SIGTERM and
then SIGKILL, and the host bed's own teardown kills whatever is left in its namespaces and
removes the state directory with everything the bed wrote.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.beds import bed_missing
from tests.beds.hosts import HEAD, SUBNET, HostBed

TOOLS = ("slurmctld", "slurmd", "srun", "sbatch", "scancel", "squeue", "scontrol", "munged")
PMIX_LIBRARIES = (
    "/usr/lib/*/pmix*/lib/libpmix.so",
    "/usr/lib*/libpmix.so",
    "/usr/local/lib/libpmix.so",
)
"""Where Slurm's mpi/pmix plugin finds the unversioned ``libpmix.so`` it loads (Debian ships
it in libpmix-dev only; without it slurmd logs "mpi/pmix_v4: init: ... can not load PMIx
library" and has no pmix plugin)."""
CTLD_PORT = 6817
SLURMD_PORT = 6818
FINAL_STATES = (
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
    "BOOT_FAIL", "DEADLINE",
)  # fmt: skip
"""Job states after which Slurm runs nothing more of the job (``squeue`` no longer lists it
once ``MinJobAge`` has passed)."""

MPI_ENV = {"OMPI_MCA_btl": "self,tcp", "OMPI_MCA_btl_tcp_if_include": SUBNET}
"""OpenMPI between the bed's nodes over TCP on the bed's subnet, as between real hosts, rather
than through the shared memory that the namespaces of one machine happen to share. (PMIx
itself needs nothing: srun --mpi=pmix with mpi4py ran across the three nodes without these.)"""


def _which(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")


def missing() -> str | None:
    """Why this machine cannot hold a Slurm bed (beyond the host bed's needs), or None."""
    if os.geteuid() != 0:
        return "the Slurm bed needs root (it runs slurmctld, slurmd and munged)"
    absent = [tool for tool in TOOLS if _which(tool) is None]
    if absent:
        return (
            f"the Slurm bed needs {', '.join(absent)} (Debian: slurmctld slurmd slurm-client munge)"
        )
    if not any(glob.glob(pattern) for pattern in PMIX_LIBRARIES):
        return "the Slurm bed needs libpmix.so, which srun --mpi=pmix loads (Debian: libpmix-dev)"
    return None


def slurm_conf(state: Path, hosts: HostBed, cpus: int) -> str:
    """The cluster's ``slurm.conf``: head runs slurmctld, every client is a node of one
    partition, every path inside ``state``."""
    nodes = [
        f"NodeName={name} NodeAddr={hosts.hosts[name].address} CPUs={cpus} State=UNKNOWN"
        for name in hosts.clients
    ]
    return "\n".join(
        [
            "ClusterName=ckptbed",
            f"SlurmctldHost={HEAD}({hosts.hosts[HEAD].address})",
            f"SlurmctldPort={CTLD_PORT}",
            f"SlurmdPort={SLURMD_PORT}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={state}/munge.socket",
            f"StateSaveLocation={state}/ctld",
            f"SlurmdSpoolDir={state}/spool-%n",
            f"SlurmctldPidFile={state}/slurmctld.pid",
            f"SlurmdPidFile={state}/slurmd-%n.pid",
            f"SlurmctldLogFile={state}/slurmctld.log",
            f"SlurmdLogFile={state}/slurmd-%n.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SchedulerType=sched/builtin",
            "SelectType=select/linear",
            "MpiDefault=none",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            "SlurmdTimeout=10",
            "SlurmctldTimeout=10",
            "MessageTimeout=10",
            "KillWait=5",
            "InactiveLimit=0",
            "MinJobAge=300",
            "TreeWidth=65533",
            *nodes,
            "PartitionName=bed Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


@dataclass
class SlurmBed:
    """slurmctld, slurmd on every client and munged, on a host bed; see the module docstring."""

    hosts: HostBed
    state: Path
    target: str
    target_view: Path
    env: dict[str, str] = field(default_factory=dict)
    daemons: dict[str, subprocess.Popen[str]] = field(default_factory=dict)

    @property
    def nodes(self) -> list[str]:
        return list(self.hosts.clients)

    def conf(self, host: str) -> Path:
        """The ``slurm.conf`` that ``host``'s daemon and clients read."""
        return self.state / host / "slurm.conf"

    def srun_command(self, argv: Sequence[str], nodes: int | None = None) -> list[str]:
        """``srun -N <nodes> --ntasks-per-node=1 --mpi=pmix argv``, run in head (the README's
        launch line); start it with ``env=slurm.env``."""
        count = len(self.nodes) if nodes is None else nodes
        return self.hosts.command(
            HEAD,
            ["srun", "-N", str(count), "--ntasks-per-node=1", "--mpi=pmix", *argv],
        )

    def run_in_head(
        self, argv: Sequence[str], timeout_s: float = 30, **kwargs: object
    ) -> subprocess.CompletedProcess[str]:
        """A Slurm client command (sinfo, squeue, scontrol, ...) in head, bounded."""
        return self.hosts.run(HEAD, argv, timeout_s=timeout_s, env=self.env, **kwargs)

    def sbatch(
        self,
        script: Path,
        nodes: int,
        output: Path,
        options: Sequence[str] = (),
        args: Sequence[str] = (),
    ) -> str:
        """Submit ``script`` for ``nodes`` nodes from head with sbatch ``options`` and the
        script's ``args``; return the job id."""
        done = self.run_in_head(
            [
                "sbatch", "--parsable", "-N", str(nodes), f"--output={output}", *options,
                str(script), *args,
            ],
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"sbatch: exit {done.returncode}: {done.stderr.strip()}")
        return done.stdout.strip().split(";")[0]

    def job_state(self, job: str) -> str:
        """The job's state as slurmctld has it ("PENDING", "RUNNING", "COMPLETED", ...)."""
        done = self.run_in_head(["scontrol", "-o", "show", "job", job], timeout_s=20)
        for word in done.stdout.split():
            if word.startswith("JobState="):
                return word.split("=", 1)[1]
        raise RuntimeError(f"scontrol show job {job}: {done.stderr.strip() or done.stdout}")

    def wait_job(self, job: str, timeout_s: float, poll_s: float = 0.5) -> str:
        """Wait, bounded, for ``job`` to reach a final state; return it."""
        deadline = time.monotonic() + timeout_s
        while (state := self.job_state(job)) not in FINAL_STATES:
            if time.monotonic() > deadline:
                raise TimeoutError(f"Slurm job {job} still {state} after {timeout_s:.0f} s")
            time.sleep(poll_s)
        return state

    def wait_running(self, job: str, timeout_s: float) -> None:
        """Wait, bounded, for ``job`` to start running."""
        deadline = time.monotonic() + timeout_s
        while (state := self.job_state(job)) != "RUNNING":
            if state in FINAL_STATES or time.monotonic() > deadline:
                raise RuntimeError(f"Slurm job {job} is {state}, not RUNNING")
            time.sleep(0.2)

    def scancel(self, job: str) -> None:
        done = self.run_in_head(["scancel", job])
        if done.returncode != 0:
            raise RuntimeError(f"scancel {job}: {done.stderr.strip()}")

    def kill_slurmd(self, node: str) -> None:
        """SIGKILL ``node``'s slurmd alone: its job steps (slurmstepd and the tasks) stay, as
        on a node whose daemon crashed."""
        daemon = self.daemons[f"slurmd-{node}"]
        os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait(timeout=10)

    def node_state(self, node: str) -> str:
        done = self.run_in_head(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], timeout_s=20)
        return done.stdout.strip()


def _munge(bed: SlurmBed) -> None:
    key = bed.state / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    argv = [
        _which("munged") or "munged", "--foreground", "--force",
        f"--key-file={key}", f"--socket={bed.state}/munge.socket",
        f"--pid-file={bed.state}/munged.pid", f"--log-file={bed.state}/munged.log",
        f"--seed-file={bed.state}/munged.seed",
    ]  # fmt: skip
    with (bed.state / "munged.out").open("w") as log:
        bed.daemons["munged"] = bed.hosts.popen(HEAD, argv, stdout=log, stderr=subprocess.STDOUT)
    _wait(lambda: (bed.state / "munge.socket").exists(), 10, "munged's socket", bed)


def _wait(predicate: object, timeout_s: float, what: str, bed: SlurmBed) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        for name, daemon in bed.daemons.items():
            if daemon.poll() is not None:
                raise RuntimeError(f"Slurm bed: {name} exited {daemon.returncode}{_logs(bed)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"Slurm bed: no {what} within {timeout_s} s{_logs(bed)}")
        time.sleep(0.1)


def _logs(bed: SlurmBed) -> str:
    tails = []
    for log in sorted(bed.state.glob("*.log")) + sorted(bed.state.glob("*.out")):
        with contextlib.suppress(OSError):
            tails.append(f"\n--- {log.name}:\n" + log.read_text()[-1500:])
    return "".join(tails)


def _all_idle(bed: SlurmBed) -> bool:
    done = bed.run_in_head(["sinfo", "-h", "-N", "-o", "%N %T"], timeout_s=20)
    states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
    return all(states.get(node) == "idle" for node in bed.nodes)


def _stop(bed: SlurmBed) -> None:
    """Cancel every job, then end the daemons (SIGTERM, then SIGKILL), bounded."""
    if "slurmctld" in bed.daemons and bed.daemons["slurmctld"].poll() is None:
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            bed.run_in_head(["scancel", "--full", "--partition=bed"], timeout_s=10)
    for daemon in reversed(bed.daemons.values()):
        if daemon.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(daemon.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for daemon in bed.daemons.values():
        try:
            daemon.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait(timeout=5)


@contextlib.contextmanager
def slurm_bed(
    hosts: HostBed,
    target: str | None = None,
    target_view: Path | None = None,
    setup_timeout_s: float = 60,
) -> Iterator[SlurmBed]:
    """Slurm over ``hosts``; ``target`` is the shared target as the nodes see it (default the
    host bed's sshfs mount) and ``target_view`` where this process sees the same directory
    (default the host bed's export). Skips the calling test, saying why, where Slurm or munge
    is missing; stops every daemon and job on the way out."""
    reason = missing()
    if reason:
        bed_missing("slurm", reason)
    state = hosts.state / "slurm"
    state.mkdir(mode=0o700)
    bed = SlurmBed(
        hosts=hosts,
        state=state,
        target=target or hosts.mount_point,
        target_view=target_view or hosts.export,
    )
    cpus = 2  # this machine's; config_overrides lets a node claim more or fewer
    conf = slurm_conf(state, hosts, cpus)
    for host in [HEAD, *hosts.clients]:
        (state / host).mkdir()
        (state / host / "slurm.conf").write_text(conf)
        (state / host / "mpi.conf").write_text(f"PMIxCliTmpDirBase={state}/{host}/pmix\n")
        (state / host / "pmix").mkdir()
        (state / f"spool-{host}").mkdir()
    (state / "ctld").mkdir()
    bed.env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PMIX_"))},
        "SLURM_CONF": str(bed.conf(HEAD)),
        **MPI_ENV,
    }
    started = time.monotonic()
    try:
        _munge(bed)
        # slurmctld runs only where the host name is SlurmctldHost's: head gets its own.
        ctld = [
            "unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', HEAD,
            _which("slurmctld") or "slurmctld", "-D", "-i", "-f", str(bed.conf(HEAD)),
        ]  # fmt: skip
        with (state / "slurmctld.out").open("w") as log:
            bed.daemons["slurmctld"] = hosts.popen(
                HEAD, ctld, stdout=log, stderr=subprocess.STDOUT, env=bed.env
            )
        for node in hosts.clients:
            slurmd = [_which("slurmd") or "slurmd", "-D", "-N", node, "-f", str(bed.conf(node))]
            with (state / f"slurmd-{node}.out").open("w") as log:
                bed.daemons[f"slurmd-{node}"] = hosts.popen(
                    node, slurmd, stdout=log, stderr=subprocess.STDOUT, env=bed.env
                )
        remaining_s = setup_timeout_s - (time.monotonic() - started)
        _wait(lambda: _all_idle(bed), remaining_s, "idle nodes", bed)
        yield bed
    finally:
        _stop(bed)
