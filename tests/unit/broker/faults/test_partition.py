from __future__ import annotations

from tests.integration.broker.faults.partition import (
    Connection,
    parse_proc_net_tcp,
    partition_ruleset,
)
from tests.integration.broker.faults.schedule import FaultKind, build_schedule

PROC_NET_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:2382 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1
   1: 0100007F:C350 0100007F:0FA1 01 00000000:00000000 00:00000000 00000000     0        0 1002 1
   2: 0100007F:2382 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 1003 1
"""


def test_proc_net_tcp_gives_ports_of_connections_not_listeners() -> None:
    assert parse_proc_net_tcp(PROC_NET_TCP) == {
        1002: Connection(0xC350, 0x0FA1),
        1003: Connection(0x2382, 0xD431),
    }


def test_the_ruleset_drops_new_and_open_connections_across_the_partition_only() -> None:
    text = partition_ruleset(
        "kpo_netfault_1_ab",
        "unified/kpo_netfault_1_ab/isolated",
        "unified/kpo_netfault_1_ab/peers",
        9092,
        [2181, 9093, 9094],
        [Connection(50000, 2181), Connection(50000, 2181), Connection(41000, 9092)],
    )
    lines = [line.strip() for line in text.splitlines()]
    assert lines[0] == "table inet kpo_netfault_1_ab {"
    assert "type filter hook output priority -10; policy accept;" in lines
    rules = [line for line in lines if line.endswith(" drop")]
    assert rules == [
        'socket cgroupv2 level 2 "unified/kpo_netfault_1_ab/isolated" '
        "tcp dport { 2181, 9093, 9094 } drop",
        'socket cgroupv2 level 2 "unified/kpo_netfault_1_ab/peers" tcp dport 9092 drop',
        "tcp sport 41000 tcp dport 9092 drop",
        "tcp sport 9092 tcp dport 41000 drop",
        "tcp sport 50000 tcp dport 2181 drop",
        "tcp sport 2181 tcp dport 50000 drop",
    ]


def test_a_pure_cgroup2_mount_counts_levels_from_its_root() -> None:
    text = partition_ruleset("t", "kpo_x/isolated", "kpo_x/peers", 1, [2], [])
    assert 'socket cgroupv2 level 2 "kpo_x/isolated" tcp dport { 2 } drop' in text


def test_a_schedule_of_some_kinds_has_only_those() -> None:
    only = frozenset({FaultKind.NETWORK_PARTITION, FaultKind.KILL_LEADER})
    schedule = build_schedule(5, 9, 6, only)
    assert {f.kind for f in schedule} == only
    assert build_schedule(5, 9, 6) != schedule
