"""The brokers' StatefulSet, pods and nodes as the Kubernetes API shows them (I/O edge).

The BalancingPolicy tells a broker gone on purpose from a failed one
(:mod:`kpo_operator.balancing.maintenance`) from its StatefulSet's rollout status, the
pod of each ordinal and that pod's node. :class:`WorkloadReader` is the interface the
reconciler uses; :class:`KubeWorkloadReader` implements it with the official
``kubernetes`` client: it reads the StatefulSet (``apps/v1``), lists its pods by the
StatefulSet's label selector and reads each pod's node. The parsing is done by the pure
functions :func:`pod_state`, :func:`node_state` and :func:`statefulset_state` on plain
dicts shaped like ``ApiClient().sanitize_for_serialization(obj)`` output (camelCase keys,
RFC 3339 timestamps), the shape ``kubectl get -o json`` shows.

Nodes are cluster-scoped: an operator installed for a list of namespaces has no grant to
read them, and the Kubernetes API answers 403. That is no error here: the node's facts
are then unknown (``node_exists``/``node_ready`` ``None``) and node reads pause for
:data:`NODE_RETRY_S` seconds. A node that does not exist (404) is a lost node.

Sources: the API reference of StatefulSet, Pod and Node
(https://kubernetes.io/docs/reference/kubernetes-api/), StatefulSet pod identity
(``<statefulset>-<ordinal>``, ``spec.ordinals.start``:
https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#pod-identity) and
label selectors (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from kpo_operator.balancing.maintenance import (
    CANNOT_START_REASONS,
    EVICTION_BY_API,
    BrokerPod,
    StatefulSetState,
)
from kpo_operator.store import ObjectStoreError, kube_api_client

logger = logging.getLogger(__name__)

#: Seconds without node reads after the API refused one (403).
NODE_RETRY_S = 300.0

#: The label the StatefulSet controller puts on each pod: the revision it was made from.
REVISION_LABEL = "controller-revision-hash"


class WorkloadReader(Protocol):
    """What the BalancingPolicy reconciler needs to know of the brokers' workload."""

    def statefulset(
        self, namespace: str, name: str, broker_id_offset: int = 0
    ) -> StatefulSetState | None:
        """Read a StatefulSet, its pods and their nodes.

        Args:
            namespace: The StatefulSet's namespace.
            name: Its name.
            broker_id_offset: Broker id = pod ordinal + this.

        Returns:
            The state; ``None`` when there is no such StatefulSet.

        Raises:
            ObjectStoreError: the API refused or failed a read (other than a node's 403).
        """
        ...


@dataclass(frozen=True)
class NodeState:
    """What matters of a pod's node.

    Attributes:
        exists: The node exists; ``None`` when not known.
        ready: Its ``Ready`` condition is ``True``; ``None`` when not known.
        unschedulable: It is cordoned (``spec.unschedulable``).
    """

    exists: bool | None
    ready: bool | None
    unschedulable: bool


UNKNOWN_NODE = NodeState(exists=None, ready=None, unschedulable=False)
"""A node not read (not allowed, or the pod is not scheduled)."""

GONE_NODE = NodeState(exists=False, ready=None, unschedulable=False)
"""A node the API does not know (404)."""


def parse_time(value: Any) -> datetime | None:
    """Read an API timestamp (RFC 3339 string, or a datetime) as an aware datetime.

    A naive value is taken as UTC; anything else (empty, malformed) gives ``None``.
    """
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """``status.conditions`` by type."""
    found: dict[str, Mapping[str, Any]] = {}
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and isinstance(condition.get("type"), str):
            found[condition["type"]] = condition
    return found


def pod_ordinal(name: str) -> int:
    """Return the ordinal of a StatefulSet pod: the number after the last ``-`` of its name.

    Raises:
        ValueError: the name does not end with ``-<digits>``.
    """
    _, dash, suffix = name.rpartition("-")
    if not dash or not suffix.isascii() or not suffix.isdigit():
        raise ValueError(f"pod {name!r} has no StatefulSet ordinal")
    return int(suffix)


