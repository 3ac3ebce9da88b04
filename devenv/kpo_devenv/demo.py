"""The main job, end to end: a real stack, real data, a throttled move driven by the operator.

:func:`run_demo` starts ZooKeeper, a control plane (etcd + kube-apiserver, CRDs
Established), three brokers in three racks and the kpo operator watching one
namespace, all as local processes. It creates topic ``orders`` on brokers 0 and
1, produces data with kafka-python (``acks=all``), starts a consumer group of three
members reading the topic at a pace that lasts about as long as the move
(:mod:`kpo_devenv.demo_group`; its lag is printed while the partitions move), applies a
``PartitionReassignment`` with ``kubectl`` that gives broker 2 a replica of two
partitions under a replication throttle (KIP-73), follows the object's status
in a progress bar until ``Completed``, verifies the data (see
:mod:`kpo_devenv.demo_verify`) and the group's committed offsets, shows
``kubectl get``/``describe`` and stops everything. :mod:`kpo_devenv.demo_state` records
the processes for ``demo-down``.

The fleet is secured as the chart's default install (:mod:`kpo_devenv.demo_security`):
clients connect with SASL_SSL (SCRAM-SHA-512), brokers with mutual TLS, ``AclAuthorizer``
allows the operator only what its calls need and the demo's clients only their topic and
group, and brokers reach ZooKeeper over TLS only (KIP-515, client certificates) and
authenticate there with SASL. ``plaintext`` (``--plaintext``,
for development only) runs everything on PLAINTEXT without authorization, as before.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

from kpo_devenv.controlplane import ControlPlane
from kpo_devenv.demo_data import (
    CLIENT_ID,
    RECORD_BYTES,
    PartitionDigest,
    produce,
    wait_brokers,
)
from kpo_devenv.demo_group import (
    GROUP_ID,
    DemoGroup,
    GroupCheck,
    LagSample,
    check_group,
    group_table,
    lag_line,
)
from kpo_devenv.demo_security import LISTENERS, DemoSecurity
from kpo_devenv.demo_state import (
    clear_state,
    default_state_dir,
    ensure_not_running,
    record,
    write_state,
)
from kpo_devenv.demo_verify import HOW_CHECKED, PartitionCheck, checks_table, verify_move
from kpo_devenv.demo_watch import GROUP, PLURAL, VERSION, mib, summary, watch_reassignment
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.operator_process import OperatorProcess
from kpo_devenv.process import ManagedProcess
from kpo_devenv.runner import ContainerRunner
from kpo_devenv.zookeeper import ZooKeeperServer
from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.client_config import ClientSecurity

REPO_ROOT = Path(__file__).resolve().parents[2]
TOPIC = "orders"
RACKS = ("zone-a", "zone-b", "zone-c")
#: partition -> replicas at creation (preferred leader first): broker 2 holds nothing.
ORIGINAL: dict[int, tuple[int, ...]] = {0: (0, 1), 1: (1, 0), 2: (0, 1)}
#: partition -> replicas after the move: every broker ends with two replicas, one leadership.
TARGET: dict[int, tuple[int, ...]] = {0: (2, 1), 1: (1, 2)}
#: Broker properties for the demo. Kafka's quota window (11 samples of 1 s) lets a throttled
#: follower take ~10 s worth of bytes at once and then wait; 3 samples and smaller follower
#: fetches keep the same average rate but make the progress smooth at demo time scales.
#: ``__consumer_offsets`` gets 6 partitions instead of 50: created when the group first looks
#: for its coordinator, it is then ready in a moment on a small machine.
BROKER_PROPERTIES = {
    "replication.quota.window.num": "3",
    "replica.fetch.max.bytes": "262144",
    "offsets.topic.num.partitions": "6",
}
#: Default replication throttle, bytes/s: 50 MiB moves ~33 MiB, about 35 s here.
DEFAULT_THROTTLE = 1024 * 1024
REASSIGNMENT = "orders-onto-broker-2"
#: Members of the demo's consumer group (one per partition of the topic).
GROUP_MEMBERS = 3
#: Seconds between two lines about the group's lag while the partitions move.
LAG_EVERY_S = 3.0


@dataclass
class DemoOptions:
    """What the demo does.

    Attributes:
        workdir: Folder for every server's data and logs, the manifest and ``demo.pids``.
        megabytes: Data to produce, MiB.
        throttle: ``spec.throttle.replicationRate``, bytes/s.
        timeout_s: Limit for the move, seconds; None: three times the throttled estimate + 120.
        hold: Keep the stack running after the job until SIGTERM/Ctrl-C or ``demo-down``.
        namespace: Namespace of the PartitionReassignment (the only one the operator watches).
        crds_dir: Folder of the CRD manifests.
        state_dir: Where ``current`` points at the running demo (default ``~/.cache/kpo-demo``).
        images: Run ZooKeeper, the brokers and the operator in containers of these images
            (kind -> image, see :class:`kpo_devenv.runner.ContainerRunner`); None: as processes.
        plaintext: DEVELOPMENT ONLY: PLAINTEXT listeners, no authorization, ZooKeeper
            without SASL: anyone who reaches a port may do anything. Default: secured.
    """

    workdir: Path
    megabytes: int = 50
    throttle: int = DEFAULT_THROTTLE
    timeout_s: float | None = None
    hold: bool = False
    namespace: str = "kpo-demo"
    crds_dir: Path = REPO_ROOT / "crds"
    state_dir: Path = field(default_factory=default_state_dir)
    images: dict[str, str] | None = None
    plaintext: bool = False


@dataclass
class DemoResult:
    """How the demo ended.

    Attributes:
        phase: The PartitionReassignment's final ``status.phase``.
        checks: The verification of every partition.
        reassignment: The final object as the API server returned it.
        group: The consumer group's committed offsets and reads, per partition.
        lag: The group's lag samples printed while the partitions moved.
        rebalances: Assignments the group's members received while the partitions moved.
        security_problems: What the secured fleet should have refused and did not.
    """

    phase: str
    checks: list[PartitionCheck]
    reassignment: dict[str, Any]
    group: list[GroupCheck] = field(default_factory=list)
    lag: list[LagSample] = field(default_factory=list)
    rebalances: int = 0
    security_problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the move completed and every check, of the data and the group, passed."""
        checks: list[PartitionCheck | GroupCheck] = [*self.checks, *self.group]
        return (
            self.phase == "Completed"
            and len(self.group) == len(self.checks)
            and not any(c.problems() for c in checks)
            and not self.security_problems
        )


