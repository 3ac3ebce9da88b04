"""Idempotent producer state of one partition (KIP-98; Kafka's ``ProducerStateManager``).

Pure logic over batch headers: no file is read or written here. Per producer id the
partition keeps the producer epoch and the metadata of its last 5 appended batches
(Kafka retains 5 because a producer keeps at most 5 requests in flight per connection,
``max.in.flight.requests.per.connection``), so that a retried batch is recognised.

Leader appends are checked before offsets are assigned:

- a batch equal to a cached one (same epoch, same first and last sequence) is a
  duplicate: nothing is appended and the producer is answered with the original
  offsets and no error, as Kafka 2.x/3.x does;
- an epoch older than the current one is fenced with ``INVALID_PRODUCER_EPOCH`` (47;
  Kafka 2.7+ answers produce requests with it since KIP-588);
- a newer epoch must start at sequence 0, and within an epoch each batch's first
  sequence must follow the previous batch's last sequence, wrapping from 2^31 - 1 to 0;
  otherwise ``OUT_OF_ORDER_SEQUENCE_NUMBER`` (45);
- a producer id the partition does not know is accepted at any sequence. Kafka 2.5+
  does the same (KIP-360 removed ``UNKNOWN_PRODUCER_ID`` (59) from the produce path):
  the producer may simply have had all its batches removed by retention or
  DeleteRecords, and refusing it would force a needless epoch bump.

Follower appends and the rebuild on log open only record state, without checks.
Batches without a producer id (``producerId`` -1) and control batches (transaction
markers, which this broker never writes) are not tracked.

Unlike Kafka there are no ``.snapshot`` files: ``Log`` rebuilds the state on open and
after a truncation that removed a producer's every cached batch by scanning batch
headers (not records) of the whole log. That costs one header scan per segment; Kafka's
snapshots only bound that scan.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from kpo_broker.log.errors import InvalidRecordError, LogError
from kpo_broker.log.info import LogAppendInfo
from kpo_broker.log.records import BatchHeader

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
#: Batches remembered per producer for duplicate detection (Kafka's ``NumBatchesToRetain``).
MAX_CACHED_BATCHES = 5
#: Sequence numbers are int32 and wrap from this value to 0.
MAX_SEQUENCE = 2**31 - 1

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


class OutOfOrderSequenceError(LogError):
    """A batch's first sequence does not follow the producer's last sequence.

    Also raised when a bumped epoch does not start at sequence 0. Maps to
    ``OUT_OF_ORDER_SEQUENCE_NUMBER`` (45), as Kafka's ``OutOfOrderSequenceException``;
    clients recover by bumping their epoch (KIP-360).
    """

    error_code = OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    """A batch carries an older producer epoch than the partition has seen (a zombie).

    Maps to ``INVALID_PRODUCER_EPOCH`` (47), as Kafka's ``InvalidProducerEpochException``
    (KIP-588).
    """

    error_code = INVALID_PRODUCER_EPOCH


def next_sequence(sequence: int, increment: int) -> int:
    """Return ``sequence + increment`` in the int32 sequence space (wraps past 2^31 - 1 to 0)."""
    return (sequence + increment) % (MAX_SEQUENCE + 1)


def last_sequence(header: BatchHeader) -> int:
    """Return the sequence of the batch's last record: base sequence + last offset delta."""
    return next_sequence(header.base_sequence, header.last_offset_delta)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """Tell whether ``next_seq`` directly follows ``last_seq`` (with wrap-around to 0)."""
    return next_seq == next_sequence(last_seq, 1)


def is_tracked(header: BatchHeader) -> bool:
    """Tell whether ``header`` is a data batch with a producer id (Kafka's ``hasProducerId``)."""
    return header.producer_id > NO_PRODUCER_ID and not header.is_control


@dataclass(frozen=True)
class BatchMetadata:
    """What is remembered of one appended batch.

    Attributes:
        first_sequence: the batch's base sequence.
        last_sequence: sequence of its last record.
        first_offset: its base offset in the log.
        last_offset: its last offset in the log.
        max_timestamp: its ``maxTimestamp`` in ms.
    """

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int

    @classmethod
    def of(cls, header: BatchHeader) -> BatchMetadata:
        """Metadata of an appended batch (``header`` must carry its final offsets)."""
        return cls(
            header.base_sequence,
            last_sequence(header),
            header.base_offset,
            header.last_offset,
            header.max_timestamp,
        )


