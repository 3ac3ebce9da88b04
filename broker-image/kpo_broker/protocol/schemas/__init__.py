"""JSON message schemas of the inter-broker APIs, read by kafka-python's ``load_json``.

Each ``<ClassName>.json`` file describes one request or response of an API that
kafka-python does not define (LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown), in the schema language kafka-python reads: field names in
CamelCase, types (``int32``, ``[]int32``, ``string``, struct arrays), ``versions``
ranges, ``nullableVersions`` and ``flexibleVersions`` (KIP-482 compact encoding
and tagged fields). Field order, names, types and version ranges follow the
Apache Kafka protocol documentation for the ZooKeeper-mode controller.
"""