class DemoStack:
    """ZooKeeper, control plane, 3 brokers and the operator, recorded in ``demo.pids`` as started.

    Args:
        options: The demo's options (workdir, namespace, CRDs, state dir).
    """

    def __init__(self, options: DemoOptions) -> None:
        self.options = options
        base = options.workdir
        self.containers = ContainerRunner(options.images) if options.images else None
        self.security = None if options.plaintext else DemoSecurity.create(base, TOPIC, GROUP_ID)
        security = self.security
        self.zookeeper = ZooKeeperServer(
            base / "zookeeper",
            runner=self.containers,
            sasl_users=security.zookeeper_users if security else None,
            tls=security.zookeeper_tls(base / "zookeeper") if security else None,
        )
        self.plane = ControlPlane(base / "control-plane", crds_dir=options.crds_dir)
        brokers = base / "kafka"
        secured: dict[str, Any] = {}
        if security is not None:  # listeners, keystores and JAAS files in each broker's folder
            secured = {
                "listeners": LISTENERS,
                "broker_properties": lambda i: security.broker_properties(
                    i, brokers / f"broker-{i}", len(RACKS)
                ),
                "broker_env": lambda i: security.broker_env(brokers / f"broker-{i}"),
            }
        self.kafka = KafkaCluster(
            brokers,
            f"{self.zookeeper.connect_string}/kafka",
            len(RACKS),
            BROKER_PROPERTIES,
            list(RACKS),
            runner=self.containers,
            **secured,
        )
        self.operator: OperatorProcess | None = None
        self._owner = record("demo", os.getpid(), group=False)

    @property
    def client(self) -> ClientSecurity:
        """How the demo's own clients connect: as ``kpo-demo`` over SASL_SSL, or PLAINTEXT."""
        return self.security.client() if self.security else ClientSecurity()

    def processes(self) -> list[ManagedProcess]:
        """Return the server processes, in start order."""
        procs = [self.zookeeper.process, *self.plane.processes]
        procs += [b.process for b in self.kafka.brokers.values()]
        return procs + ([self.operator.process] if self.operator else [])

    def record_state(self) -> None:
        """Write ``demo.pids`` with this process and every live server."""
        entries = [self._owner] if self._owner else []
        for proc in self.processes():
            entry = record(proc.name, proc.pid) if proc.pid and proc.is_running() else None
            entries += [entry] if entry else []
        write_state(self.options.workdir, entries, self.options.state_dir)

    def start(self, say: Callable[[str], None]) -> None:
        """Start everything in order, recording each process as soon as it runs.

        Raises:
            ProcessStartError: a server did not start (message carries its log tail).
            KubectlError: the CRDs were not Established.
            DemoDataError: the brokers did not all register.
        """
        self.record_state()
        self.zookeeper.start()
        self.record_state()
        say(f"ZooKeeper on {self.zookeeper.connect_string}")
        self.plane.start()
        self.record_state()
        say(f"kube-apiserver on {self.plane.apiserver.url}, CRDs Established")
        if self.security is not None:
            self.security.provision(self.kafka.zookeeper_connect)
            for line in self.security.summary():
                say(line)
        else:
            say("[yellow]PLAINTEXT, no ACLs: for development only[/]")
        self.kafka.start()
        self.record_state()
        admin = KafkaPythonAdmin(self.kafka.bootstrap_servers, CLIENT_ID, security=self.client)
        with closing(admin):
            controller = wait_brokers(admin, list(self.kafka.brokers))
        for broker_id, broker in self.kafka.brokers.items():
            say(f"broker {broker_id} on {broker.bootstrap} (broker.rack={RACKS[broker_id]})")
        say(f"controller: broker {controller}")
        self.plane.kubectl("create", "namespace", self.options.namespace)
        workdir = self.options.workdir / "operator"
        self.operator = OperatorProcess(
            workdir,
            self.plane.kubeconfig,
            self.kafka.bootstrap_servers,
            namespaces=[self.options.namespace],
            env=self.security.operator_env(workdir) if self.security else None,
            runner=self.containers,
        )
        self.operator.start()
        self.record_state()
        say(f"kpo operator watching namespace {self.options.namespace}")
        if self.security is not None:
            say("operator connects as User:kpo-operator (SASL_SSL, SCRAM-SHA-512)")

    def started_operator(self) -> OperatorProcess:
        """Return the operator process.

        Raises:
            RuntimeError: :meth:`start` has not got that far.
        """
        if self.operator is None:
            raise RuntimeError("the operator has not been started")
        return self.operator

    def stop(self) -> None:
        """Stop the operator, the brokers, the control plane, then ZooKeeper (idempotent)."""
        if self.operator is not None:
            self.operator.stop()
        self.kafka.stop()
        self.plane.stop()
        self.zookeeper.stop()
        if self.containers is not None:
            self.containers.remove_all()
        clear_state(self.options.workdir, self.options.state_dir)


