"""ZkSession logic without a server: a fake kazoo client records what is sent."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    SessionExpiredError,
    UnimplementedError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from kpo_broker.zk import paths, session
from kpo_broker.zk.errors import ControllerMovedError, ZkConnectionLossError, ZkOperationError
from kpo_broker.zk.multi_read import GET_DATA_TYPE, MultiRead
from kpo_broker.zk.ops import CheckOp, CreateOp, DeleteOp, SetDataOp
from kpo_broker.zk.session import ZkSession, ZkSessionState, multi_results


@dataclass
class Stat:
    version: int


class FakeAsyncResult:
    """What a kazoo ``*_async`` call returns: ``get`` gives the value or raises it."""

    def __init__(self, kazoo: FakeKazoo, label: str, value: object) -> None:
        self._kazoo, self._label, self._value = kazoo, label, value

    def set(self, value: object) -> None:
        self._value = value

    def get(self, timeout: float) -> object:
        self._kazoo.log.append(("wait", self._label))
        if isinstance(self._value, BaseException):
            raise self._value
        return self._value


class FakeTransaction:
    def __init__(self, kazoo: FakeKazoo) -> None:
        self._kazoo = kazoo
        self.ops: list[tuple[Any, ...]] = []

    def check(self, path: str, version: int) -> None:
        self.ops.append(("check", path, version))

    def create(self, path: str, data: bytes, *, acl: Any, ephemeral: bool, sequence: bool) -> None:
        self.ops.append(("create", path, data, ephemeral, sequence))

    def set_data(self, path: str, data: bytes, version: int) -> None:
        self.ops.append(("set_data", path, data, version))

    def delete(self, path: str, version: int) -> None:
        self.ops.append(("delete", path, version))

    def commit_async(self) -> FakeAsyncResult:
        self._kazoo.transactions.append(self.ops)
        label = f"multi {self.ops[-1][1]}"
        self._kazoo.log.append(("send", label))
        value = self._kazoo.reply("multi", self.ops[-1][1], [Stat(0)] * len(self.ops))
        return FakeAsyncResult(self._kazoo, label, value)


class FakeKazoo:
    """A kazoo client whose async calls answer from ``replies`` (FIFO per method and path)."""

    def __init__(self, hosts: str, timeout: float, **kwargs: Any) -> None:
        self.hosts = hosts
        self.options = kwargs
        self.client_id: tuple[int, bytes] | None = (0x5EED, b"password")
        self.log: list[tuple[str, str]] = []
        self.replies: dict[tuple[str, str], list[object]] = {}
        self.transactions: list[list[tuple[Any, ...]]] = []
        self.multi_reads: list[tuple[str, list[str]]] = []
        self.listeners: list[Callable[[KazooState], None]] = []

    def reply(self, method: str, path: str, default: object) -> object:
        queued = self.replies.get((method, path))
        return queued.pop(0) if queued else default

    def __getattr__(self, method: str) -> Callable[..., FakeAsyncResult]:
        if not method.endswith("_async"):
            raise AttributeError(method)

        def send(path: str, *args: object, **kwargs: object) -> FakeAsyncResult:
            label = f"{method} {path}"
            self.log.append(("send", label))
            return FakeAsyncResult(self, label, self.reply(method, path, Stat(1)))

        return send

    def transaction(self) -> FakeTransaction:
        return FakeTransaction(self)

    # multiRead goes through kazoo's request queue (handler.async_result + _call).
    chroot = "/kafka"
    multi_read_unsupported = False

    @property
    def handler(self) -> FakeKazoo:
        return self

    def async_result(self) -> FakeAsyncResult:
        return FakeAsyncResult(self, "", None)

    def _call(self, request: MultiRead, result: FakeAsyncResult) -> None:
        names = [path.removeprefix(self.chroot) for path in request.paths]
        method = "get_async" if request.op_type == GET_DATA_TYPE else "get_children_async"
        default: object = (b"", Stat(1)) if method == "get_async" else []
        self.multi_reads.append((method, names))
        result._label = f"multiRead {names[0]}"
        self.log.append(("send", result._label))
        if self.multi_read_unsupported:
            result.set(UnimplementedError())
        else:
            result.set([self.reply(method, name, default) for name in names])

    def add_listener(self, listener: Callable[[KazooState], None]) -> None:
        self.listeners.append(listener)


@pytest.fixture
def fake_kazoo(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeKazoo]]:
    created: list[FakeKazoo] = []

    def factory(hosts: str, timeout: float, **kwargs: Any) -> FakeKazoo:
        created.append(FakeKazoo(hosts, timeout, **kwargs))
        return created[-1]

    monkeypatch.setattr(session, "KazooClient", factory)
    yield created


def new_session(fake_kazoo: list[FakeKazoo], **kwargs: Any) -> tuple[ZkSession, FakeKazoo]:
    zk = ZkSession("127.0.0.1:2181/kafka", **kwargs)
    return zk, fake_kazoo[-1]


def test_requests_are_pipelined_in_a_sliding_window_of_max_in_flight(
    fake_kazoo: list[FakeKazoo],
) -> None:
    zk, kazoo = new_session(fake_kazoo, max_in_flight_requests=3)
    znodes = [f"/n{i}" for i in range(7)]
    for i, path in enumerate(znodes):
        kazoo.replies[("get_async", path)] = [(b"", Stat(i))]

    results = zk.handle_requests([zk.request("get_async", p) for p in znodes])

    assert [stat.version for _, stat in results] == list(range(7))
    # Three sent at once; then each answer awaited lets the next one go.
    order = ["s0", "s1", "s2", "w0", "s3", "w1", "s4", "w2", "s5", "w3", "s6", "w4", "w5", "w6"]
    kinds = {"s": "send", "w": "wait"}
    assert kazoo.log == [(kinds[o[0]], f"get_async /n{o[1]}") for o in order]
    assert zk.stats.requests == 7
    assert zk.stats.round_trips == 3


def test_the_default_window_is_kafkas_zookeeper_max_in_flight_requests(
    fake_kazoo: list[FakeKazoo],
) -> None:
    zk, kazoo = new_session(fake_kazoo)
    zk.handle_requests([zk.request("get_async", f"/n{i}") for i in range(11)])

    assert kazoo.log[:11] == [("send", f"get_async /n{i}") for i in range(10)] + [
        ("wait", "get_async /n0")
    ]


def test_stats_is_a_snapshot(fake_kazoo: list[FakeKazoo]) -> None:
    zk, _ = new_session(fake_kazoo)
    before = zk.stats
    zk.handle_request("get_async", "/a")
    assert (before.requests, before.round_trips) == (0, 0)
    assert (zk.stats.requests, zk.stats.round_trips) == (1, 1)


def test_max_in_flight_requests_must_be_positive(fake_kazoo: list[FakeKazoo]) -> None:
    with pytest.raises(ValueError, match="max_in_flight_requests"):
        ZkSession("127.0.0.1:2181", max_in_flight_requests=0)


def test_zookeeper_errors_are_returned_as_results(fake_kazoo: list[FakeKazoo]) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.replies[("get_async", "/missing")] = [NoNodeError()]
    assert isinstance(zk.handle_request("get_async", "/missing"), NoNodeError)


@pytest.mark.parametrize(
    "error", [ConnectionLoss(), SessionExpiredError(), KazooTimeoutError("slow")]
)
def test_session_failures_raise_connection_loss(
    fake_kazoo: list[FakeKazoo], error: Exception
) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.replies[("get_async", "/a")] = [error]
    with pytest.raises(ZkConnectionLossError, match="/a"):
        zk.handle_request("get_async", "/a")


def test_fenced_multi_checks_the_controller_epoch_version_first(
    fake_kazoo: list[FakeKazoo],
) -> None:
    zk, kazoo = new_session(fake_kazoo)
    ops = [
        CreateOp("/c", b"x", ephemeral=True),
        SetDataOp("/s", b"y", 4),
        DeleteOp("/d"),
        CheckOp("/k", 2),
    ]

    results = zk.multi(ops, fence_zk_version=7)

    assert kazoo.transactions == [
        [
            ("check", paths.CONTROLLER_EPOCH, 7),
            ("create", "/c", b"x", True, False),
            ("set_data", "/s", b"y", 4),
            ("delete", "/d", -1),
            ("check", "/k", 2),
        ]
    ]
    assert len(results) == len(ops)  # the fence's own result is dropped


def test_unfenced_multi_sends_only_the_ops(fake_kazoo: list[FakeKazoo]) -> None:
    zk, kazoo = new_session(fake_kazoo)
    zk.multi([CreateOp("/c", sequence=True)])
    assert kazoo.transactions == [[("create", "/c", b"", False, True)]]


def test_failed_fence_raises_controller_moved() -> None:
    with pytest.raises(ControllerMovedError, match="/s"):
        multi_results([BadVersionError(), RolledBackError()], True, "/s")


def test_passed_fence_returns_the_ops_results() -> None:
    conflict = NodeExistsError()
    assert multi_results([RolledBackError(), conflict], True, "/s") == [conflict]
    assert multi_results([Stat(3), Stat(4)], True, "/s") == [Stat(4)]


def test_unfenced_results_are_returned_whole() -> None:
    assert multi_results([Stat(3), Stat(4)], False, "/s") == [Stat(3), Stat(4)]


def test_multi_failing_as_a_whole_raises_operation_error() -> None:
    with pytest.raises(ZkOperationError, match="NoAuthError") as caught:
        multi_results(NoAuthError(), True, "/s")
    assert caught.value.path == "/s"


def test_fenced_multi_reports_a_moved_controller(fake_kazoo: list[FakeKazoo]) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.replies[("multi", "/s")] = [[BadVersionError(), RolledBackError()]]
    with pytest.raises(ControllerMovedError):
        zk.multi([SetDataOp("/s", b"")], fence_zk_version=1)


@pytest.mark.parametrize(
    ("kazoo_state", "state"),
    [
        (KazooState.CONNECTED, ZkSessionState.CONNECTED),
        (KazooState.SUSPENDED, ZkSessionState.SUSPENDED),
        (KazooState.LOST, ZkSessionState.EXPIRED),
    ],
)
def test_session_listener_gets_kafka_session_states(
    fake_kazoo: list[FakeKazoo], kazoo_state: KazooState, state: ZkSessionState
) -> None:
    zk, kazoo = new_session(fake_kazoo)
    seen: list[ZkSessionState] = []
    zk.add_session_listener(seen.append)
    kazoo.listeners[0](kazoo_state)
    assert seen == [state]


def test_a_new_session_after_an_expiry_is_reported_as_new_session(
    fake_kazoo: list[FakeKazoo],
) -> None:
    zk, kazoo = new_session(fake_kazoo)
    seen: list[ZkSessionState] = []
    zk.add_session_listener(seen.append)
    kazoo.listeners[0](KazooState.CONNECTED)
    kazoo.listeners[0](KazooState.SUSPENDED)
    kazoo.client_id = None
    kazoo.listeners[0](KazooState.LOST)
    kazoo.client_id = (0xBEEF, b"other")
    kazoo.listeners[0](KazooState.CONNECTED)
    assert seen == [
        ZkSessionState.CONNECTED,
        ZkSessionState.SUSPENDED,
        ZkSessionState.EXPIRED,
        ZkSessionState.NEW_SESSION,
    ]


def test_a_listener_that_fails_does_not_stop_the_others(fake_kazoo: list[FakeKazoo]) -> None:
    zk, kazoo = new_session(fake_kazoo)
    seen: list[ZkSessionState] = []

    def failing(state: ZkSessionState) -> None:
        raise RuntimeError("listener bug")

    zk.add_session_listener(failing)
    zk.add_session_listener(seen.append)
    kazoo.listeners[0](KazooState.SUSPENDED)
    assert seen == [ZkSessionState.SUSPENDED]


def test_reconnection_backs_off_to_at_most_a_second_forever(fake_kazoo: list[FakeKazoo]) -> None:
    _, kazoo = new_session(fake_kazoo)
    for option in ("connection_retry", "command_retry"):
        retry = kazoo.options[option]
        assert retry["max_tries"] == -1
        assert retry["max_delay"] == session.RECONNECT_BACKOFF_MAX_S == 1.0


def test_tracker_reports_reconnection_to_the_same_session_as_connected() -> None:
    tracker = session.SessionStateTracker()
    assert tracker.on_state(KazooState.CONNECTED, 1) is ZkSessionState.CONNECTED
    assert tracker.on_state(KazooState.SUSPENDED, None) is ZkSessionState.SUSPENDED
    assert tracker.on_state(KazooState.CONNECTED, 1) is ZkSessionState.CONNECTED


def test_tracker_reports_every_later_session_as_new_even_without_lost() -> None:
    tracker = session.SessionStateTracker()
    assert tracker.on_state(KazooState.CONNECTED, 1) is ZkSessionState.CONNECTED
    assert tracker.on_state(KazooState.LOST, None) is ZkSessionState.EXPIRED
    assert tracker.on_state(KazooState.CONNECTED, 2) is ZkSessionState.NEW_SESSION
    assert tracker.on_state(KazooState.CONNECTED, 3) is ZkSessionState.NEW_SESSION
    assert tracker.on_state(KazooState.CONNECTED, 3) is ZkSessionState.CONNECTED


def test_session_id_is_the_kazoo_client_id(fake_kazoo: list[FakeKazoo]) -> None:
    zk, _ = new_session(fake_kazoo)
    assert zk.session_id == 0x5EED


def test_set_or_create_creates_a_missing_znode(fake_kazoo: list[FakeKazoo]) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.replies[("set_async", "/a")] = [NoNodeError()]
    kazoo.replies[("create_async", "/a")] = [("/a", Stat(0))]
    assert zk.set_or_create("/a", b"x") == 0
    assert [label for kind, label in kazoo.log if kind == "send"] == [
        "set_async /a",
        "create_async /a",
    ]


def test_set_or_create_overwrites_a_znode_created_meanwhile(fake_kazoo: list[FakeKazoo]) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.replies[("set_async", "/a")] = [NoNodeError(), Stat(5)]
    kazoo.replies[("create_async", "/a")] = [NodeExistsError()]
    assert zk.set_or_create("/a", b"x") == 5


@pytest.mark.parametrize("error", [BadVersionError(), NoNodeError()])
def test_set_or_create_compare_and_set_conflict_returns_none(
    fake_kazoo: list[FakeKazoo], error: Exception
) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.replies[("set_async", "/a")] = [error]
    assert zk.set_or_create("/a", b"x", expected_version=3) is None


def test_set_or_create_refused_write_raises(fake_kazoo: list[FakeKazoo]) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.replies[("set_async", "/a")] = [NoAuthError()]
    with pytest.raises(ZkOperationError, match="NoAuthError"):
        zk.set_or_create("/a", b"x")


def test_ensure_paths_raises_on_a_refused_path(fake_kazoo: list[FakeKazoo]) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.replies[("ensure_path_async", "/b")] = [NoAuthError()]
    with pytest.raises(ZkOperationError) as caught:
        zk.ensure_paths(["/a", "/b"])
    assert caught.value.path == "/b"


def test_delete_recursive_deletes_children_first_level_by_level(
    fake_kazoo: list[FakeKazoo],
) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.replies[("get_children_async", "/a")] = [["b", "c"]]
    kazoo.replies[("get_children_async", "/a/b")] = [[]]
    kazoo.replies[("get_children_async", "/a/c")] = [[]]
    kazoo.replies[("get_children_async", "/gone")] = [NoNodeError()]
    kazoo.replies[("delete_async", "/gone")] = [NoNodeError()]

    zk.delete_recursive(["/a", "/gone"], None)

    deletes = [label for kind, label in kazoo.log if kind == "send" and "delete" in label]
    assert deletes == [
        "delete_async /a/b",
        "delete_async /a/c",
        "delete_async /a",
        "delete_async /gone",
    ]


def test_fenced_delete_recursive_sends_fenced_multis(fake_kazoo: list[FakeKazoo]) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.replies[("get_children_async", "/a")] = [[]]
    zk.delete_recursive(["/a"], 9)
    assert kazoo.transactions == [[("check", paths.CONTROLLER_EPOCH, 9), ("delete", "/a", -1)]]


def test_fenced_delete_recursive_reports_a_moved_controller(fake_kazoo: list[FakeKazoo]) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.replies[("get_children_async", "/a")] = [[]]
    kazoo.replies[("multi", "/a")] = [[BadVersionError(), RolledBackError()]]
    with pytest.raises(ControllerMovedError):
        zk.delete_recursive(["/a"], 9)


def test_get_many_reads_a_hundred_znodes_per_multi_read_under_the_chroot(
    fake_kazoo: list[FakeKazoo],
) -> None:
    zk, kazoo = new_session(fake_kazoo)
    znodes = [f"/n{i}" for i in range(250)]
    kazoo.replies[("get_async", "/n7")] = [NoNodeError()]
    kazoo.replies[("get_async", "/n200")] = [(b"x", Stat(5))]

    results = zk.get_many(znodes)

    assert [names for _, names in kazoo.multi_reads] == [
        znodes[:100],
        znodes[100:200],
        znodes[200:],
    ]
    assert len(results) == 250
    assert isinstance(results[7], NoNodeError)
    assert results[200] == (b"x", Stat(5))
    assert results[0] == (b"", Stat(1))
    assert (zk.stats.requests, zk.stats.round_trips) == (3, 1)


def test_get_children_many_lists_through_multi_read(fake_kazoo: list[FakeKazoo]) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.replies[("get_children_async", "/a")] = [["b", "c"]]
    assert zk.get_children_many(["/a", "/d"]) == [["b", "c"], []]
    assert kazoo.multi_reads == [("get_children_async", ["/a", "/d"])]


def test_a_server_without_multi_read_is_read_one_znode_per_request(
    fake_kazoo: list[FakeKazoo],
) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.multi_read_unsupported = True
    for version, name in enumerate("abcd"):
        kazoo.replies[("get_async", f"/{name}")] = [(name.encode(), Stat(version))]

    assert zk.get_many(["/a", "/b"]) == [(b"a", Stat(0)), (b"b", Stat(1))]
    assert zk.get_many(["/c", "/d"]) == [(b"c", Stat(2)), (b"d", Stat(3))]

    assert len(kazoo.multi_reads) == 1  # never tried again
    sent = [label for kind, label in kazoo.log if kind == "send"]
    assert sent[1:] == ["get_async /a", "get_async /b", "get_async /c", "get_async /d"]


def test_a_single_znode_is_read_with_a_plain_get(fake_kazoo: list[FakeKazoo]) -> None:
    zk, kazoo = new_session(fake_kazoo)
    kazoo.replies[("get_async", "/a")] = [(b"a", Stat(3))]
    assert zk.get_many(["/a"]) == [(b"a", Stat(3))]
    assert kazoo.multi_reads == []


def test_get_many_reads_fewer_large_znodes_per_request(fake_kazoo: list[FakeKazoo]) -> None:
    zk, kazoo = new_session(fake_kazoo)
    zk.get_many([f"/t{i}" for i in range(25)], per_request=10)
    assert [len(names) for _, names in kazoo.multi_reads] == [10, 10, 5]
