"""The rebalance benchmark's pure logic: member output and when the survivors own all."""

from kpo_bench.groups import MemberEvent, covered_at, owned_after, parse_member_events


def test_member_lines_are_parsed_and_a_half_written_line_is_left_out() -> None:
    text = "100.5 assign 0,1,2\nnoise line\n101.0 revoke 0,1,2\n101.2 assign \n102.0 assign 3,4"
    events = parse_member_events(text)
    assert events == [
        MemberEvent(100.5, "assign", frozenset({0, 1, 2})),
        MemberEvent(101.0, "revoke", frozenset({0, 1, 2})),
        MemberEvent(101.2, "assign", frozenset()),
    ]
    assert owned_after(events) == set()
    assert owned_after(parse_member_events(text + "\n")) == {3, 4}


def test_coverage_counts_only_states_reached_after_the_kill() -> None:
    before = {
        "a": [MemberEvent(1.0, "assign", frozenset({0, 1}))],
        "b": [MemberEvent(1.1, "assign", frozenset({2, 3}))],
    }
    # Covered before the kill at 5.0 (with the dead member's partitions elsewhere): not yet.
    assert covered_at(before, {0, 1, 2, 3}, after=5.0) is None
    # Eager rebalance: both revoke everything, then a gets {0,1,2} at 9.0 and b {3} at 9.4.
    after = {
        "a": [*before["a"], MemberEvent(8.0, "revoke", frozenset({0, 1})),
              MemberEvent(9.0, "assign", frozenset({0, 1, 2}))],
        "b": [*before["b"], MemberEvent(8.1, "revoke", frozenset({2, 3})),
              MemberEvent(9.4, "assign", frozenset({3}))],
    }  # fmt: skip
    assert covered_at(after, {0, 1, 2, 3}, after=5.0) == 9.4
    assert covered_at(after, {0, 1, 2, 3, 4}, after=5.0) is None