def _waiting(status: Mapping[str, Any]) -> tuple[bool, str | None]:
    """Return (a container cannot start, the reason a container waits) of a pod's status."""
    reasons: list[str] = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or ():
            waiting = _mapping(_mapping(_mapping(container).get("state")).get("waiting"))
            reason = waiting.get("reason")
            if isinstance(reason, str) and reason:
                reasons.append(reason)
    stuck = [r for r in reasons if r in CANNOT_START_REASONS]
    if stuck:
        return True, stuck[0]
    return False, reasons[0] if reasons else None


def pod_state(pod: Mapping[str, Any], broker_id_offset: int = 0) -> BrokerPod:
    """Parse a pod (a sanitized ``V1Pod``) into a :class:`BrokerPod`, its node not known.

    Args:
        pod: The pod as a dict with camelCase keys.
        broker_id_offset: Broker id = the pod's ordinal + this.

    Returns:
        The pod's facts; ``node_exists``/``node_ready`` ``None`` and ``node_unschedulable``
        ``False`` (see :func:`with_node`).

    Raises:
        ValueError: the pod's name has no StatefulSet ordinal.
    """
    metadata = _mapping(pod.get("metadata"))
    spec = _mapping(pod.get("spec"))
    status = _mapping(pod.get("status"))
    name = str(metadata.get("name") or "")
    conditions = _conditions(status)
    ready = _mapping(conditions.get("Ready")).get("status") == "True"
    disruption = _mapping(conditions.get("DisruptionTarget"))
    disruption_reason = disruption.get("reason") if disruption.get("status") == "True" else None
    if not isinstance(disruption_reason, str) or not disruption_reason:
        disruption_reason = None
    by_kubelet = status.get("reason") == "Evicted"
    crash_looping, waiting_reason = _waiting(status)
    labels = _mapping(metadata.get("labels"))
    revision = labels.get(REVISION_LABEL)
    phase = status.get("phase")
    node_name = spec.get("nodeName")
    return BrokerPod(
        broker_id=pod_ordinal(name) + broker_id_offset,
        name=name,
        phase=phase if isinstance(phase, str) and phase else None,
        ready=ready,
        terminating=metadata.get("deletionTimestamp") is not None,
        evicted=disruption_reason == EVICTION_BY_API or by_kubelet,
        created=parse_time(metadata.get("creationTimestamp")),
        revision=revision if isinstance(revision, str) and revision else None,
        crash_looping=crash_looping,
        waiting_reason=waiting_reason,
        node_name=node_name if isinstance(node_name, str) and node_name else None,
        node_exists=None,
        node_ready=None,
        node_unschedulable=False,
        disruption_reason=disruption_reason,
        evicted_by_kubelet=by_kubelet,
    )


def node_state(node: Mapping[str, Any] | None) -> NodeState:
    """Parse a node (a sanitized ``V1Node``); ``None`` means the API has no such node.

    ``ready`` is ``False`` for a ``Ready`` condition ``False`` or ``Unknown`` (the node
    stopped reporting) and for a node that reports no ``Ready`` condition.
    """
    if node is None:
        return GONE_NODE
    ready = _mapping(_conditions(_mapping(node.get("status"))).get("Ready")).get("status")
    return NodeState(
        exists=True,
        ready=ready == "True",
        unschedulable=_mapping(node.get("spec")).get("unschedulable") is True,
    )


def with_node(pod: BrokerPod, node: NodeState) -> BrokerPod:
    """``pod`` with its node's facts."""
    return replace(
        pod,
        node_exists=node.exists,
        node_ready=node.ready,
        node_unschedulable=node.unschedulable,
    )


