"""What a broker does when one of its log dirs fails (Kafka's ``LogDirFailureHandler``).

The ``LogDirFailureChannel`` records a dir as offline on its first I/O error, on whatever
thread met it; this handler takes each new offline dir on the event loop, in order, and,
as Kafka's ``ReplicaManager.handleLogDirFailure``:

1. the replica manager stops serving the dir's partitions (they answer
   KAFKA_STORAGE_ERROR from now on) and their replica fetchers stop;
2. the log manager closes the dir's logs, forgets them and stops checkpointing the dir;
   with no log dir left online it halts the broker (exit 1), before anything is written
   to ZooKeeper, so the controller learns of it when the broker's session expires;
3. the controller is told through ``/log_dir_event_notification/log_dir_event_<seq>``
   (``{"version":1,"broker":<id>,"event":1}``); it then sends LeaderAndIsr for every
   replica of this broker, and the KAFKA_STORAGE_ERROR answers tell it which replicas are
   offline, so that it elects other leaders for them.

Dirs that failed while the logs were loading are handled as soon as the handler starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from kpo_broker.cancellation import cancel_and_wait
from kpo_broker.log.dir_failure import LogDirFailureChannel
from kpo_broker.log.manager import LogManager
from kpo_broker.server.fetcher import ReplicaFetcherManager
from kpo_broker.server.replica_manager import ReplicaManager
from kpo_broker.zk.errors import KafkaZkError
from kpo_kafka.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: Pause between two attempts to write the notification while ZooKeeper is unreachable, s.
NOTIFY_RETRY_BACKOFF_S = 0.5


class LogDirFailureHandler:
    """Takes failed log dirs out of service, one at a time (see the module docstring).

    Args:
        broker_id: this broker's ``broker.id``.
        channel: the broker's ``LogDirFailureChannel``.
        replica_manager: stops serving the dir's partitions.
        log_manager: closes the dir's logs (and halts when no dir is left).
        fetchers: the replica fetchers of the followed partitions.
        notify_controller: writes the log dir event notification for a broker id
            (``KafkaZkClient.propagate_log_dir_event``); blocking, run in a thread.
        on_partitions_offline: told which partitions went offline (the group coordinator
            drops the groups of offline ``__consumer_offsets`` partitions).
    """

    def __init__(
        self,
        broker_id: int,
        channel: LogDirFailureChannel,
        replica_manager: ReplicaManager,
        log_manager: LogManager,
        fetchers: ReplicaFetcherManager,
        notify_controller: Callable[[int], object],
        on_partitions_offline: Callable[[list[TopicPartition]], None] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._channel = channel
        self._replica_manager = replica_manager
        self._log_manager = log_manager
        self._fetchers = fetchers
        self._notify_controller = notify_controller
        self._on_partitions_offline = on_partitions_offline
        self._queue: asyncio.Queue[Path] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._handled: set[Path] = set()

    def start(self) -> None:
        """Listen to the channel and handle the dirs already offline (event loop thread)."""
        loop = asyncio.get_running_loop()

        def on_offline(log_dir: Path) -> None:  # any thread
            loop.call_soon_threadsafe(self._queue.put_nowait, log_dir)

        self._channel.add_listener(on_offline)
        for log_dir in self._channel.offline_dirs:
            self._queue.put_nowait(log_dir)
        self._task = asyncio.create_task(self._run(), name="log-dir-failure-handler")

    async def stop(self) -> None:
        """Stop handling failures (shutdown: the log manager's shutdown skips offline dirs)."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)

    async def _run(self) -> None:
        while True:
            log_dir = await self._queue.get()
            if log_dir in self._handled:
                continue
            self._handled.add(log_dir)
            try:
                await self.handle_log_dir_failure(log_dir)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("handling the failure of log dir %s failed", log_dir)

    async def handle_log_dir_failure(self, log_dir: Path) -> list[TopicPartition]:
        """Stop serving ``log_dir`` and tell the controller (may halt the broker).

        Returns:
            The partitions taken offline.
        """
        log.warning(
            "broker %d: stopping serving replicas in dir %s because the log dir has failed",
            self.broker_id,
            log_dir,
        )
        offline = self._replica_manager.handle_log_dir_failure(log_dir)
        self._fetchers.remove_partitions(list(offline))
        if self._on_partitions_offline is not None and offline:
            self._on_partitions_offline(offline)
        # Nothing is awaited before the log manager's step (Kafka's order): a fetcher left
        # idle is stopped at the next LeaderAndIsr, and the halt never waits on a peer.
        self._log_manager.handle_log_dir_failure(log_dir)
        log.warning(
            "broker %d stopped fetchers for partitions %s in the failed log dir %s",
            self.broker_id,
            [f"{tp[0]}-{tp[1]}" for tp in offline],
            log_dir,
        )
        while True:
            try:
                name = await asyncio.to_thread(self._notify_controller, self.broker_id)
                break
            except KafkaZkError as exc:
                log.warning("cannot write the log dir event notification (%s); retrying", exc)
                await asyncio.sleep(NOTIFY_RETRY_BACKOFF_S)
        log.info("broker %d: log dir event notification %s written", self.broker_id, name)
        return offline
