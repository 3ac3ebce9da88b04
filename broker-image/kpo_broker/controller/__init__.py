"""The ZooKeeper-elected controller: state machines, leader election and replica assignment.

Kafka's ``KafkaController`` of ZooKeeper mode (:mod:`kpo_broker.controller.controller`)
with its collaborators, one module each.
"""
