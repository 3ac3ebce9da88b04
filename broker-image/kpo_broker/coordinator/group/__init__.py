"""The consumer group coordinator of Kafka's classic group protocol.

As Kafka's ``kafka.coordinator.group`` (``GroupCoordinator``, ``GroupMetadata``,
``MemberMetadata``, ``GroupMetadataManager``): the state machine of each group
(:mod:`.states`), the group and member metadata (:mod:`.group`, :mod:`.member`),
the records kept in ``__consumer_offsets`` (:mod:`.records`), the metadata manager
that stores and loads them (:mod:`.metadata_manager`) and the coordinator that
answers the group APIs (:mod:`.coordinator`).
"""
