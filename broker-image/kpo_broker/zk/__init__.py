"""Kafka's ZooKeeper layer: the 2.x znode layout, its JSON formats and ``KafkaZkClient``.

Pure parts: :mod:`~kpo_broker.zk.paths` (layout), :mod:`~kpo_broker.zk.model` (value
types), :mod:`~kpo_broker.zk.data` (JSON codecs). I/O: :mod:`~kpo_broker.zk.client`.
"""
