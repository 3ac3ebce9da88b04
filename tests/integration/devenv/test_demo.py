"""The main job (``make demo``) end to end on real processes, and ``demo-down``."""

import io
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from kpo_devenv.demo import REASSIGNMENT, TARGET, DemoOptions, reassignment_manifest, run_demo
from kpo_devenv.demo_data import DigestBuilder
from kpo_devenv.demo_group import GROUP_ID, GroupCheck, LagSample, lag_line
from kpo_devenv.demo_state import (
    POINTER_FILE,
    STATE_FILE,
    ProcessRecord,
    demo_down,
    is_alive,
    read_state,
    record,
    write_state,
)
from kpo_devenv.demo_verify import PartitionCheck
from kpo_devenv.demo_watch import eta_text, summary
from kpo_devenv.process import ManagedProcess
from kpo_kafka.admin_types import PartitionInfo

pytestmark = pytest.mark.integration


def test_demo_moves_verifies_and_stops_everything(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    workdir = tmp_path / "demo"
    out = io.StringIO()
    console = Console(file=out, width=200)
    options = DemoOptions(workdir=workdir, megabytes=8, throttle=1024 * 1024, state_dir=state_dir)

    result = run_demo(options, console)

    text = out.getvalue()
    operator_log = (workdir / "operator" / "operator.log").read_text()[-4000:]
    assert result.ok, f"{text}\n--- operator log ---\n{operator_log}"
    status = result.reassignment["status"]
    assert status["phase"] == "Completed"
    completed = [c for c in status["conditions"] if c["type"] == "Completed"]
    assert completed and completed[0]["status"] == "True"
    assert status["totals"]["partitionsDone"] == len(TARGET)
    assert status["totals"]["bytesDone"] == status["totals"]["bytesTotal"] > 0
    for check in result.checks:
        assert check.problems() == []
        assert check.produced.records > 0
        if check.partition in TARGET:
            assert check.state.replicas == TARGET[check.partition]
            assert set(check.on_disk) == {2}  # broker 2's own log was decoded and matched
    # The consumer group read while the partitions moved (its lag was printed and shrank),
    # and after the move its committed offsets cover every produced record.
    assert result.lag and result.lag[0].total > 0, text
    assert f"group {GROUP_ID}: lag" in text
    assert [c.partition for c in result.group] == [c.partition for c in result.checks]
    for group_check in result.group:
        assert group_check.problems() == []
        assert group_check.committed == group_check.produced.records > 0
    assert result.rebalances <= 1, text  # leaders moving is no reason to rebalance
    # The fleet was secured (SASL_SSL, mutual TLS, ACLs): the operator connected as its own
    # SCRAM user, without its password in the log; unauthenticated and unauthorized reads
    # were refused.
    assert result.security_problems == [], text
    assert "refused: a client without TLS and SASL gets nothing" in text
    assert "refused: a client without TLS gets nothing from ZooKeeper" in text
    assert "refused: User:kpo-operator may not read orders: TOPIC_AUTHORIZATION_FAILED" in text
    full_log = (workdir / "operator" / "operator.log").read_text()
    assert "SASL_SSL, SCRAM-SHA-512 as kpo-operator" in full_log
    password = (workdir / "operator" / "kafka-client" / "password").read_text().strip()
    assert password and password not in full_log and password not in text
    assert f"kubectl get partitionreassignments -o wide -n {options.namespace}" in text
    assert f"{REASSIGNMENT}   Completed" in text
    # Every process the demo recorded is gone, and demo-down has nothing left to stop.
    _, entries = read_state_file(workdir)
    assert {e.name for e in entries} >= {"zookeeper", "etcd", "broker-2", "kpo-operator"}
    assert [e.name for e in entries if e.group and is_alive(e)] == []
    assert not (state_dir / POINTER_FILE).exists()
    assert demo_down(state_dir, timeout_s=5) == []


def read_state_file(workdir: Path) -> tuple[Path | None, list[ProcessRecord]]:
    """Read ``demo.pids`` through a throwaway pointer (the demo removed its own)."""
    pointer_dir = workdir / "pointer"
    pointer_dir.mkdir()
    (pointer_dir / POINTER_FILE).write_text(str(workdir))
    return read_state(pointer_dir)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_demo_down_on_stale_state_is_safe(tmp_path: Path) -> None:
    workdir = tmp_path / "old-demo"
    workdir.mkdir()
    # A live process whose pid is recorded with another start time stands for a recycled pid.
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        live = record("bystander", bystander.pid)
        assert live is not None
        recycled = ProcessRecord("broker-0", bystander.pid, live.start_ticks - 1)
        entries = [
            ProcessRecord("demo", _dead_pid(), 1, group=False),
            ProcessRecord("zookeeper", _dead_pid(), 1),
            recycled,
        ]
        write_state(workdir, entries, tmp_path / "state")

        assert demo_down(tmp_path / "state", timeout_s=2) == []

        assert bystander.poll() is None
        assert not (tmp_path / "state" / POINTER_FILE).exists()
        assert (workdir / STATE_FILE).exists()
        assert demo_down(tmp_path / "state", timeout_s=2) == []  # and again, with no pointer
    finally:
        bystander.kill()
        bystander.wait()


def test_demo_down_stops_recorded_processes(tmp_path: Path) -> None:
    server = ManagedProcess("sleeper", ["sleep", "300"], tmp_path / "sleeper.log")
    server.start()
    owner = subprocess.Popen(["sleep", "300"])
    try:
        assert server.pid is not None
        entries = [record("demo", owner.pid, group=False), record("sleeper", server.pid)]
        write_state(tmp_path, [e for e in entries if e], tmp_path / "state")

        assert sorted(demo_down(tmp_path / "state", timeout_s=5)) == ["demo", "sleeper"]

        assert owner.wait(timeout=10) != 0
        assert not server.is_running()
        assert not (tmp_path / "state" / POINTER_FILE).exists()
    finally:
        owner.kill()
        owner.wait()
        server.stop()


def test_digest_depends_on_offsets_and_content_not_arrival_order() -> None:
    records = [(0, b"k0", b"v0"), (1, b"k1", b"v1"), (2, None, b"")]
    forward, backward = DigestBuilder(), DigestBuilder()
    for r in records:
        forward.add(*r)
    for r in reversed(records):
        backward.add(*r)
    assert forward.digest() == backward.digest()
    assert forward.digest().records == 3 and forward.digest().value_bytes == 4

    shifted = DigestBuilder()
    for offset, key, value in records:
        shifted.add(offset + 1, key, value)
    changed = DigestBuilder()
    for offset, key, value in records:
        changed.add(offset, key, value + b"!" if offset == 1 else value)
    assert shifted.digest().sha256 != forward.digest().sha256
    assert changed.digest().sha256 != forward.digest().sha256


def test_eta_and_summary_read_the_status_as_the_crd_defines_it() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert eta_text("2030-01-01T00:00:42Z", now) == "0:42"
    assert eta_text("2030-01-01T01:02:03Z", now) == "1:02:03"
    assert eta_text("2029-12-31T23:59:00Z", now) == "0:00"
    assert eta_text(None, now) == "--:--"
    status = {
        "message": "all 2 partitions reassigned",
        "startTime": "2030-01-01T00:00:00Z",
        "completionTime": "2030-01-01T00:00:34Z",
        "totals": {"bytesDone": 35 * 2**20},
    }
    assert summary(status) == "all 2 partitions reassigned; 35.0 MiB copied in 34 s"


def test_a_check_reports_every_mismatch() -> None:
    good = DigestBuilder()
    good.add(0, b"k", b"v")
    bad = DigestBuilder()
    bad.add(0, b"k", b"x")
    check = PartitionCheck(
        partition=0,
        original=(0, 1),
        expected=(2, 1),
        state=PartitionInfo(replicas=(2, 1, 0), isr=(1,), leader=1),
        produced=good.digest(),
        via_leader=good.digest(),
        on_disk={2: bad.digest()},
        sizes={1: 100, 2: 90},
    )
    problems = check.problems()
    assert len(problems) == 4, problems
    assert any("replicas [2, 1, 0]" in p for p in problems)
    assert any("broker 2's log" in p for p in problems)
    lost = GroupCheck(0, committed=0, end=1, produced=good.digest(), read=bad.digest())
    assert len(lost.problems()) == 2, lost.problems()
    assert GroupCheck(0, 1, 1, good.digest(), good.digest()).problems() == []
    manifest = reassignment_manifest("ns", 1234)
    assert manifest["spec"]["throttle"] == {"replicationRate": 1234}
    assert [p["replicas"] for p in manifest["spec"]["partitions"]] == [
        list(r) for r in TARGET.values()
    ]


def test_lag_is_log_end_minus_committed_as_kafka_consumer_groups_reports_it() -> None:
    sample = LagSample(0.0, committed={0: 10, 1: 3}, ends={0: 12, 1: 3, 2: 5})
    assert sample.lag == {0: 2, 1: 0, 2: 5}  # nothing committed: lag from offset 0
    assert sample.total == 7
    assert lag_line(sample, 8192) == "lag 7 records (0.1 MiB): 0:2 1:0 2:5"
    assert lag_line(None, 8192) == "lag: not measured yet"