def _controlled_by(pod: Mapping[str, Any], sts: Mapping[str, Any]) -> bool:
    """Tell whether the pod has no controller, or its controller is the StatefulSet ``sts``."""
    metadata = _mapping(sts.get("metadata"))
    for owner in _mapping(pod.get("metadata")).get("ownerReferences") or ():
        owner = _mapping(owner)
        if not owner.get("controller"):
            continue
        if owner.get("uid") and metadata.get("uid"):
            return bool(owner["uid"] == metadata["uid"])
        return owner.get("kind") == "StatefulSet" and owner.get("name") == metadata.get("name")
    return True


def statefulset_state(
    sts: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    nodes: Mapping[str, Mapping[str, Any] | None],
    broker_id_offset: int = 0,
) -> StatefulSetState:
    """Parse a StatefulSet (a sanitized ``V1StatefulSet``), its pods and their nodes.

    Args:
        sts: The StatefulSet as a dict with camelCase keys.
        pods: Pods (as dicts) listed by its selector; those not named
            ``<statefulset>-<ordinal>`` or controlled by another object are left out.
        nodes: Node name -> the node as a dict, or ``None`` for a node that does not
            exist; a pod whose node is not a key has its node's facts unknown.
        broker_id_offset: Broker id = pod ordinal + this.

    Returns:
        The state. ``spec.replicas`` defaults to 1 as in the API; missing status counts
        are 0.
    """
    metadata = _mapping(sts.get("metadata"))
    spec = _mapping(sts.get("spec"))
    status = _mapping(sts.get("status"))
    name = str(metadata.get("name") or "")
    broker_pods: dict[int, BrokerPod] = {}
    for pod in pods:
        pod_name = _mapping(pod.get("metadata")).get("name")
        if not isinstance(pod_name, str) or pod_name.rpartition("-")[0] != name:
            continue
        if not _controlled_by(pod, sts):
            continue
        try:
            state = pod_state(pod, broker_id_offset)
        except ValueError:
            continue
        if state.node_name is not None and state.node_name in nodes:
            state = with_node(state, node_state(nodes[state.node_name]))
        broker_pods[state.broker_id] = state
    current = status.get("currentRevision")
    update = status.get("updateRevision")
    return StatefulSetState(
        name=name,
        namespace=str(metadata.get("namespace") or ""),
        replicas=_int(spec.get("replicas"), 1),
        ready_replicas=_int(status.get("readyReplicas")),
        updated_replicas=_int(status.get("updatedReplicas")),
        current_revision=current if isinstance(current, str) and current else None,
        update_revision=update if isinstance(update, str) and update else None,
        generation=_int(metadata.get("generation")),
        observed_generation=_int(status.get("observedGeneration")),
        pods=broker_pods,
        broker_id_offset=broker_id_offset,
        first_ordinal=_int(_mapping(spec.get("ordinals")).get("start")),
    )


def label_selector(selector: Mapping[str, Any]) -> str:
    """Write a ``LabelSelector`` (``matchLabels``, ``matchExpressions``) as a selector string.

    E.g. ``{"matchLabels": {"app": "kafka"}}`` -> ``"app=kafka"``; the operators ``In``,
    ``NotIn``, ``Exists``, ``DoesNotExist`` become ``k in (a,b)``, ``k notin (a,b)``,
    ``k``, ``!k``.

    Raises:
        ValueError: an unknown operator, or an empty selector (it would select every pod;
            the API refuses a StatefulSet without one).
    """
    parts = [f"{k}={v}" for k, v in sorted(_mapping(selector.get("matchLabels")).items())]
    for expression in selector.get("matchExpressions") or ():
        expression = _mapping(expression)
        key, operator = expression.get("key"), expression.get("operator")
        values = ",".join(str(v) for v in expression.get("values") or ())
        if operator == "In":
            parts.append(f"{key} in ({values})")
        elif operator == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif operator == "Exists":
            parts.append(str(key))
        elif operator == "DoesNotExist":
            parts.append(f"!{key}")
        else:
            raise ValueError(f"unknown label selector operator {operator!r}")
    if not parts:
        raise ValueError("empty label selector")
    return ",".join(parts)


