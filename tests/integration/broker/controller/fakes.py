"""Stand-in brokers for controller tests: real TCP servers answering controller requests.

A :class:`FakeBroker` listens on 127.0.0.1, decodes each request with the protocol
package's framing, records it and answers with an empty success response; it registers
itself in ZooKeeper (``/brokers/ids/<id>``) with its own session, so closing that session
makes the broker "die" for the controller.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kpo_broker.protocol.framing import decode_request, encode_response, read_frame
from kpo_broker.protocol.interbroker import (
    ControlledShutdownRequest,
    LeaderAndIsrPartitionError,
    LeaderAndIsrResponse,
    StopReplicaPartitionError,
    StopReplicaResponse,
    UpdateMetadataResponse,
)
from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.model import BrokerRegistration, EndPoint

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
SUPPORTED = {LEADER_AND_ISR: (0, 4), STOP_REPLICA: (0, 3), UPDATE_METADATA: (0, 7)}
#: Session timeout of the test ZooKeeper clients (the test server allows 1-10 s).
SESSION_TIMEOUT_MS = 6000


def wait_for(condition: Callable[[], bool], timeout_s: float = 20, what: str = "condition") -> None:
    """Poll ``condition`` every 50 ms; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass(frozen=True)
class Received:
    """One request a fake broker received."""

    api_key: int
    api_version: int
    body: Any


class _Loop:
    """An asyncio loop in a daemon thread, shared by the fake brokers of a test."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(10)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


class FakeBroker:
    """A broker stand-in: records controller requests, answers them with success."""

    def __init__(self, broker_id: int, loop: _Loop, zk_connect: str) -> None:
        self.broker_id = broker_id
        self._loop = loop
        self._zk_connect = zk_connect
        self._lock = threading.Lock()
        self._received: list[Received] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server = loop.run(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port: int = self._server.sockets[0].getsockname()[1]
        self.zk: KafkaZkClient | None = None
        self.epoch = -1

    @property
    def registration(self) -> BrokerRegistration:
        """This broker's ``/brokers/ids`` registration."""
        return BrokerRegistration(self.broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", self.port),))

    def register(self, zk: KafkaZkClient | None = None) -> int:
        """Register in ZooKeeper with ``zk`` or a new session of its own; returns the epoch."""
        if zk is None:
            zk = KafkaZkClient(self._zk_connect, session_timeout_ms=SESSION_TIMEOUT_MS)
            zk.connect()
        self.zk = zk
        self.epoch = zk.register_broker(self.registration)
        return self.epoch

    def kill_session(self) -> None:
        """Close the broker's ZooKeeper session: its registration vanishes."""
        if self.zk is not None:
            self.zk.close()
            self.zk = None

    def received(self, api_key: int | None = None) -> list[Received]:
        """The requests received so far (of one api, or all)."""
        with self._lock:
            return [r for r in self._received if api_key is None or r.api_key == api_key]

    def clear(self) -> None:
        """Forget the requests received so far."""
        with self._lock:
            self._received.clear()

    def close(self) -> None:
        """Stop serving (and close the ZooKeeper session if still open)."""
        self.kill_session()

        async def stop() -> None:
            self._server.close()
            for task in self._connections:
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()

        self._loop.run(stop())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while (frame := await read_frame(reader)) is not None:
                request = decode_request(frame, SUPPORTED)
                with self._lock:
                    self._received.append(
                        Received(request.api_key, request.api_version, request.body)
                    )
                writer.write(encode_response(request, _answer(request.api_key, request.body)))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()


def _answer(api_key: int, body: Any) -> Any:
    if api_key == LEADER_AND_ISR:
        errors = [
            LeaderAndIsrPartitionError(
                topic_name=topic.topic_name, partition_index=p.partition_index, error_code=0
            )
            for topic in body.topic_states
            for p in topic.partition_states
        ]
        return LeaderAndIsrResponse(error_code=0, partition_errors=errors)
    if api_key == STOP_REPLICA:
        errors = [
            StopReplicaPartitionError(
                topic_name=topic.topic_name, partition_index=p.partition_index, error_code=0
            )
            for topic in body.topic_states
            for p in topic.partition_states
        ]
        return StopReplicaResponse(error_code=0, partition_errors=errors)
    if api_key == UPDATE_METADATA:
        return UpdateMetadataResponse(error_code=0)
    raise AssertionError(f"unexpected api key {api_key} ({ControlledShutdownRequest.__name__}?)")
