"""Listener security: TLS, SASL (PLAIN, SCRAM) and principals (Kafka's ``common.security``)."""