class KubeWorkloadReader:
    """:class:`WorkloadReader` over the ``kubernetes`` client (``AppsV1Api``, ``CoreV1Api``).

    Args:
        api_client: A configured ``kubernetes.client.ApiClient``; by default one is built
            from the in-cluster service account or ``KUBECONFIG``.
        clock: Monotonic seconds, for the pause of node reads after a 403.
    """

    def __init__(self, api_client: Any = None, clock: Callable[[], float] = time.monotonic) -> None:
        from kubernetes import client

        if api_client is None:
            api_client = kube_api_client()
        self._api_client = api_client
        self._apps = client.AppsV1Api(api_client)
        self._core = client.CoreV1Api(api_client)
        self._clock = clock
        self._nodes_refused_at: float | None = None

    def _plain(self, obj: Any) -> Any:
        """Turn a client object into plain dicts (camelCase keys, RFC 3339 timestamps)."""
        return self._api_client.sanitize_for_serialization(obj)

    def statefulset(
        self, namespace: str, name: str, broker_id_offset: int = 0
    ) -> StatefulSetState | None:
        """See :meth:`WorkloadReader.statefulset`."""
        from kubernetes.client.exceptions import ApiException

        what = f"StatefulSet {namespace}/{name}"
        try:
            sts = self._plain(self._apps.read_namespaced_stateful_set(name, namespace))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise ObjectStoreError(f"get {what}: {exc.status} {exc.reason}") from exc
        except Exception as exc:  # connection errors of urllib3
            raise ObjectStoreError(f"get {what}: {exc}") from exc
        try:
            selector = label_selector(_mapping(_mapping(sts.get("spec")).get("selector")))
        except ValueError as exc:
            raise ObjectStoreError(f"{what}: {exc}") from exc
        try:
            listed = self._plain(self._core.list_namespaced_pod(namespace, label_selector=selector))
        except ApiException as exc:
            raise ObjectStoreError(
                f"list pods of {what} ({selector}): {exc.status} {exc.reason}"
            ) from exc
        except Exception as exc:  # connection errors of urllib3
            raise ObjectStoreError(f"list pods of {what}: {exc}") from exc
        pods = [p for p in _mapping(listed).get("items") or () if isinstance(p, Mapping)]
        names = sorted(
            {n for p in pods if isinstance(n := _mapping(p.get("spec")).get("nodeName"), str)}
        )
        nodes = self._nodes(names)
        return statefulset_state(sts, pods, nodes, broker_id_offset)

    def _nodes(self, names: Iterable[str]) -> dict[str, Mapping[str, Any] | None]:
        """Read nodes by name: name -> node, ``None`` when gone; left out when not allowed."""
        from kubernetes.client.exceptions import ApiException

        found: dict[str, Mapping[str, Any] | None] = {}
        for name in names:
            refused = self._nodes_refused_at
            if refused is not None and self._clock() - refused < NODE_RETRY_S:
                break
            try:
                found[name] = self._plain(self._core.read_node(name))
            except ApiException as exc:
                if exc.status == 404:
                    found[name] = None
                elif exc.status == 403:
                    if self._nodes_refused_at is None:
                        logger.info(
                            "not allowed to read nodes (%s): a lost node is told only by "
                            "its pods' conditions",
                            exc.reason,
                        )
                    self._nodes_refused_at = self._clock()
                    break
                else:
                    raise ObjectStoreError(f"get node {name}: {exc.status} {exc.reason}") from exc
            except Exception as exc:  # connection errors of urllib3
                raise ObjectStoreError(f"get node {name}: {exc}") from exc
            else:
                self._nodes_refused_at = None
        return found
