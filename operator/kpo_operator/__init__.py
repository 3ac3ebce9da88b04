"""The kopf operator that reconciles PartitionReassignment and TopicReplicaQuota resources.

It drives a Kafka cluster only through the Kafka Admin API (KIP-455
reassignments, KIP-73 replication throttles as dynamic configs).
"""