@dataclass
class ProducerStateEntry:
    """One producer id's state in the partition. Read it; only the manager changes it.

    Attributes:
        producer_id: the producer id.
        producer_epoch: the latest epoch appended.
        batches: the last appended batches of that epoch, oldest first (at most 5).
    """

    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))

    @property
    def last_sequence(self) -> int:
        """Last sequence appended in the current epoch, -1 if none."""
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        """Last offset of the producer's latest batch, -1 if none."""
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_timestamp(self) -> int:
        """``maxTimestamp`` (ms) of the producer's latest batch, -1 if none."""
        return self.batches[-1].max_timestamp if self.batches else -1

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """Return the cached batch ``header`` retries (same epoch and sequence range)."""
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, last_sequence(header)
        for batch in self.batches:
            if batch.first_sequence == first and batch.last_sequence == last:
                return batch
        return None

    def add(self, header: BatchHeader) -> None:
        """Record an appended batch; a different epoch replaces the cached batches."""
        if header.producer_epoch != self.producer_epoch:
            self.producer_epoch = header.producer_epoch
            self.batches.clear()
        self.batches.append(BatchMetadata.of(header))


def _duplicate_append_info(duplicates: Sequence[BatchMetadata]) -> LogAppendInfo:
    """Build the ``LogAppendInfo`` answering a retry: original offsets, nothing written."""
    newest = max(duplicates, key=lambda batch: batch.max_timestamp)
    return LogAppendInfo(
        first_offset=duplicates[0].first_offset,
        last_offset=max(batch.last_offset for batch in duplicates),
        max_timestamp=newest.max_timestamp,
        offset_of_max_timestamp=newest.last_offset,
        records_count=0,
        valid_bytes=0,
        duplicate=True,
    )


