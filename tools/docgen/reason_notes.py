"""What each reason of the operator means and what to do about it, keyed by reason.

The reasons themselves are found in the operator's source (:mod:`tools.docgen.reason_scan`);
the tests fail when a reason found there has no entry here, or an entry names a reason the
operator no longer uses.
"""

from __future__ import annotations

from dataclasses import dataclass

PR = "PartitionReassignment"
TRQ = "TopicReplicaQuota"
KC = "KafkaCluster"
BP = "BalancingPolicy"
EVENT = "Event"
#: Stands for the conditions a phase sets on a PartitionReassignment, each with the phase as
#: its reason (the page shows them as the operator's ``reassignment_conditions`` gives them).
PHASE = "the phase's conditions"
#: The conditions set on an object whose cluster cannot be used, or refused the operator.
STALLED = "Ready False, Reconciling False, Stalled True"


@dataclass(frozen=True)
class Note:
    """One reason, explained.

    Attributes:
        where: (resource, conditions) pairs: where the reason appears; resource ``Event``
            for the reason of an Event (then ``conditions`` is the Event's type).
        meaning: what the operator found.
        action: what to do (``""``: nothing, it is an expected state).
    """

    where: tuple[tuple[str, str], ...]
    meaning: str
    action: str = ""


_CLUSTER_OBJECTS = ((PR, STALLED), (TRQ, STALLED), (BP, STALLED))

