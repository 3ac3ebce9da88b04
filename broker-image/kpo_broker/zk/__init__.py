"""Kafka's ZooKeeper layer: the 2.x znode layout, its JSON formats and ``KafkaZkClient``.

Pure parts: :mod:`~kpo_broker.zk.paths` (layout), :mod:`~kpo_broker.zk.model` (value
types), :mod:`~kpo_broker.zk.data` and :mod:`~kpo_broker.zk.producer_ids` (JSON codecs),
:mod:`~kpo_broker.zk.ops` (multi operations), :mod:`~kpo_broker.zk.partition_states` and
:mod:`~kpo_broker.zk.configs` (operations and results of those znode families),
:mod:`~kpo_broker.zk.watches` (watch events). I/O: :mod:`~kpo_broker.zk.session` (the
connection, Kafka's ``ZooKeeperClient``) and :mod:`~kpo_broker.zk.client` (every
operation, Kafka's ``KafkaZkClient``).
"""
