"""Turning kazoo watch recipe calls into bare watch events."""

from __future__ import annotations

from kpo_broker.zk.watches import (
    ZkWatch,
    ZkWatchEvent,
    ZkWatchEventType,
    children_watcher,
    data_watcher,
)

STAT = object()


def test_children_watcher_skips_the_initial_call() -> None:
    events: list[ZkWatchEvent] = []
    on_children = children_watcher(ZkWatch("/brokers/ids"), events.append)

    assert on_children(["1"], None) is None
    assert events == []
    on_children(["1", "2"], None)
    assert events == [ZkWatchEvent("/brokers/ids", ZkWatchEventType.CHILDREN_CHANGED)]


def test_children_watcher_ends_once_cancelled() -> None:
    events: list[ZkWatchEvent] = []
    handle = ZkWatch("/brokers/ids")
    on_children = children_watcher(handle, events.append)
    on_children([], None)
    handle.cancel()
    assert on_children(["1"], None) is False
    assert events == []


def test_data_watcher_reports_creation_change_and_deletion() -> None:
    events: list[ZkWatchEvent] = []
    on_data = data_watcher(ZkWatch("/controller"), events.append)

    on_data(None, None, None)  # installed while absent
    on_data(b"1", STAT, None)
    on_data(b"2", STAT, None)
    on_data(None, None, None)

    assert [e.type for e in events] == [
        ZkWatchEventType.CREATED,
        ZkWatchEventType.DATA_CHANGED,
        ZkWatchEventType.DELETED,
    ]
    assert {e.path for e in events} == {"/controller"}


def test_data_watcher_skips_the_initial_call_on_an_existing_znode() -> None:
    events: list[ZkWatchEvent] = []
    on_data = data_watcher(ZkWatch("/controller"), events.append)
    on_data(b"1", STAT, None)
    assert events == []
    on_data(b"2", STAT, None)
    assert events == [ZkWatchEvent("/controller", ZkWatchEventType.DATA_CHANGED)]


def test_data_watcher_ends_once_cancelled() -> None:
    events: list[ZkWatchEvent] = []
    handle = ZkWatch("/controller")
    on_data = data_watcher(handle, events.append)
    on_data(None, None, None)
    handle.cancel()
    assert not handle.active
    assert on_data(b"1", STAT, None) is False
    assert events == []