NOTES: dict[str, Note] = {
    # PartitionReassignment phases: every condition's reason is the phase.
    "Pending": Note(
        ((PR, PHASE),),
        "Validated, waiting to be accepted and submitted (or throttles being set first).",
    ),
    "Suspended": Note(
        ((PR, PHASE),),
        "`spec.suspend` is true: planned (bytes and ETA in the status), nothing moves.",
        "Set `spec.suspend: false` to start the move.",
    ),
    "Moving": Note(((PR, PHASE),), "Submitted to Kafka; replicas are being copied.", ""),
    "Cancelling": Note(
        ((PR, PHASE),),
        "`spec.cancel` is true: in-flight partitions revert to their original replicas.",
    ),
    "Completed": Note(
        ((PR, PHASE),),
        "Every partition reached its target replicas; throttles removed.",
    ),
    "Cancelled": Note(((PR, PHASE),), "The cancellation finished; throttles removed."),
    "Failed": Note(
        ((PR, PHASE),),
        "The reassignment cannot go on; the message says why.",
        "Read `status.message` and the Events; fix the spec (a new generation is validated again).",
    ),
    # PartitionReassignment: specific reasons of a Failed phase or of its steps.
    "ValidationFailed": Note(
        ((PR, "Ready False, Stalled True (phase Failed)"),),
        "The spec is refused: unknown topic or partition, unknown broker, a replica list "
        "Kafka would refuse...; the message lists every problem.",
        "Fix the spec as the message says; nothing was changed in Kafka.",
    ),
    "BrokerFenced": Note(
        ((PR, "Ready False, Stalled True (phase Failed)"),),
        "A target broker is registered but fenced (KIP-1073): Kafka would not place "
        "replicas on it.",
        "Unfence the broker (restart it, check its logs) or choose another, then edit the spec.",
    ),
    "InvalidSpec": Note(
        (
            (PR, "Ready False, Stalled True"),
            (TRQ, "Ready False, Stalled True"),
            (BP, "Ready False, Reconciling False, Stalled True"),
        ),
        "The spec cannot be read (a value the CRD schema lets through but the operator "
        "refuses, e.g. a BalancingPolicy's cron expression or time zone); nothing is "
        "written to Kafka.",
        "Fix the spec as the message says.",
    ),
    "PartitionsFailed": Note(
        ((PR, "Ready False, Stalled True (phase Failed)"),),
        "Kafka refused some partitions or they ended away from their target; "
        "`status.partitions[]` shows which, with Kafka's error.",
        "Check the failed partitions' messages (brokers down, log dir full, ...); apply a "
        "new reassignment for them.",
    ),
    "EditRejected": Note(
        ((PR, "Ready False, Stalled True (phase Failed)"), (EVENT, "Warning")),
        "The spec was edited while partitions were moving and the edit did not validate (the "
        "message lists the problems); the accepted work goes on and the object ends Failed "
        "with this reason.",
        "Correct the edit (a valid edit is applied while the move runs), or let the move end "
        "and apply the change as a new object.",
    ),
    "Accepted": Note(
        ((EVENT, "Normal"),),
        "A generation of the spec was accepted: its partitions are recorded in the status.",
    ),
    "Submitted": Note(
        ((EVENT, "Normal or Warning"),),
        "The accepted partitions were sent with AlterPartitionReassignments; Warning when "
        "Kafka refused some of them.",
        "On a Warning, read the message: the refused partitions and Kafka's error.",
    ),
    "ThrottleFailed": Note(
        ((EVENT, "Warning"),),
        "Setting the replication throttles failed on some brokers or topics; the operator "
        "tries again at the next step.",
        "Check the operator can alter broker and topic configs (ACLs) and the brokers are up.",
    ),
    "PreferredLeaderElection": Note(
        ((EVENT, "Normal"),),
        "`spec.preferredLeaderElection`: the preferred replicas lead the moved partitions.",
    ),
    "PreferredLeaderElectionFailed": Note(
        ((EVENT, "Warning"),),
        "The preferred leader election was refused for some partitions (e.g. the "
        "preferred replica is not in the ISR).",
        "Run it again later (`kafka-leader-election --election-type PREFERRED`), or let "
        "`auto.leader.rebalance.enable` do it.",
    ),
    # Cordons of drained brokers (KIP-1066).
    "Cordoned": Note(
        ((PR, "Cordoned True"),),
        "Every broker the reassignment drains is cordoned by the operator "
        "(`cordoned.log.dirs=*`): no new replicas land on it meanwhile.",
    ),
    "CordonFailed": Note(
        ((PR, "Cordoned False"),),
        "Setting `cordoned.log.dirs` failed on a drained broker; the message names it.",
        "Check the operator may alter broker configs; it tries again at the next step.",
    ),
    "NotSupported": Note(
        ((PR, "Cordoned False"),),
        "A drained broker does not support cordons (Kafka before 4.3, or it refused the "
        "config): it is drained without one.",
        "Nothing needed; new partitions may still be placed on the broker while it drains.",
    ),
    "CordonedOutside": Note(
        ((PR, "Cordoned False"),),
        "A drained broker has a `cordoned.log.dirs` value set by someone else: left alone.",
        "Remove the foreign value if the operator should manage the cordon.",
    ),
    "NotLive": Note(
        ((PR, "Cordoned False"),),
        "The drained brokers are not live, so there is nothing to cordon.",
    ),
    "Released": Note(
        ((PR, "Cordoned False"),),
        "The move ended and the operator let go of its cordons (brokers still drained by "
        "another reassignment stay cordoned).",
    ),
    # TopicReplicaQuota.
    "Applied": Note(
        ((TRQ, "Ready True"),),
        "The throttle is written on every broker and topic the quota names.",
    ),
    "WriteFailed": Note(
        ((TRQ, "Stalled True"),),
        "Kafka refused writing a throttle config; the message has its error.",
        "Check the brokers are up and the operator may alter configs; it retries at the "
        "next check (`KPO_QUOTA_INTERVAL_S`).",
    ),
    "TopicNotFound": Note(
        ((TRQ, "Stalled True"),),
        "Topics named in `spec.topics.names` do not exist; what can be applied is.",
        "Create the topics (their throttles are applied then) or remove them from the spec.",
    ),
    "ThrottlesRemoved": Note(
        ((EVENT, "Normal"),),
        "The quota was deleted: the configs only it wanted were removed.",
    ),
    "RateConflict": Note(
        ((EVENT, "Warning"),),
        "Another quota or reassignment wants a different rate on a broker this quota names.",
        "See the `RateConflict` condition's message: the lowest rate is applied.",
    ),
    "LowestRateWins": Note(
        ((TRQ, "RateConflict True"),),
        "Objects disagree on a broker's rate; the lowest is applied. The message names the winner.",
        "Align the rates of the objects if the applied one is not what you want.",
    ),
    "NoConflict": Note(((TRQ, "RateConflict False"),), "No other object wants another rate."),
    "LeftAlone": Note(
        ((TRQ, "ForeignThrottle True"),),
        "A throttle value set outside the operator (e.g. by `kafka-reassign-partitions "
        "--throttle`) differs from what the quota wants; the foreign value stays.",
        "Remove the foreign value, or claim the broker in `spec.brokers` to have the "
        "operator replace it.",
    ),
    "Overridden": Note(
        ((TRQ, "ForeignThrottle True"),),
        "A foreign throttle value on brokers claimed in `spec.brokers` was replaced; it is "
        "put back when the quota releases them.",
    ),
    "NoForeignThrottle": Note(
        ((TRQ, "ForeignThrottle False"),), "No throttle value set outside the operator differs."
    ),
    "ForeignThrottle": Note(
        ((EVENT, "Warning"),),
        "A throttle value set outside the operator differs from what this object wants.",
        "See the object's `ForeignThrottle` condition.",
    ),
    "ThrottleDriftRepaired": Note(
        ((EVENT, "Warning"),),
        "Throttle configs the operator owns were changed outside it and were put back.",
        "Change throttles through the custom resources, not with `kafka-configs`.",
    ),
    # KafkaCluster, and the objects that use one.
    "Connected": Note(
        ((KC, "Reachable True, Ready True"),),
        "The brokers answered DescribeCluster with the KafkaCluster's settings.",
    ),
    "Unreachable": Note(
        ((KC, "Reachable False, Ready False"),),
        "No broker of the bootstrap servers answered (connection refused, timeout, TLS handshake).",
        "Check `spec.bootstrapServers`, network policies and the listener's protocol.",
    ),
    "AuthenticationFailed": Note(
        ((KC, "Ready False"), *_CLUSTER_OBJECTS),
        "The brokers refused the operator's credentials: a failed TLS handshake (no or an "
        "untrusted client certificate, an untrusted broker) or SASL credentials refused "
        "(SASL_AUTHENTICATION_FAILED). SASL credentials refused while bootstrapping show as a "
        "connection timeout instead.",
        "Check the Secret the KafkaCluster names, the CA, and the user on the Kafka side.",
    ),
    "AuthorizationFailed": Note(
        ((KC, "Ready False"), *_CLUSTER_OBJECTS),
        "Kafka refused an operation to the operator's principal (ACLs).",
        "Grant the ACLs listed in Operations > Kafka ACLs the operator needs.",
    ),
    "InvalidConfig": Note(
        ((KC, "Reachable Unknown, Ready False"), *_CLUSTER_OBJECTS),
        "The KafkaCluster's spec or client properties are refused (unknown or unsupported "
        "property, inconsistent TLS/SASL settings).",
        "Fix the KafkaCluster as the message says.",
    ),
    "SecretNotFound": Note(
        ((KC, "Reachable Unknown, Ready False"), *_CLUSTER_OBJECTS),
        "A Secret (or a key of it) that the KafkaCluster references cannot be read.",
        "Create the Secret in the KafkaCluster's namespace, with the key named, and let the "
        "operator read it (RBAC).",
    ),
    "InUse": Note(
        ((KC, "Ready False"), (EVENT, "Warning")),
        "The KafkaCluster is being deleted while quotas or unfinished reassignments name "
        "it; deletion waits so that their throttles can still be removed.",
        "Delete (or finish) the objects the message names first.",
    ),
    "ClusterNotFound": Note(
        _CLUSTER_OBJECTS,
        "The KafkaCluster named in `spec.clusterRef` does not exist; nothing is done.",
        "Create the KafkaCluster in the object's namespace, or fix `spec.clusterRef` (it "
        "cannot change: recreate the object).",
    ),
    "ClusterUnreachable": Note(
        _CLUSTER_OBJECTS,
        "The brokers of the object's cluster did not answer; nothing is changed in Kafka.",
        "See the KafkaCluster's `Reachable` condition.",
    ),
    # BalancingPolicy.
    "Checked": Note(
        ((BP, "Ready True, Reconciling False, Stalled False"),),
        "The last check of the cluster succeeded; `status.anomalies` is current.",
    ),
    "Superseded": Note(
        ((BP, "Ready False, Reconciling False, Stalled True"), (EVENT, "Warning")),
        "An older policy acts on the same Kafka cluster; at most one policy does.",
        "Delete one of the policies.",
    ),
    "AnomalyDetected": Note(
        ((EVENT, "Warning"),),
        "A detector found an anomaly (or a report-only one passed its threshold).",
    ),
    "AnomalyWaiting": Note(
        ((EVENT, "Normal"),),
        "An anomaly's fix waits: for its threshold, maintenance, a window, approval or "
        "moves in flight (`status.anomalies[].waitingFor`).",
        "For `Approval`: review the suspended fix and set its `spec.suspend` to false.",
    ),
    "AnomalyFixing": Note(
        ((EVENT, "Normal"),),
        "A fix (a PartitionReassignment owned by the policy) was written or is running.",
    ),
    "AnomalyFixed": Note(
        ((EVENT, "Normal"),),
        "The anomaly's fixes completed, or it cleared by itself.",
    ),
    "AnomalyFailed": Note(
        ((EVENT, "Warning"),),
        "No fix could be planned (no live broker with room, racks), or a fix failed or was "
        "cancelled by someone else. The same finding is tried again as a new anomaly after "
        "an hour.",
        "Read the message; add brokers or capacity, or fix the cause and delete the failed fix.",
    ),
    "ReplicasPlaced": Note(
        ((EVENT, "Normal"),),
        "Replicas of an offline log dir were placed in an online dir of the same broker "
        "(AlterReplicaLogDirs).",
    ),
}