def reassignment_manifest(namespace: str, throttle: int) -> dict[str, Any]:
    """Return the demo's PartitionReassignment: :data:`TARGET` under a ``throttle`` (bytes/s)."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PartitionReassignment",
        "metadata": {"name": REASSIGNMENT, "namespace": namespace},
        "spec": {
            "partitions": [
                {"topic": TOPIC, "partition": p, "replicas": list(r)} for p, r in TARGET.items()
            ],
            "throttle": {"replicationRate": throttle},
            "preferredLeaderElection": True,
        },
    }


def _handle_signal(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def install_signal_handlers() -> None:
    """Make SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt (``finally`` stops the servers).

    SIGINT is set explicitly because a shell starting a background job may hand it
    over ignored, and Python then installs no handler of its own.
    """
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _handle_signal)


def run_demo(options: DemoOptions, console: Console) -> DemoResult:
    """Run the main job end to end and stop everything (also on errors and Ctrl-C).

    Raises:
        DemoAlreadyRunningError: a demo recorded in ``options.state_dir`` still runs.
        DemoFailedError: the move did not complete.
        ProcessStartError, KubectlError, DemoDataError: the stack or the data failed.
    """
    ensure_not_running(options.state_dir)
    options.workdir.mkdir(parents=True, exist_ok=True)
    console.print(f"work dir: {options.workdir}")
    stack = DemoStack(options)
    group: DemoGroup | None = None
    try:
        console.rule("[bold]1. Start ZooKeeper, the control plane, 3 brokers and the operator")
        stack.start(lambda text: console.print(f"  ✓ {text}"))
        bootstrap = stack.kafka.bootstrap_servers
        client = stack.client
        console.rule(f"[bold]2. Create topic {TOPIC} and produce {options.megabytes} MiB")
        with closing(KafkaPythonAdmin(bootstrap, CLIENT_ID, security=client)) as admin:
            admin.create_topic(TOPIC, assignment=ORIGINAL, wait_for_metadata=True)
        console.print(
            f"  topic {TOPIC}: {', '.join(f'{p}→{list(r)}' for p, r in ORIGINAL.items())}"
        )
        produced = _produce(bootstrap, options.megabytes * 1024 * 1024, console, client)
        security_problems: list[str] = []
        if stack.security is not None:
            refused, security_problems = stack.security.refusals(
                bootstrap, TOPIC, stack.zookeeper.port
            )
            for line in refused:
                console.print(f"  ✓ refused: {escape(line)}")
            for problem in security_problems:
                console.print(f"[red]✗[/] {escape(problem)}")
        moving = sum(
            produced[p].value_bytes * len(set(r) - set(ORIGINAL[p])) for p, r in TARGET.items()
        )
        console.rule(f"[bold]3. A consumer group of {GROUP_MEMBERS} members reads {TOPIC}")
        group = _start_group(bootstrap, produced, moving / options.throttle, console, client)
        console.rule(
            f"[bold]4. kubectl apply a PartitionReassignment (throttle {mib(options.throttle)}/s)"
        )
        _apply(stack, console)
        timeout = options.timeout_s or 120 + 3 * moving / options.throttle
        console.rule("[bold]5. The operator throttles, submits and reports progress")
        assigned_before = group.assignments
        lag = _LagNotes(group)
        final = watch_reassignment(
            stack.plane.kubeconfig,
            options.namespace,
            REASSIGNMENT,
            stack.started_operator(),
            timeout,
            console,
            note=lag.note,
        )
        rebalances = group.assignments - assigned_before
        console.print(f"  {escape(summary(final.get('status') or {}))}")
        console.print(
            f"  group {GROUP_ID}: {lag_line(group.latest(), RECORD_BYTES)}; "
            f"{rebalances} rebalances while moving"
        )
        console.rule("[bold]6. Verify the data on the new replicas and the group's offsets")
        log_dirs = {i: b.log_dirs for i, b in stack.kafka.brokers.items()}
        checks = verify_move(bootstrap, TOPIC, ORIGINAL, TARGET, log_dirs, produced, client)
        console.print(HOW_CHECKED)
        console.print(checks_table(TOPIC, checks))
        group_checks = check_group(group, produced)
        console.print(GROUP_CHECKED)
        console.print(group_table(GROUP_ID, TOPIC, group_checks))
        every: list[PartitionCheck | GroupCheck] = [*checks, *group_checks]
        for problem in [p for c in every for p in c.problems()]:
            console.print(f"[red]✗[/] {escape(problem)}")
        console.rule("[bold]7. The result, as kubectl shows it")
        for args in (("get", PLURAL, "-o", "wide"), ("describe", "pr", REASSIGNMENT)):
            _show_kubectl(stack, console, *args, "-n", options.namespace)
        result = DemoResult(
            final.get("status", {}).get("phase", ""),
            checks,
            final,
            group_checks,
            lag.samples,
            rebalances,
            security_problems,
        )
        if options.hold:
            _hold(stack, console)
        return result
    finally:
        if group is not None:
            group.stop()
        console.print("stopping the operator, the brokers, kube-apiserver, etcd and ZooKeeper")
        stack.stop()


GROUP_CHECKED = """How the group is checked:
 • after the move the members read on until the group's committed offset of every
   partition (OffsetFetch, from the coordinator) is the partition's log end offset;
 • every committed offset must equal the number of records the producer got
   acknowledged (nothing lost, nothing committed past the end), and what the members
   read must have the producer's digest (nothing skipped)."""