class ProducerStateManager:
    """The idempotent producer state of one partition log (see the module docstring).

    Single-threaded, like ``Log``. State changes only through ``update``, ``rebuild``,
    ``truncate_head``, ``truncate_to``, ``clear`` and ``remove_expired_producers``.
    """

    def __init__(self) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """Producer id -> its entry (a read-only view)."""
        return MappingProxyType(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """Return the entry of ``producer_id``, None if the partition does not know it."""
        return self._producers.get(producer_id)

    # ----------------------------------------------------------------- leader appends

    def check_leader_append(self, headers: Sequence[BatchHeader]) -> LogAppendInfo | None:
        """Validate a producer's batches before the leader assigns offsets.

        Args:
            headers: the request's batch headers for this partition, in order (offsets
                not assigned yet); already checked by ``validate_producer_batches``.

        Returns:
            None when the batches may be appended; when every batch retries a cached
            batch, the ``LogAppendInfo`` of the original append (``duplicate=True``,
            ``records_count`` and ``valid_bytes`` 0), to answer without appending.

        Raises:
            InvalidRecordError: a batch has a producer id but a negative base sequence
                (Kafka's ``LogValidator``), or the request mixes retried and new
                batches (Kafka accepts only one batch per partition per request, so
                no real client sends that; appending half of it would be wrong).
            InvalidProducerEpochError: an epoch is older than the producer's epoch.
            OutOfOrderSequenceError: a sequence gap, or a new epoch not starting at 0.
        """
        tracked = [header for header in headers if is_tracked(header)]
        for header in tracked:
            if header.base_sequence < 0:
                raise InvalidRecordError(
                    f"batch of producer {header.producer_id} has invalid base sequence "
                    f"{header.base_sequence}"
                )
        duplicates = [
            duplicate
            for header in tracked
            if (entry := self._producers.get(header.producer_id)) is not None
            and (duplicate := entry.find_duplicate(header)) is not None
        ]
        if duplicates:
            if len(duplicates) != len(headers):
                raise InvalidRecordError(
                    "produce request mixes retried batches with new ones for one partition"
                )
            return _duplicate_append_info(duplicates)
        self._check_sequences(tracked)
        return None

    def _check_sequences(self, tracked: Sequence[BatchHeader]) -> None:
        """Check epochs and sequences, batch after batch as if each were appended."""
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last sequence)
        for header in tracked:
            pid, epoch, first_seq = header.producer_id, header.producer_epoch, header.base_sequence
            entry = self._producers.get(pid)
            # An unknown producer (or one without an epoch) may write any sequence (KIP-360).
            lenient = entry is None or entry.producer_epoch == NO_PRODUCER_EPOCH
            current = pending.get(pid)
            if current is None and entry is not None:
                current = (entry.producer_epoch, entry.last_sequence)
            if current is not None:
                current_epoch, current_last_seq = current
                if epoch < current_epoch:
                    raise InvalidProducerEpochError(
                        f"producer {pid} sent epoch {epoch}, older than its epoch {current_epoch}"
                    )
                if epoch != current_epoch:
                    if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                        raise OutOfOrderSequenceError(
                            f"producer {pid} started epoch {epoch} at sequence {first_seq}, not 0"
                        )
                elif not lenient and not in_sequence(current_last_seq, first_seq):
                    raise OutOfOrderSequenceError(
                        f"producer {pid} epoch {epoch}: sequence {first_seq} does not follow "
                        f"{current_last_seq}"
                    )
            pending[pid] = (epoch, last_sequence(header))

    # ----------------------------------------------------------------- state changes

    def update(self, headers: Iterable[BatchHeader]) -> None:
        """Record appended batches (final offsets) without validating them.

        Used after a leader append, for follower appends and by ``rebuild``. A batch
        with another epoch than the producer's (newer, or older from a follower's
        leader) resets the producer to that epoch, as Kafka's follower path does.
        """
        for header in headers:
            if not is_tracked(header):
                continue
            entry = self._producers.get(header.producer_id)
            if entry is None:
                entry = ProducerStateEntry(header.producer_id, header.producer_epoch)
                self._producers[header.producer_id] = entry
            entry.add(header)

    def rebuild(self, headers: Iterable[BatchHeader], log_start_offset: int) -> None:
        """Replace the state with the one of the log whose batch headers are ``headers``.

        Args:
            headers: every batch header of the log, in offset order.
            log_start_offset: batches ending below it are skipped.
        """
        self._producers.clear()
        self.update(header for header in headers if header.last_offset >= log_start_offset)

    def truncate_head(self, log_start_offset: int) -> int:
        """Forget producers whose latest batch ends below ``log_start_offset`` (retention).

        Returns:
            The number of producer ids forgotten; their next batch is accepted at any
            sequence (Kafka's ``truncateHead``).
        """
        gone = [pid for pid, e in self._producers.items() if e.last_offset < log_start_offset]
        for pid in gone:
            del self._producers[pid]
        return len(gone)

    def truncate_to(self, log_end_offset: int) -> bool:
        """Forget batches at or after ``log_end_offset`` (the LEO after a truncation).

        Returns:
            False when a producer lost every cached batch: its state before those batches
            (older epoch, earlier sequences) is unknown here, and the caller must
            ``rebuild`` from the log. True when the state is exact.
        """
        exact = True
        for entry in self._producers.values():
            kept = [batch for batch in entry.batches if batch.first_offset < log_end_offset]
            if len(kept) != len(entry.batches):
                entry.batches.clear()
                entry.batches.extend(kept)
                exact = exact and bool(kept)
        return exact

    def clear(self) -> None:
        """Forget every producer (the log was emptied)."""
        self._producers.clear()

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose latest batch timestamp is ``expiration_ms`` old or older.

        Kafka's ``producer.id.expiration.ms`` (KIP-854, default 86400000; before 3.4
        ``transactional.id.expiration.ms``), applied every
        ``producer.id.expiration.check.interval.ms`` (default 600000) by the caller.

        Returns:
            The number of producer ids forgotten.
        """
        gone = [
            pid for pid, e in self._producers.items() if now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in gone:
            del self._producers[pid]
        return len(gone)
