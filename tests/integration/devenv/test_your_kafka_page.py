"""The getting-started page "The operator against your Kafka", run as written.

The page's shell blocks are read from ``docs/getting-started/your-kafka.md`` and run
unchanged in one ``bash`` (:class:`kpo_devenv.doc_shell.ShellSession`), block
after block as a reader pastes them, with only the page's three placeholders set as
variables: ``KAFKA_BOOTSTRAP`` (the ``SASL_SSL`` listener of a real Apache Kafka 4.4 in
KRaft mode: three nodes, SCRAM-SHA-512, ``StandardAuthorizer``, the super user
``admin`` created when the nodes' storage is formatted), ``KAFKA_CA`` (the CA that
signed the nodes' certificates) and ``KAFKA_ADMIN_CONFIG`` (``admin``'s client
properties). The block the page runs "in a second terminal", ``python -m kpo_devenv
control-plane``, runs as a process of its own (after the block the page asks to run in
every terminal: the Python environment and the tools on ``PATH``), and the page's
"Ctrl-C" stops it.

The shell's working directory stands for the checkout's root: it holds links to the
checkout's ``crds``, ``.venv`` and ``charts``, the things the page's commands take from
there.
Kafka's command-line tools are Kafka's own classes from the jars of
``tools/install-kafka.sh 4``, on ``PATH`` under the names of Kafka's ``bin/`` scripts,
each a one-line script that runs the class those scripts run (through
``kafka-run-class.sh``, with a 256 MiB heap and a log4j2 configuration at WARN).

Part (b), the Helm chart in ``mode=operator-only``, runs against the session's control
plane made a small cluster (kube-controller-manager, kube-scheduler, kwok's fake nodes);
see :func:`test_part_b_runs_as_written`.

Once a move is Completed (in part (a) before the page's clean-up deletes the topic), the
test checks what the page promises: the partition is on brokers 1 and 2 and in sync
there, every record the page produced (``seq 1 200000``) is read back unchanged and in
order, no throttle config is left, and the operator logged in as ``kpo-operator``
without its password showing in its log.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kafka import KafkaConsumer, TopicPartition

from kpo_devenv.apache_kafka import (
    KafkaSecurity,
    client_properties,
    java_command,
    kafka_classpath,
    write_properties,
)
from kpo_devenv.apache_kraft import KraftKafkaCluster
from kpo_devenv.controlplane import ControlPlane
from kpo_devenv.doc_shell import (
    ShellBlock,
    ShellSession,
    interrupt,
    shell_blocks,
    start_in_terminal,
    wait_for_output,
)
from kpo_devenv.net import free_port
from kpo_devenv.pki import KafkaPki, generate_kafka_pki
from kpo_devenv.process import ManagedProcess
from kpo_devenv.tools import pinned_version, tools_dir
from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.client_config import ClientSecurity, client_security_from_env
from tests.conftest import REPO_ROOT
from tests.integration.broker.conftest import wait_for
from tests.integration.charts.conftest import cluster_addons, fake_nodes
from tests.integration.charts.local_pods import LocalPod, Manifest
from tests.integration.operator.conftest import LIST_KEYS, THROTTLE_KEYS
from tests.unit.charts.helm import helm

__all__ = ["cluster_addons", "fake_nodes"]  # the chart tests' fixtures, used by part (b)

pytestmark = pytest.mark.integration

PAGE = REPO_ROOT / "docs" / "getting-started" / "your-kafka.md"
PART_B = "## In a cluster: Helm with `mode=operator-only`"
ADMIN_PASSWORD = "admin-Pw-3e81c0"
TOPIC = "kpo-try"
RECORDS = 200_000  # the page's `seq 1 200000`

#: Kafka's bin/ scripts used by the page -> the class each runs (Kafka 4.x).
KAFKA_SCRIPTS = {
    "kafka-configs.sh": "org.apache.kafka.tools.ConfigCommand",
    "kafka-acls.sh": "org.apache.kafka.tools.AclCommand",
    "kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer.sh": "org.apache.kafka.tools.ConsoleProducer",
}
_TOOLS_LOG4J2 = """\
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
"""


@dataclass
class SecuredKafka:
    """The Kafka cluster the page is run against, and an admin client for the checks."""

    cluster: KraftKafkaCluster
    pki: KafkaPki
    admin_config: Path
    admin: ClientSecurity

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_for("SASL_SSL")

    def admin_client(self) -> KafkaPythonAdmin:
        return KafkaPythonAdmin(self.bootstrap, "kpo-page-test", 15000, self.admin)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    """Apache Kafka 4.4 (KRaft, 3 nodes): SASL_SSL with SCRAM-SHA-512, StandardAuthorizer."""
    workdir = tmp_path_factory.mktemp("your-kafka")
    pki = generate_kafka_pki(workdir / "pki")
    security = KafkaSecurity(
        pki,
        listeners=("SASL_SSL", "SSL"),
        ssl_client_auth=True,
        scram_users={"admin": ADMIN_PASSWORD},
        super_users=("User:admin",),
    )
    cluster = KraftKafkaCluster(
        workdir / "kafka",
        kafka_classpath(pinned_version("KAFKA4_VERSION")),
        3,
        {"auto.create.topics.enable": "false", "replica.fetch.wait.max.ms": "100"},
        security=security,
    )
    admin_config = write_properties(
        workdir / "admin.properties", client_properties(security, "SASL_SSL", user="admin")
    )
    try:
        cluster.start()
        found = SecuredKafka(cluster, pki, admin_config, client_security_from_env({}, admin_config))

        def ready() -> bool:
            admin = found.admin_client()
            try:
                info = admin.describe_cluster()
            finally:
                admin.close()
            return set(info.brokers) == {0, 1, 2} and info.controller_id is not None

        wait_for(ready, 180, "the three nodes and a controller")
        yield found
    finally:
        cluster.stop()


def kafka_scripts(folder: Path) -> Path:
    """Write Kafka's ``bin/`` scripts the page uses into ``folder``; return it."""
    folder.mkdir(parents=True, exist_ok=True)
    log4j = folder / "tools-log4j2.properties"
    log4j.write_text(_TOOLS_LOG4J2)
    classpath = kafka_classpath(pinned_version("KAFKA4_VERSION"))
    for script, main_class in KAFKA_SCRIPTS.items():
        argv = java_command(classpath, 256, main_class, [], [f"-Dlog4j2.configurationFile={log4j}"])
        path = folder / script
        path.write_text(f'#!/bin/sh\nexec {shlex.join(argv)} "$@"\n')
        path.chmod(0o755)
    return folder


