"""The Kafka wire protocol: message table, framing, inter-broker APIs, errors and client.

kafka-python's JSON-schema codecs are the wire format implementation; this
package adds what a broker needs on top of them:

* :mod:`~kpo_broker.protocol.interbroker` and ``schemas/``: LeaderAndIsr,
  StopReplica, UpdateMetadata and ControlledShutdown, which kafka-python lacks.
* :mod:`~kpo_broker.protocol.api`: api key -> request/response classes.
* :mod:`~kpo_broker.protocol.framing`: size prefix, headers, request decoding
  and response encoding.
* :mod:`~kpo_broker.protocol.errors`: Kafka error codes and this package's exceptions.
* :mod:`~kpo_broker.protocol.client`: asyncio broker-to-broker client.
* :mod:`~kpo_broker.protocol.endpoints`: listener endpoints and security protocols.
"""
