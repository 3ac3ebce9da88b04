"""Coordinators hosted by every broker (Kafka's ``kafka.coordinator`` package)."""