def page_parts() -> tuple[list[ShellBlock], list[ShellBlock]]:
    """The page's shell blocks before part (b) (with the set-up), and those of part (b)."""
    text = PAGE.read_text()
    cut = text.splitlines().index(PART_B) + 1
    blocks = shell_blocks(text)
    return [b for b in blocks if b.line < cut], [b for b in blocks if b.line > cut]


def reader(kafka: SecuredKafka, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The reader's working directory (the checkout's root, as the page asks) and variables.

    The variables are the page's three placeholders and ``PATH`` with Kafka's tools.
    """
    checkout = (tmp_path / "checkout").resolve()
    checkout.mkdir()
    for name in ("crds", ".venv", "charts"):
        (checkout / name).symlink_to(REPO_ROOT / name)
    scripts = kafka_scripts(tmp_path / "kafka-bin")
    env = {
        "KAFKA_BOOTSTRAP": kafka.bootstrap,
        "KAFKA_CA": str(kafka.pki.ca.cert),
        "KAFKA_ADMIN_CONFIG": str(kafka.admin_config),
        # Kafka's tools on PATH, as the page asks; and make tools' folder (KPO_TOOLS_DIR).
        "PATH": os.pathsep.join([str(scripts), str(tools_dir() / "bin"), os.environ["PATH"]]),
    }
    return checkout, env


def _processes_in(cwd: Path, text: str) -> list[int]:
    """Running processes whose working directory is ``cwd`` and command line has ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            here = Path(os.readlink(entry / "cwd"))
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if here == cwd and text in argv:
            found.append(int(entry.name))
    return found


