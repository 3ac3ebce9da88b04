"""``make bench``: kpo's Python brokers measured side by side with Apache Kafka.

Produce, consume and follower catch-up throughput and leader failover time of a
3-broker cluster on loopback, for kpo and for Apache Kafka (ZooKeeper mode, jars from
Maven Central installed by ``tools/install-kafka.sh``), with the same load generators
and settings, printed as a table of ratios and written as JSON. Not part of the tests.
"""
