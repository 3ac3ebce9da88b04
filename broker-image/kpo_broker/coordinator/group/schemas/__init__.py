"""Schemas of the ``__consumer_offsets`` records, read by kafka-python's ``load_json``.

Each record's key and value start with an int16 version (Kafka's
``MessageUtil.toVersionPrefixedBytes``); the rest is laid out by the schema of that
version. Key versions 0 and 1 are an offset commit, key version 2 a group's
metadata. Field names, types and version ranges are Kafka 3.9's, so that Kafka's
own tools (``OffsetsMessageFormatter``, ``GroupMetadataMessageFormatter``) read
what this broker writes.
"""
