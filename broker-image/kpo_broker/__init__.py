"""The Kafka-compatible broker.

Wire protocol, log, replication and the ZooKeeper-elected controller.
"""
