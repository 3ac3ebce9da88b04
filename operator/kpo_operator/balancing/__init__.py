"""Self-healing and scheduled balancing: a BalancingPolicy per Kafka cluster.

The policy's reconciler (:mod:`~kpo_operator.balancing.reconciler`) observes the cluster,
runs the detectors (:mod:`~kpo_operator.balancing.anomalies`), decides whether each
anomaly may be fixed now (threshold, window, approval, maintenance, budget) and writes
its fixes as ordinary PartitionReassignments owned by the policy. The pure parts:
:mod:`~kpo_operator.balancing.healing` (where replicas go), :mod:`~kpo_operator.balancing.windows`
(cron windows), :mod:`~kpo_operator.balancing.maintenance` (a broker gone on purpose or
failed) and :mod:`~kpo_operator.balancing.budget` (the replication rate shared by the fixes).
"""
