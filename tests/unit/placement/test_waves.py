import pytest

from kpo_placement.planner import Move
from kpo_placement.waves import WaveError, copy_source, split_into_waves, total_duration_s

MIB = 1 << 20


def move(p, old, new, size=20 * MIB):
    adding = [b for b in new if b not in old]
    return Move(p, "t", p, tuple(old), tuple(new), float(size * len(adding)))


@pytest.mark.parametrize(
    ("moves", "expected_s"),
    [
        # kpo_bench.throttle_plan's (a): one leader sends both copies: 2 x size / R
        ([move(0, (0,), (0, 1)), move(1, (0,), (0, 2))], 40.0),
        # (b): two leaders, one follower receives both: 2 x size / R
        ([move(0, (0,), (0, 2)), move(1, (1,), (1, 2))], 40.0),
        # (c): distinct leaders and followers: size / R
        ([move(0, (0,), (0, 1)), move(1, (1,), (1, 2))], 20.0),
    ],
)
def test_duration_matches_throttle_experiments(moves, expected_s):
    waves = split_into_waves(moves, throttle_bytes_per_s=1 * MIB)
    assert len(waves) == 1
    assert waves[0].predicted_duration_s == pytest.approx(expected_s)
    assert waves[0].bytes_moved == 40 * MIB


def test_busiest_broker_is_named():
    waves = split_into_waves(
        [move(0, (0,), (0, 2)), move(1, (1,), (1, 2))], throttle_bytes_per_s=MIB
    )
    assert waves[0].busiest_broker == 2
    assert waves[0].busiest_broker_bytes == 40 * MIB


def test_incoming_cap_splits_moves_to_one_broker():
    moves = [move(p, (20 + p,), (9,)) for p in range(10)]
    waves = split_into_waves(moves, throttle_bytes_per_s=MIB, max_incoming_per_broker=3)
    assert [len(w.moves) for w in waves] == [3, 3, 3, 1]
    for w in waves:
        assert sum(9 in m.adding for m in w.moves) <= 3
    assert sorted(m.p for w in waves for m in w.moves) == list(range(10))


def test_outgoing_cap_counts_the_current_leader():
    moves = [move(p, (0, 5), (0, 10 + p)) for p in range(4)]
    waves = split_into_waves(moves, throttle_bytes_per_s=MIB, max_outgoing_per_broker=2)
    assert [len(w.moves) for w in waves] == [2, 2]
    # with broker 5 leading half of them, two waves of 2 are no longer needed
    leaders = {0: 5, 1: 5}
    waves = split_into_waves(
        moves, throttle_bytes_per_s=MIB, max_outgoing_per_broker=2, leaders=leaders
    )
    assert [len(w.moves) for w in waves] == [4]
    assert copy_source(moves[0], leaders) == 5
    assert copy_source(moves[2], leaders) == 0


def test_byte_limit_packs_first_fit_decreasing():
    moves = [move(p, (p,), (10 + p,), size=s) for p, s in enumerate([10, 40, 20, 30, 70])]
    waves = split_into_waves(moves, throttle_bytes_per_s=10, max_bytes_per_wave=50)
    # 70 alone (larger than the limit), then 40 + 10, then 30 + 20
    assert [[m.bytes_moved for m in w.moves] for w in waves] == [[70], [40, 10], [30, 20]]
    assert [w.bytes_moved for w in waves] == [70, 50, 50]
    assert total_duration_s(waves) == pytest.approx(7 + 4 + 3)


def test_leader_only_moves_ride_in_the_first_wave_for_free():
    moves = [move(0, (1, 2), (2, 1)), move(1, (3,), (4,)), move(2, (5,), (4,))]
    waves = split_into_waves(moves, throttle_bytes_per_s=MIB, max_incoming_per_broker=1)
    assert [sorted(m.p for m in w.moves) for w in waves] == [[0, 1], [2]]
    only_leader = split_into_waves([moves[0]], throttle_bytes_per_s=MIB)
    assert len(only_leader) == 1
    assert only_leader[0].bytes_moved == 0
    assert only_leader[0].predicted_duration_s == 0
    assert only_leader[0].busiest_broker is None


def test_same_moves_give_the_same_waves():
    moves = [move(p, (p % 4,), (4 + p % 3,), size=(p * 7) % 5 + 1) for p in range(30)]
    first = split_into_waves(moves, throttle_bytes_per_s=1, max_incoming_per_broker=2)
    second = split_into_waves(
        list(reversed(moves)), throttle_bytes_per_s=1, max_incoming_per_broker=2
    )
    assert first == second
    for w in first:
        for broker in range(4, 7):
            assert sum(broker in m.adding for m in w.moves) <= 2


def test_no_moves_no_waves():
    assert split_into_waves([], throttle_bytes_per_s=1) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"throttle_bytes_per_s": 0},
        {"throttle_bytes_per_s": 1, "max_incoming_per_broker": 0},
        {"throttle_bytes_per_s": 1, "max_outgoing_per_broker": 0},
        {"throttle_bytes_per_s": 1, "max_bytes_per_wave": 0},
    ],
)
def test_bad_limits_are_refused(kwargs):
    with pytest.raises(WaveError):
        split_into_waves([move(0, (0,), (1,))], **kwargs)