class _LagNotes:
    """The lag line shown while the partitions move, and the samples printed."""

    def __init__(self, group: DemoGroup) -> None:
        self.group = group
        self.samples: list[LagSample] = []
        self._last = float("-inf")

    def note(self) -> str | None:
        """Return a line every :data:`LAG_EVERY_S` seconds (None in between)."""
        now = time.monotonic()
        if now - self._last < LAG_EVERY_S:
            return None
        self._last = now
        sample = self.group.latest()
        if sample is not None:
            self.samples.append(sample)
        return f"group {GROUP_ID}: {lag_line(sample, RECORD_BYTES)}"


def _start_group(
    bootstrap: str,
    produced: dict[int, PartitionDigest],
    move_s: float,
    console: Console,
    client: ClientSecurity,
) -> DemoGroup:
    """Start the group, paced so that reading the topic lasts about as long as the move."""
    total = sum(d.value_bytes for d in produced.values())
    rate = total / (move_s + 2)  # the move starts a moment after the group
    group = DemoGroup(bootstrap, TOPIC, sorted(produced), GROUP_MEMBERS, rate, security=client)
    group.start()
    owned = group.wait_balanced()
    console.print(
        f"  group {GROUP_ID} (kafka-python, subscribe(), commits after every poll), "
        f"paced at {mib(rate)}/s:"
    )
    for name, parts in sorted(owned.items()):
        console.print(f"  {name} owns {', '.join(f'{TOPIC}-{p}' for p in parts)}")
    return group


