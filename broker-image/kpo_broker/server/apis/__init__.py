"""Request handlers, one module per API family.

:mod:`kpo_broker.server.kafka_apis` dispatches to them.
"""