def _read_all(kafka: SecuredKafka) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=kafka.bootstrap,
        enable_auto_commit=False,
        consumer_timeout_ms=10000,
        **kafka.admin.kafka_python_kwargs(),
    )
    try:
        partition = TopicPartition(TOPIC, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        values = []
        for record in consumer:
            values.append(record.value)
            if len(values) >= RECORDS:
                break
        return values
    finally:
        consumer.close()


def _check_the_move(kafka: SecuredKafka, cwd: Path, operator_log: Path) -> None:
    """What the page promises once the move is Completed (the topic still exists)."""
    admin = kafka.admin_client()
    try:
        info = admin.describe_topics([TOPIC])[TOPIC][0]
        configs = admin.describe_configs(
            brokers=[0, 1, 2], topics=[TOPIC], keys=THROTTLE_KEYS + LIST_KEYS
        )
    finally:
        admin.close()
    assert info.replicas == (1, 2)
    assert set(info.isr) == {1, 2}
    assert {r.name: dict(v) for r, v in configs.items() if v} == {}  # throttles removed
    assert _read_all(kafka) == [str(i).encode() for i in range(1, RECORDS + 1)]
    log = operator_log.read_text()
    assert "kpo operator started" in log and "SASL_SSL, SCRAM-SHA-512 as kpo-operator" in log
    password = (cwd / "kpo-operator.password").read_text().strip()
    assert len(password) == 48 and password not in log


def test_part_a_runs_as_written(kafka: SecuredKafka, tmp_path: Path) -> None:
    blocks, _ = page_parts()
    checkout, env = reader(kafka, tmp_path)
    [defined] = [b for b in blocks if b.marker == "placeholders"]
    placeholders = re.findall(r"^export (\w+)=", defined.text, re.MULTILINE)
    assert placeholders == ["KAFKA_BOOTSTRAP", "KAFKA_CA", "KAFKA_ADMIN_CONFIG"]
    markers = [b.marker for b in blocks if b.marker]
    assert markers == ["every-terminal", "placeholders", "second-terminal"]
    # A second terminal is set up as the page says every terminal is.
    setup = "".join(b.text for b in blocks if b.marker == "every-terminal")

    session = ShellSession(tmp_path / "session", checkout, env).start()
    terminals: list[ManagedProcess] = []
    outputs: list[str] = []
    try:
        for number, block in enumerate(blocks, 1):
            if block.marker == "placeholders":
                continue
            if block.marker == "second-terminal":
                terminal = start_in_terminal(
                    f"terminal-{number}",
                    setup + block.text,
                    tmp_path / f"terminal-{number}.log",
                    checkout,
                    env,
                )
                terminals.append(terminal)
                wait_for_output(terminal, block.args["ready"], 300)
                continue
            if "--delete --topic kpo-try" in block.text:
                _check_the_move(kafka, checkout, checkout / "kpo-operator.log")
            outputs.append(session.run(block.text, timeout_s=900))
        moved = next(o for o in outputs if "kind: PartitionReassignment" in o)
        assert "partitionreassignment.kpo.dev/move-kpo-try condition met" in moved
        assert re.search(r"move-kpo-try\s+Completed\s", moved), moved
        assert re.search(r"Partition: 0\s+Leader: [12]\s+Replicas: 1,2\s+Isr: [12],[12]", moved)
        # `kill %1` of the clean-up stopped the operator.
        wait_for(lambda: not _processes_in(checkout, "kpo_operator"), 60, "the operator to stop")
        admin = kafka.admin_client()
        try:
            wait_for(lambda: not admin.describe_topics([TOPIC]), 60, "the topic deleted")
        finally:
            admin.close()
        # Ctrl-C in the control plane's terminal stops it cleanly and takes its kubeconfig.
        [control_plane] = terminals
        assert interrupt(control_plane) == 0, control_plane.log_tail()
        assert not (checkout / "kpo-kubeconfig").exists()
        assert control_plane.log_tail().rstrip().endswith("stopped")
    finally:
        session.stop()
        for terminal in terminals:
            terminal.stop()
    time.sleep(0.5)
    assert not _processes_in(checkout, "kpo")


def _service_account_kubeconfig(plane: ControlPlane, account: str, path: Path) -> Path:
    """A kubeconfig of ``plane`` with a token of the ServiceAccount, as a pod would have."""
    token = plane.kubectl("-n", "kpo", "create", "token", account, "--duration=1h").stdout
    config = yaml.safe_load(plane.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": token.strip()}
    path.write_text(yaml.safe_dump(config))
    return path


def _operator_pod(plane: ControlPlane, workdir: Path) -> ManagedProcess:
    """Run the release's operator pod as a local process, as its node's kubelet would.

    Its spec is the chart's rendered Deployment; the Secret it mounts is the one the page
    created, read from the API server.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    listed = helm("get", "manifest", "kpo", "-n", "kpo", "--kubeconfig", str(plane.kubeconfig))
    assert listed.returncode == 0, listed.stderr
    objects: list[Manifest] = [o for o in yaml.safe_load_all(listed.stdout) if o]
    secret = plane.kubectl("-n", "kpo", "get", "secret", "kafka-client", "-o", "json").stdout
    objects.append(json.loads(secret))
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    template = deployment["spec"]["template"]
    spec = template["spec"]
    kubeconfig = _service_account_kubeconfig(
        plane, spec["serviceAccountName"], workdir / "kubeconfig"
    )
    pod = LocalPod(
        "kpo-operator",
        spec,
        objects,
        workdir,
        labels=template["metadata"].get("labels", {}),
        namespace="kpo",
        overrides={"KPO_LIVENESS_PORT": str(free_port()), "KUBECONFIG": str(kubeconfig)},
    )
    return pod.start()


def test_part_b_runs_as_written(
    kafka: SecuredKafka, control_plane: ControlPlane, fake_nodes: list[str], tmp_path: Path
) -> None:
    """Part (b) in a cluster of real parts; the operator's pod runs as a local process.

    "Your cluster" is the session's control plane with kube-controller-manager,
    kube-scheduler and kwok's fake nodes (which mark the release's pod Running, so
    ``kubectl rollout status`` returns); the operator itself runs from the Deployment's
    rendered pod spec, with the Secret the page created and a token of the chart's
    ServiceAccount. Before part (b) the reader has done steps 2 and 5 of part (a): the
    user, its ACLs and its password file, and the topic.
    """
    blocks, part_b = page_parts()
    checkout, env = reader(kafka, tmp_path)
    env["KUBECONFIG"] = str(control_plane.kubeconfig)
    setup = [b for b in blocks if b.marker == "every-terminal"]
    step2 = [b for b in blocks if b.section.startswith("2. ")]
    step5 = [b for b in blocks if b.section.startswith("5. ")]
    assert len(setup) == 1 and len(step2) == 2 and len(step5) == 1
    secret_block, chart_block, move_block = part_b
    assert "create secret generic kafka-client" in secret_block.text
    assert "helm install kpo charts/kpo" in chart_block.text
    assert "kind: PartitionReassignment" in move_block.text

    session = ShellSession(tmp_path / "session", checkout, env).start()
    operator: ManagedProcess | None = None
    try:
        for block in [*setup, *step2, *step5, secret_block]:
            session.run(block.text, timeout_s=900)
        installed = session.run(chart_block.text, timeout_s=900)
        assert 'deployment "kpo-operator" successfully rolled out' in installed, installed
        operator = _operator_pod(control_plane, tmp_path / "operator-pod")
        moved = session.run(move_block.text, timeout_s=900)
        assert "partitionreassignment.kpo.dev/move-kpo-try condition met" in moved
        assert operator.is_running()
        _check_the_move(kafka, checkout, operator.log_path)
        forbidden = [
            line for line in operator.log_path.read_text().splitlines() if "Forbidden" in line
        ]
        assert not forbidden, forbidden[:5]
    finally:
        session.stop()
        if operator is not None:
            operator.stop(timeout_s=15)
        helm("uninstall", "kpo", "-n", "kpo", "--kubeconfig", str(control_plane.kubeconfig))
        control_plane.drop_finalizers("kpo")
        control_plane.kubectl("delete", "namespace", "kpo", "--timeout=120s", check=False)
