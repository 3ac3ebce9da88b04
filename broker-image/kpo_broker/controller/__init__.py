"""The ZooKeeper-elected controller: state machines, leader election and replica assignment.

Seed 001 ("KafkaController") describes the controller this package implements.
"""
