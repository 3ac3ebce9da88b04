"""The rendered chart against a real kube-apiserver (RBAC authorization on).

Every manifest of the three value sets passes ``kubectl apply --dry-run=server``; the
rendered RBAC objects, applied for real, grant the operator and the placement job exactly
the calls they make (``kubectl auth can-i`` as their ServiceAccounts) and nothing else.
"""

from __future__ import annotations

import itertools

import pytest
import yaml

from kpo_devenv import ControlPlane
from tests.conftest import REPO_ROOT
from tests.unit.charts.helm import render

pytestmark = pytest.mark.integration

RBAC_KINDS = {"ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
_counter = itertools.count()


def _namespace(plane: ControlPlane, prefix: str) -> str:
    name = f"{prefix}-{next(_counter)}"
    plane.kubectl("create", "namespace", name)
    # kube-controller-manager is not running here: create what it would (the helm test
    # Pod runs as the namespace's default ServiceAccount).
    plane.kubectl("create", "serviceaccount", "default", "-n", name)
    return name


def _apply(plane: ControlPlane, objects: list[dict[str, object]], *flags: str) -> str:
    text = yaml.safe_dump_all(objects)
    return plane.kubectl("apply", *flags, "-f", "-", input_text=text).stdout


def _can(plane: ControlPlane, user: str, verb: str, resource: str, namespace: str) -> bool:
    result = plane.kubectl(
        "auth", "can-i", verb, resource, f"--as={user}", "-n", namespace, check=False
    )
    answer = result.stdout.strip()
    assert answer in ("yes", "no"), result.stderr
    return answer == "yes"


@pytest.mark.parametrize("value_set", ["default", "big", "minimal"])
def test_every_rendered_manifest_is_accepted_by_the_apiserver(
    control_plane: ControlPlane, value_set: str
) -> None:
    ns = _namespace(control_plane, f"dry-{value_set}")
    sets: tuple[str, ...] = ()
    if value_set == "big":  # watch two namespaces that exist: the release's and another
        other = _namespace(control_plane, "dry-apps")
        sets = (f"operator.watchNamespaces={{{ns},{other}}}",)
    objects = render(value_set, *sets, namespace=ns)
    for obj in objects:  # like helm install: namespaced objects go to the release namespace
        obj["metadata"].setdefault("namespace", ns)  # type: ignore[union-attr]
    out = _apply(control_plane, objects, "--dry-run=server")
    kinds = {o["kind"] for o in objects}
    assert {"StatefulSet", "Deployment", "PodDisruptionBudget", "ConfigMap", "Service"} <= kinds
    assert ("CronJob" in kinds) is (value_set != "minimal")
    assert out.count("(server dry run)") == len(objects)


def _apply_rbac(plane: ControlPlane, objects: list[dict[str, object]], ns: str) -> None:
    rbac = [o for o in objects if o["kind"] in RBAC_KINDS]
    for obj in rbac:
        obj["metadata"].setdefault("namespace", ns)  # type: ignore[union-attr]
    _apply(plane, rbac)


FORBIDDEN_EVERYWHERE = [
    ("list", "secrets"),
    ("watch", "secrets"),
    ("create", "pods"),
    ("create", "pods/exec"),
    ("delete", "namespaces"),
    ("update", "customresourcedefinitions.apiextensions.k8s.io"),
    ("delete", "partitionreassignments.kpo.dev"),
    ("create", "configmaps"),
    ("create", "leases.coordination.k8s.io"),
]
OPERATOR_CALLS = [
    ("get", "partitionreassignments.kpo.dev"),
    ("list", "partitionreassignments.kpo.dev"),
    ("watch", "partitionreassignments.kpo.dev"),
    ("patch", "partitionreassignments.kpo.dev"),
    ("patch", "partitionreassignments.kpo.dev/status"),
    ("get", "topicreplicaquotas.kpo.dev"),
    ("list", "topicreplicaquotas.kpo.dev"),
    ("watch", "topicreplicaquotas.kpo.dev"),
    ("patch", "topicreplicaquotas.kpo.dev"),
    ("patch", "topicreplicaquotas.kpo.dev/status"),
    ("get", "kafkaclusters.kpo.dev"),
    ("list", "kafkaclusters.kpo.dev"),
    ("watch", "kafkaclusters.kpo.dev"),
    ("patch", "kafkaclusters.kpo.dev"),
    ("patch", "kafkaclusters.kpo.dev/status"),
    ("create", "events"),
    ("get", "secrets"),  # the keys KafkaClusters reference, by name (never list/watch)
    # BalancingPolicies, and the PartitionReassignments they write as their fixes.
    ("get", "balancingpolicies.kpo.dev"),
    ("list", "balancingpolicies.kpo.dev"),
    ("watch", "balancingpolicies.kpo.dev"),
    ("patch", "balancingpolicies.kpo.dev"),
    ("patch", "balancingpolicies.kpo.dev/status"),
    ("create", "partitionreassignments.kpo.dev"),
    ("get", "statefulsets.apps"),
    ("list", "pods"),
]


LEDGER = "configmaps/kpo-operator-throttle-ledger"


def _check_ledger_rights(plane: ControlPlane, operator: str, ns: str, elsewhere: str) -> None:
    """The operator may read and patch its throttle ledger, in its namespace, and nothing else."""
    for verb in ("get", "patch"):
        assert _can(plane, operator, verb, LEDGER, ns), verb
        assert not _can(plane, operator, verb, LEDGER, elsewhere), verb
        assert not _can(plane, operator, verb, "configmaps/kpo-broker-config", ns), verb
    for verb in ("list", "watch", "delete", "update"):
        assert not _can(plane, operator, verb, LEDGER, ns), verb


def test_cluster_wide_operator_and_dry_run_placement_rbac(control_plane: ControlPlane) -> None:
    ns = _namespace(control_plane, "rbac-cw")
    elsewhere = _namespace(control_plane, "rbac-cw-other")
    _apply_rbac(control_plane, render("default", namespace=ns), ns)
    operator = f"system:serviceaccount:{ns}:kpo-operator"
    placement = f"system:serviceaccount:{ns}:kpo-placement"
    for verb, resource in OPERATOR_CALLS:
        for where in (ns, elsewhere):
            assert _can(control_plane, operator, verb, resource, where), (verb, resource, where)
    for verb in ("list", "watch"):
        assert _can(control_plane, operator, verb, "customresourcedefinitions", ns)
    assert not _can(control_plane, operator, "update", "partitionreassignments.kpo.dev", ns)
    assert not _can(control_plane, operator, "delete", "partitionreassignments.kpo.dev", ns)
    _check_ledger_rights(control_plane, operator, ns, elsewhere)
    # dry-run placement: no Kubernetes rights at all
    assert not _can(control_plane, placement, "create", "partitionreassignments.kpo.dev", ns)
    for user in (operator, placement):
        for verb, resource in FORBIDDEN_EVERYWHERE:
            assert not _can(control_plane, user, verb, resource, ns), (user, verb, resource)
    assert not _can(control_plane, placement, "get", "secrets", ns)


def test_namespaced_operator_and_applying_placement_rbac(control_plane: ControlPlane) -> None:
    ns = _namespace(control_plane, "rbac-ns")
    apps = _namespace(control_plane, "rbac-ns-apps")
    elsewhere = _namespace(control_plane, "rbac-ns-other")
    objects = render("big", f"operator.watchNamespaces={{{ns},{apps}}}", namespace=ns)
    _apply_rbac(control_plane, objects, ns)
    operator = f"system:serviceaccount:{ns}:kpo-operator"
    placement = f"system:serviceaccount:{ns}:kpo-placement"
    broker = f"system:serviceaccount:{ns}:kpo-broker"
    for verb, resource in OPERATOR_CALLS:
        for where in (ns, apps):
            assert _can(control_plane, operator, verb, resource, where), (verb, resource, where)
        assert not _can(control_plane, operator, verb, resource, elsewhere), (verb, resource)
    # Nothing cluster-scoped: kopf serves the listed namespaces without scanning.
    for verb in ("list", "watch"):
        assert not _can(control_plane, operator, verb, "customresourcedefinitions", ns)
        assert not _can(control_plane, operator, verb, "namespaces", ns)
    assert _can(control_plane, placement, "create", "partitionreassignments.kpo.dev", ns)
    for where in (apps, elsewhere):
        assert not _can(control_plane, placement, "create", "partitionreassignments.kpo.dev", where)
    for verb in ("get", "list", "patch", "delete"):
        assert not _can(control_plane, placement, verb, "partitionreassignments.kpo.dev", ns)
    _check_ledger_rights(control_plane, operator, ns, elsewhere)
    assert not _can(control_plane, operator, "get", LEDGER, apps)
    assert _can(control_plane, broker, "get", "nodes", ns)
    assert not _can(control_plane, broker, "list", "nodes", ns)
    for user in (operator, placement, broker):
        for verb, resource in FORBIDDEN_EVERYWHERE:
            assert not _can(control_plane, user, verb, resource, ns), (user, verb, resource)
    for user in (placement, broker):
        assert not _can(control_plane, user, "get", "secrets", ns), user


def test_gitops_quotas_are_accepted_by_the_crd(control_plane: ControlPlane) -> None:
    quota_dir = REPO_ROOT / "deploy" / "gitops" / "quotas"
    objects = [yaml.safe_load(p.read_text()) for p in sorted(quota_dir.glob("*-throttle.yaml"))]
    ns = _namespace(control_plane, "gitops")
    for obj in objects:
        obj["metadata"]["namespace"] = ns
    out = _apply(control_plane, objects, "--dry-run=server")
    assert out.count("(server dry run)") == len(objects)