def _apply(stack: DemoStack, console: Console) -> None:
    options = stack.options
    manifest = options.workdir / f"{REASSIGNMENT}.yaml"
    body = reassignment_manifest(options.namespace, options.throttle)
    manifest.write_text(yaml.safe_dump(body, sort_keys=False))
    console.print(manifest.read_text(), markup=False, highlight=False)
    _show_kubectl(stack, console, "apply", "-f", str(manifest))


def _show_kubectl(stack: DemoStack, console: Console, *args: str) -> None:
    console.print(f"$ kubectl {' '.join(args)}", style="bold")
    out = stack.plane.kubectl(*args).stdout.rstrip()
    console.print(out, markup=False, highlight=False, soft_wrap=True)


def _produce(
    bootstrap: str, total_bytes: int, console: Console, client: ClientSecurity
) -> dict[int, PartitionDigest]:
    columns = (
        TextColumn("  producing"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("produce", total=total_bytes)
        produced = produce(
            bootstrap,
            TOPIC,
            sorted(ORIGINAL),
            total_bytes,
            on_progress=lambda n: bar.update(task, completed=n),
            security=client,
        )
    for p, d in produced.items():
        console.print(
            f"  {TOPIC}-{p}: {d.records} records, {mib(d.value_bytes)}, sha256 {d.short}…"
        )
    return produced


def _hold(stack: DemoStack, console: Console) -> None:
    tools = ""
    if stack.security is not None:
        config = stack.security.tool_properties(stack.options.workdir / "kpo-demo.properties")
        tools = f"  Kafka's tools, as User:kpo-demo: --command-config {config}\n"
    console.print(
        f"\nThe stack keeps running. Try:\n  export KUBECONFIG={stack.plane.kubeconfig}\n"
        f"  kubectl get pr -n {stack.options.namespace}\n"
        f"  bootstrap servers: {stack.kafka.bootstrap_servers}\n{tools}"
        "Ctrl-C here or `make demo-down` elsewhere stops everything."
    )
    try:
        while all(p.is_running() for p in stack.processes()):
            time.sleep(1)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM from demo-down: the job already ended
        return
    console.print(
        "[red]a server exited: "
        + ", ".join(p.name for p in stack.processes() if not p.is_running())
    )
