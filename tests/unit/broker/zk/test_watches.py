"""Turning kazoo's children watch recipe calls into bare watch events."""

from __future__ import annotations

from kpo_broker.zk.watches import ZkWatch, ZkWatchEvent, ZkWatchEventType, children_watcher


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
