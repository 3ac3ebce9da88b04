"""RBAC as rendered: exactly the rules the operator and the placement job use."""

from __future__ import annotations

from tests.unit.charts.helm import find, render

OPERATOR_RULES = [
    {
        "apiGroups": ["kpo.dev"],
        "resources": ["partitionreassignments", "topicreplicaquotas", "kafkaclusters"],
        "verbs": ["get", "list", "watch", "patch"],
    },
    {
        "apiGroups": ["kpo.dev"],
        "resources": [
            "partitionreassignments/status",
            "topicreplicaquotas/status",
            "kafkaclusters/status",
        ],
        "verbs": ["patch"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    # Only get: KafkaClusters' Secret references are read by name, never listed or watched.
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
    # BalancingPolicies, and the PartitionReassignments they write as their fixes.
    {
        "apiGroups": ["kpo.dev"],
        "resources": ["balancingpolicies"],
        "verbs": ["get", "list", "watch", "patch"],
    },
    {"apiGroups": ["kpo.dev"], "resources": ["balancingpolicies/status"], "verbs": ["patch"]},
    # A fix names its policy as owner with blockOwnerDeletion (checked where enforced).
    {"apiGroups": ["kpo.dev"], "resources": ["balancingpolicies/finalizers"], "verbs": ["update"]},
    {"apiGroups": ["kpo.dev"], "resources": ["partitionreassignments"], "verbs": ["create"]},
    # The brokers' workload: a broker restarting on purpose or failed.
    {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
]
# Nodes are cluster-scoped: only the cluster-wide install may read them.
NODE_RULES = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
CRD_OBSERVER_RULES = [
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["list", "watch"],
    }
]
LEDGER_RULES = [
    {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "resourceNames": ["kpo-operator-throttle-ledger"],
        "verbs": ["get", "patch"],
    }
]
PLACEMENT_RULES = [
    {"apiGroups": ["kpo.dev"], "resources": ["partitionreassignments"], "verbs": ["create"]}
]


def _roles(objects: list[dict[str, object]]) -> dict[tuple[str, str], object]:
    return {
        (str(o["kind"]), o["metadata"]["name"]): o["rules"]  # type: ignore[index]
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }


def test_cluster_wide_operator_and_dry_run_placement() -> None:
    roles = _roles(render("default", namespace="kafka"))
    assert roles == {
        ("ClusterRole", "kafka-kpo-operator"): OPERATOR_RULES + NODE_RULES,
        ("ClusterRole", "kafka-kpo-operator-crd-observer"): CRD_OBSERVER_RULES,
        ("Role", "kpo-operator-throttle-ledger"): LEDGER_RULES,
    }


def test_namespaced_operator_and_applying_placement() -> None:
    objects = render("big", namespace="kafka")
    roles = _roles(objects)
    assert roles == {
        ("Role", "kpo-operator"): OPERATOR_RULES,
        ("Role", "kpo-operator-throttle-ledger"): LEDGER_RULES,
        ("Role", "kpo-placement"): PLACEMENT_RULES,
        ("ClusterRole", "kafka-kpo-broker-node-reader"): [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}
        ],
    }
    operator_roles = [r for r in find(objects, "Role", "-operator") if "ledger" not in str(r)]
    assert sorted(o["metadata"]["namespace"] for o in operator_roles) == ["kafka", "kafka-apps"]
    bindings = [b for b in find(objects, "RoleBinding", "-operator") if "ledger" not in str(b)]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["kafka", "kafka-apps"]
    for binding in bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "kpo-operator", "namespace": "kafka"}
        ]


def test_no_wildcards_anywhere() -> None:
    for value_set in ("default", "big", "minimal"):
        for rules in _roles(render(value_set)).values():
            for rule in rules:  # type: ignore[attr-defined]
                for key in ("apiGroups", "resources", "verbs"):
                    assert "*" not in rule[key], (value_set, rule)


def test_the_throttle_ledger_is_the_only_configmap_the_operator_may_touch() -> None:
    for value_set in ("default", "big"):
        objects = render(value_set, namespace="kafka")
        [ledger] = [o for o in objects if o["kind"] == "ConfigMap" and "throttle-ledger" in str(o)]
        assert ledger["metadata"]["name"] == "kpo-operator-throttle-ledger"  # type: ignore[index]
        assert "data" not in ledger  # the operator's, never overwritten by an upgrade
        [binding] = [
            o for o in objects if o["kind"] == "RoleBinding" and "throttle-ledger" in str(o)
        ]
        assert "namespace" not in binding["metadata"]  # type: ignore[operator]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "kpo-operator", "namespace": "kafka"}
        ]
