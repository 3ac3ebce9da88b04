"""Kafka's client-side vocabulary, shared by the operator, placement, the bench and the demo.

Value types (:mod:`.topic_partition`, :mod:`.admin_types`), the Admin API interface and
its kafka-python adapter (:mod:`.admin`, :mod:`.admin_errors`), the reassignment JSON of
``kafka-reassign-partitions`` and the PartitionReassignment manifests (:mod:`.specs`,
:mod:`.reassignment_json`, :mod:`.manifests`), and Kafka's rack-aware replica assignment
(:mod:`.assignment`, pure, also used by the broker's controller) with ``--generate``'s
proposal built on it (:mod:`.generate`). The custom resources' status vocabulary
(:mod:`.states`) and the throttled copy-time model (:mod:`.copy_time`) are shared by the
operator and the placement job. Nothing here imports another kpo package.
"""
