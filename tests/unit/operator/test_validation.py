from typing import Any

import pytest

from kpo_kafka.admin_types import PartitionInfo
from kpo_kafka.specs import PartitionReassignmentSpec
from kpo_operator.model import ClusterView
from kpo_operator.validation import ValidationIssue, failure_reason, validate_reassignment

OWNER = "ns/me"


def _view(**kw: Any) -> ClusterView:
    base: dict[str, Any] = {
        "topics": {
            "t": {0: PartitionInfo((0, 1), (0, 1), 0), 1: PartitionInfo((1, 2), (1, 2), 1)},
            "u": {0: PartitionInfo((2, 0), (2, 0), 2)},
        },
        "live_brokers": frozenset({0, 1, 2, 3}),
        "log_dirs": {0: frozenset({"/d0"}), 1: frozenset({"/d1"}), 3: frozenset({"/a", "/b"})},
    }
    base.update(kw)
    return ClusterView(**base)


def _spec(*parts: dict[str, Any]) -> PartitionReassignmentSpec:
    return PartitionReassignmentSpec.from_object({"partitions": list(parts)})


def _p(topic: str, partition: int, replicas: list[int], **kw: Any) -> dict[str, Any]:
    return {"topic": topic, "partition": partition, "replicas": replicas, **kw}


def test_valid_spec_has_no_issues() -> None:
    spec = _spec(_p("t", 0, [3, 1], logDirs=["/b", "any"]), _p("u", 0, [1, 2]))
    assert validate_reassignment(spec, _view(), OWNER) == []


@pytest.mark.parametrize(
    ("parts", "view_kw", "expected"),
    [
        (
            [_p("t", 0, [1, 2]), _p("t", 0, [2, 1])],
            {},
            [
                ("spec.partitions[0]", "partition t-0 is listed 2 times"),
                ("spec.partitions[1]", "partition t-0 is listed 2 times"),
            ],
        ),
        (
            [_p("t", 0, [1, 2, 1])],
            {},
            [("spec.partitions[0]", "broker 1 appears more than once in the replicas of t-0")],
        ),
        (
            [_p("t", 0, [1, 2], logDirs=["any"])],
            {},
            [("spec.partitions[0].logDirs", "logDirs has 1 entries but replicas has 2 for t-0")],
        ),
        ([_p("x", 0, [1])], {}, [("spec.partitions[0]", "topic x does not exist")]),
        ([_p("t", 9, [1])], {}, [("spec.partitions[0]", "partition t-9 does not exist")]),
        (
            [_p("t", 0, [0, 1]), _p("t", 1, [1, 7, 8])],
            {},
            [
                ("spec.partitions[1]", "broker 7 is not alive"),
                ("spec.partitions[1]", "broker 8 is not alive"),
            ],
        ),
        (
            [_p("t", 0, [0, 3], logDirs=["/nope", "/a"])],
            {},
            [("spec.partitions[0].logDirs", "broker 0 has no log dir /nope")],
        ),
        (
            [_p("t", 0, [2, 1], logDirs=["/x", "any"])],
            {},
            [("spec.partitions[0].logDirs", "log dirs of broker 2 are not known")],
        ),
        (
            [_p("t", 0, [2, 1]), _p("t", 1, [0, 1]), _p("u", 0, [0, 1])],
            {"reassigning": {("t", 0): "ns/other", ("t", 1): None, ("u", 0): OWNER}},
            [
                ("spec.partitions[0]", "a reassignment of t-0 by ns/other is in flight"),
                (
                    "spec.partitions[1]",
                    "a reassignment of t-1 not made by this operator is in flight",
                ),
            ],
        ),
    ],
)
def test_each_rule_names_the_entry(
    parts: list[dict[str, Any]], view_kw: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    issues = validate_reassignment(_spec(*parts), _view(**view_kw), OWNER)
    assert issues == [ValidationIssue(path, msg) for path, msg in expected]


def test_all_problems_reported_together_and_str_form() -> None:
    spec = _spec(_p("t", 0, [0, 1]), _p("t", 1, [1, 2]), _p("x", 3, [9]))
    issues = validate_reassignment(spec, _view(live_brokers=frozenset({0, 1})), OWNER)
    assert [str(i) for i in issues] == [
        "spec.partitions[1]: broker 2 is not alive",
        "spec.partitions[2]: topic x does not exist",
        "spec.partitions[2]: broker 9 is not alive",
    ]


def test_empty_partition_list_and_empty_replicas() -> None:
    empty = PartitionReassignmentSpec.model_construct(partitions=[])
    assert validate_reassignment(empty, _view(), OWNER) == [
        ValidationIssue("spec.partitions", "partition reassignment list is empty")
    ]
    spec = _spec(_p("t", 0, [1]))
    bare = spec.partitions[0].model_copy(update={"replicas": []})
    issues = validate_reassignment(spec.model_copy(update={"partitions": [bare]}), _view(), OWNER)
    assert issues == [
        ValidationIssue("spec.partitions[0]", "partition t-0 has an empty replica list")
    ]


def test_a_fenced_target_broker_is_refused_with_its_own_reason() -> None:
    view = _view(live_brokers=frozenset({0, 1, 2}), fenced_brokers=frozenset({3}))
    issues = validate_reassignment(_spec(_p("t", 0, [3, 1]), _p("u", 0, [7, 2])), view, OWNER)
    assert [(i.path, i.reason) for i in issues] == [
        ("spec.partitions[0]", "BrokerFenced"),
        ("spec.partitions[1]", "ValidationFailed"),
    ]
    assert "broker 3 is fenced" in issues[0].message
    assert issues[1].message == "broker 7 is not alive"
    assert failure_reason(issues) == "BrokerFenced"
    assert failure_reason(issues[1:]) == "ValidationFailed"
