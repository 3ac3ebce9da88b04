"""The ZooKeeper session: connection, pipelined requests and controller-epoch fencing.

Kafka's ``ZooKeeperClient``: :class:`~kpo_broker.zk.client.KafkaZkClient` holds one
:class:`ZkSession` and sends every request through it. Requests for many znodes are
pipelined in a sliding window (:mod:`~kpo_broker.zk.pipeline`): a request is sent as soon
as fewer than ``zookeeper.max.in.flight.requests`` asynchronous kazoo requests await their
response (Kafka's ``handleRequests``, KAFKA-5642), so N znodes cost about
N / max_in_flight_requests round trips instead of N. Kafka's controller design counts
what the synchronous way costs: a broker failure moving the leaders of 10K partitions
at 4 ms per ZooKeeper write takes 40 s. Controller writes are multis whose first
operation checks the version of ``/controller_epoch`` (as Kafka 2.1+ does), so a
controller that lost its election is fenced with :class:`ControllerMovedError`.

Session expiry (Kafka's ``ZooKeeperClient`` re-creates its session and calls each
``StateChangeHandler``'s ``beforeInitializingSession`` / ``afterInitializingSession``):
kazoo reports an expired session as LOST, drops the session id and keeps reconnecting
by itself, which opens a new session. :class:`SessionStateTracker` maps kazoo's states
onto :class:`ZkSessionState`: EXPIRED when the session is gone, NEW_SESSION when a
session with another id is connected (the broker then re-creates its ephemeral znodes
and the controller runs for election again). Kazoo's ``ChildrenWatch`` recipe re-arms
itself on the new session, and so do the data watches
(:class:`~kpo_broker.zk.data_watches.DataWatchSet`); other raw one-shot watches would
be lost.
Reconnection attempts (and the recipes' re-reads) back off to at most
:data:`RECONNECT_BACKOFF_MAX_S` (kazoo's default grows to an hour), so a ZooKeeper that
comes back is found within about a second, usually before its sessions expire.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    ConnectionDropped,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RequestTimeoutError,
    RolledBackError,
    SessionExpiredError,
    SessionMovedError,
    ZookeeperError,
    ZookeeperStoppedError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch

from kpo_broker.zk import multi_read, paths
from kpo_broker.zk.data_watches import DataWatchSet
from kpo_broker.zk.errors import (
    ControllerMovedError,
    ZkAuthFailedError,
    ZkConnectionLossError,
    ZkOperationError,
)
from kpo_broker.zk.ops import CreateOp, DeleteOp, Op, SetDataOp, multi_error
from kpo_broker.zk.pipeline import DEFAULT_MAX_IN_FLIGHT_REQUESTS, pipeline, round_trips
from kpo_broker.zk.security import ZkClientSecurity
from kpo_broker.zk.watches import WatchCallback, ZkWatch

_log = logging.getLogger(__name__)

#: Kafka's default ``zookeeper.session.timeout.ms`` (2.5+).
DEFAULT_SESSION_TIMEOUT_MS = 18_000

#: Longest pause between two connection attempts, s (before kazoo's +-40 % jitter). The
#: Java client retries about every second; kazoo's default backoff doubles up to an
#: hour, so after a long ZooKeeper outage a session would only be re-established long
#: after the server is back (and would expire meanwhile).
RECONNECT_BACKOFF_MAX_S = 1.0
#: Kazoo's ``connection_retry`` and ``command_retry`` (the watch recipes re-read their
#: znode with it after a connection loss, holding the recipe's lock while they back
#: off): retry forever, from 0.1 s doubling to the cap above.
_RETRY_POLICY: dict[str, float] = {
    "max_tries": -1,
    "delay": 0.1,
    "backoff": 2,
    "max_delay": RECONNECT_BACKOFF_MAX_S,
}

_CONNECTION_ERRORS = (
    ConnectionLoss,
    ConnectionDropped,
    SessionExpiredError,
    SessionMovedError,
    OperationTimeoutError,
    RequestTimeoutError,
    KazooTimeoutError,
    ZookeeperStoppedError,
)

#: A function that sends one kazoo request and returns its ``IAsyncResult``.
Request = Callable[[], Any]


class ZkSessionState(enum.Enum):
    """ZooKeeper session states given to session listeners.

    ``SUSPENDED``: connection lost, the session may survive; ``EXPIRED``: the session and
    its ephemeral znodes are gone (also reported on :meth:`ZkSession.close`);
    ``CONNECTED``: (re)connected to the same session (or connected for the first time);
    ``NEW_SESSION``: connected with a new session after the previous one expired (Kafka's
    ``afterInitializingSession``): its ephemeral znodes must be created again.
    """

    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    EXPIRED = "EXPIRED"
    NEW_SESSION = "NEW_SESSION"


@dataclass
class ZkRequestStats:
    """Counters of the requests a session sent.

    Attributes:
        requests: ZooKeeper requests sent (a multi counts as one, and so does kazoo's
            ``ensure_path``).
        round_trips: round trips the caller waited for at least: per batch of pipelined
            requests, their number divided by ``max_in_flight_requests``, rounded up
            (one per single request).
    """

    requests: int = 0
    round_trips: int = 0


def _ancestors_and_self(path: str) -> list[str]:
    """Return ``/a``, ``/a/b``, ``/a/b/c`` for ``/a/b/c``."""
    parts = [part for part in path.split("/") if part]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def split_connect_string(connect: str) -> tuple[str, str]:
    """Split ``zookeeper.connect`` into hosts and chroot, e.g. ``("h1:2181,h2:2181", "/kafka")``.

    The chroot is ``""`` when the string names none.
    """
    hosts, slash, chroot = connect.partition("/")
    return hosts, (slash + chroot).rstrip("/")


#: Kazoo's session states mapped onto the states given to session listeners.
SESSION_STATES = {
    KazooState.CONNECTED: ZkSessionState.CONNECTED,
    KazooState.SUSPENDED: ZkSessionState.SUSPENDED,
    KazooState.LOST: ZkSessionState.EXPIRED,
}


class SessionStateTracker:
    """Maps kazoo's connection states onto :class:`ZkSessionState`.

    Kazoo says CONNECTED both when it reconnects to the same session and when, after an
    expiry (LOST), it opened a new one; the session id tells them apart. The first
    connection is CONNECTED; a later connection whose session id differs from the last
    one seen is NEW_SESSION, whether or not LOST was seen before it.
    """

    def __init__(self) -> None:
        self._session_id: int | None = None

    def on_state(self, state: KazooState, session_id: int | None) -> ZkSessionState:
        """Return the session state for kazoo's ``state``.

        Args:
            state: the state kazoo reported.
            session_id: the session id kazoo holds now (None when not connected).
        """
        if state is not KazooState.CONNECTED:
            return SESSION_STATES[state]
        previous, self._session_id = self._session_id, session_id
        if previous is not None and session_id != previous:
            return ZkSessionState.NEW_SESSION
        return ZkSessionState.CONNECTED


def multi_results(result: object, fenced: bool, path: str) -> list[Any]:
    """Return the per-operation results of a multi sent by :meth:`ZkSession.multi_request`.

    Args:
        result: what :meth:`ZkSession.handle_requests` returned for the multi: a list of
            per-operation results (each a kazoo result or ``ZookeeperError``), or the
            ``ZookeeperError`` the whole request failed with.
        fenced: whether the multi starts with the controller epoch check; its result is
            then dropped from the returned list.
        path: the znode named in errors.

    Raises:
        ControllerMovedError: the controller epoch check failed (Kafka's
            ``ControllerMovedException``).
        ZkOperationError: the request failed as a whole.
    """
    if not isinstance(result, list):
        raise ZkOperationError(path, type(result).__name__)
    if fenced:
        check = result[0]
        if isinstance(check, ZookeeperError) and not isinstance(check, RolledBackError):
            raise ControllerMovedError(
                f"controller epoch znode version changed ({type(check).__name__}); "
                f"write to {path} rejected"
            )
        return result[1:]
    return result


#: Most operations packed into one multi by :meth:`ZkSession.handle_multis`.
MAX_MULTI_OPS = 500
#: Most bytes of paths and data packed into one multi (ZooKeeper's ``jute.maxbuffer`` is
#: 1 MiB by default).
MAX_MULTI_BYTES = 256 * 1024


def _op_bytes(op: Op) -> int:
    data = op.data if isinstance(op, CreateOp | SetDataOp) else b""
    return len(op.path) + len(data) + 16


def _pack_groups(groups: Sequence[Sequence[Op]]) -> list[list[int]]:
    """Split group indexes into consecutive runs within the multi size limits.

    A group larger than the limits gets a run of its own.
    """
    chunks: list[list[int]] = []
    current: list[int] = []
    ops = size = 0
    for i, group in enumerate(groups):
        group_size = sum(_op_bytes(op) for op in group)
        if current and (ops + len(group) > MAX_MULTI_OPS or size + group_size > MAX_MULTI_BYTES):
            chunks.append(current)
            current, ops, size = [], 0, 0
        current.append(i)
        ops += len(group)
        size += group_size
    if current:
        chunks.append(current)
    return chunks


class ZkSession:
    """A kazoo session with pipelined requests, controller fencing and request counters.

    Kafka's ``ZooKeeperClient``. Requests are ``(path, send)`` pairs (see
    :meth:`request` and :meth:`multi_request`); :meth:`handle_requests` pipelines them.
    Results are kazoo's, or the ``ZookeeperError`` a request failed with (callers map
    the ones they expect, e.g. ``NoNodeError``, and raise :class:`ZkOperationError` for
    the others); a failed session raises :class:`ZkConnectionLossError`.

    Args:
        connect: ``zookeeper.connect``, e.g. ``"127.0.0.1:2181/kafka"``; a missing chroot
            is created on :meth:`connect`.
        session_timeout_ms: ``zookeeper.session.timeout.ms``.
        connection_timeout_ms: ``zookeeper.connection.timeout.ms``; defaults to the
            session timeout, as in Kafka.
        max_in_flight_requests: ``zookeeper.max.in.flight.requests``: the most requests
            awaiting a response at once (see module docstring).
        security: SASL credentials, znode ACLs (``zookeeper.set.acl``) and TLS
            (``zookeeper.ssl.*``); default an unauthenticated plaintext client creating
            open znodes. Every znode created through
            this session, the chroot included, gets ``security.acls(path)``.

    Raises:
        ValueError: ``max_in_flight_requests`` is below 1.
    """

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
        max_in_flight_requests: int = DEFAULT_MAX_IN_FLIGHT_REQUESTS,
        security: ZkClientSecurity | None = None,
    ) -> None:
        if max_in_flight_requests < 1:
            raise ValueError("max_in_flight_requests must be at least 1")
        self._hosts, self._chroot = split_connect_string(connect)
        self._session_timeout_ms = session_timeout_ms
        self._connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self._max_in_flight = max_in_flight_requests
        #: Whether the server answers ``multiRead`` (ZooKeeper 3.6+); cleared at the first
        #: UNIMPLEMENTED (or undecodable) answer, after which reads go one znode each.
        self._multi_read = True
        self._stats = ZkRequestStats()
        self._stats_lock = threading.Lock()
        self._security = security or ZkClientSecurity()
        self._zk: Any = self._new_client(connect)
        self._states = SessionStateTracker()
        self._listeners: list[Callable[[ZkSessionState], None]] = []
        self._zk.add_listener(self._on_kazoo_state)
        self._data_watches = DataWatchSet(self._zk, self.handle_requests)

    def _new_client(self, hosts: str) -> Any:
        """Return a kazoo client of ``hosts`` authenticating as :attr:`_security` says."""
        return KazooClient(
            hosts=hosts,
            handler=self._security.kazoo_handler(),
            timeout=self._session_timeout_ms / 1000,
            connection_retry=dict(_RETRY_POLICY),
            command_retry=dict(_RETRY_POLICY),
            sasl_options=self._security.sasl_options,
            # Only a fallback: every create below names its znode's ACLs.
            default_acl=self._security.acls("/") if self._security.set_acl else None,
        )

    @property
    def security(self) -> ZkClientSecurity:
        """The session's authentication and znode ACL settings."""
        return self._security

    # --- lifecycle ---------------------------------------------------------------------

    def connect(self) -> None:
        """Create the chroot if missing, open the session and create Kafka's persistent paths.

        Raises:
            ZkConnectionLossError: no server answered within ``zookeeper.connection.timeout.ms``.
            ZkAuthFailedError: SASL authentication failed.
        """
        timeout_s = self._connection_timeout_ms / 1000
        if self._chroot:
            root = self._new_client(self._hosts)
            try:
                self._start(root, timeout_s)
                for path in _ancestors_and_self(self._chroot):
                    # Each level with its own ACLs (Kafka's createRecursive).
                    root.ensure_path(path, acl=self._security.acls(path))
            finally:
                root.stop()
                root.close()
        self._start(self._zk, timeout_s)
        self.ensure_paths(paths.PERSISTENT_PATHS)

    def _start(self, client: Any, timeout_s: float) -> None:
        """Start ``client``; with SASL, prove the session authenticated with one read.

        Kazoo reports CONNECTED before its SASL exchange, and a failed exchange ends its
        connection loop: the read then fails at once (AUTH_FAILED, or a closed session
        when the server enforces SASL) instead of stalling every later request.
        """
        try:
            client.start(timeout=timeout_s)
        except KazooTimeoutError as exc:
            client.stop()
            tls_error = getattr(client.handler, "last_tls_error", None)
            why = f"; the last TLS handshake failed: {tls_error}" if tls_error else ""
            raise ZkConnectionLossError(f"no ZooKeeper session within {timeout_s} s{why}") from exc
        if self._security.username is None:
            return
        try:
            client.exists_async("/").get(timeout=timeout_s)
        except (AuthFailedError, *_CONNECTION_ERRORS) as exc:
            # A lost connection keeps kazoo's loop retrying; a failed SASL exchange ends it.
            loop_ended = client._connection.connection_stopped.is_set()
            client.stop()
            client.close()
            if not isinstance(exc, AuthFailedError) and not loop_ended:
                raise ZkConnectionLossError(
                    f"ZooKeeper connection lost while authenticating ({type(exc).__name__})"
                ) from exc
            raise ZkAuthFailedError(
                f"SASL authentication to ZooKeeper as {self._security.username!r} failed "
                f"({type(exc).__name__}): check the JAAS Client section's username and password"
            ) from exc

    def close(self) -> None:
        """Close the session (its ephemeral znodes vanish); idempotent."""
        self._zk.stop()
        self._zk.close()

    @property
    def connected(self) -> bool:
        """Whether the session is connected now."""
        return bool(self._zk.connected)

    @property
    def session_id(self) -> int:
        """The ZooKeeper session id: the ``ephemeralOwner`` of the ephemeral znodes it creates."""
        return int(self._zk.client_id[0])

    @property
    def stats(self) -> ZkRequestStats:
        """A snapshot of the request counters."""
        with self._stats_lock:
            return ZkRequestStats(self._stats.requests, self._stats.round_trips)

    def add_session_listener(self, callback: Callable[[ZkSessionState], None]) -> None:
        """Call ``callback(state)`` on each session state change, from kazoo's thread.

        The callback must not block or call ZooKeeper (enqueue the state and return):
        on NEW_SESSION the broker registers itself again and the controller re-elects.
        """
        self._listeners.append(callback)

    def _on_kazoo_state(self, state: KazooState) -> None:
        """Kazoo's connection thread: map ``state`` and tell every session listener."""
        client_id = self._zk.client_id
        mapped = self._states.on_state(state, None if client_id is None else int(client_id[0]))
        if mapped in (ZkSessionState.CONNECTED, ZkSessionState.NEW_SESSION):
            self._data_watches.rearm_all()
        for callback in list(self._listeners):
            try:
                callback(mapped)
            except Exception:
                _log.exception("ZooKeeper session listener failed on %s", mapped.name)

    # --- watches -----------------------------------------------------------------------

    def add_children_watch(self, path: str, on_children: Callable[[list[str], Any], Any]) -> None:
        """Install kazoo's ``ChildrenWatch`` recipe on ``path`` (re-armed after each trigger).

        ``on_children(children, event)`` is called at once and after each change, from
        kazoo's thread; it returns False to stop watching. ``path`` must exist.
        """
        ChildrenWatch(self._zk, path, on_children, send_event=True)

    def add_data_watches(self, watched: Sequence[tuple[str, WatchCallback]]) -> list[ZkWatch]:
        """Watch many znodes at once, their ``exists`` requests pipelined.

        For the many state znodes of partitions being reassigned; see
        :class:`~kpo_broker.zk.data_watches.DataWatchSet` (delivered without a blocking
        read, re-armed after each reconnection).

        Returns:
            per ``(path, callback)``, in order, the handle that cancels its watch.

        Raises:
            ZkConnectionLossError: the session failed while installing them.
            ZkOperationError: ZooKeeper refused to watch a znode.
        """
        return self._data_watches.add(watched)

    # --- requests ----------------------------------------------------------------------

    def _wait(self, async_result: Any, path: str) -> Any:
        timeout_s = (self._session_timeout_ms + self._connection_timeout_ms) / 1000
        try:
            return async_result.get(timeout=timeout_s)
        except _CONNECTION_ERRORS as exc:
            raise ZkConnectionLossError(f"{type(exc).__name__} during a request on {path}") from exc
        except ZookeeperError as exc:
            return exc

    def handle_requests(self, requests: Sequence[tuple[str, Request]]) -> list[Any]:
        """Send requests pipelined, at most ``max_in_flight_requests`` in flight; collect results.

        Kafka's ``ZooKeeperClient.handleRequests`` (:func:`~kpo_broker.zk.pipeline.pipeline`);
        :attr:`stats` counts the batch as ``len / max_in_flight_requests`` round trips,
        rounded up.

        Args:
            requests: ``(path, send)`` pairs; ``send()`` issues one kazoo async request.

        Returns:
            per request, in order: its result, or the ``ZookeeperError`` it failed with.

        Raises:
            ZkConnectionLossError: the session failed while requests were in flight.
        """
        with self._stats_lock:
            self._stats.requests += len(requests)
            self._stats.round_trips += round_trips(len(requests), self._max_in_flight)
        return pipeline(
            requests,
            self._max_in_flight,
            lambda request: request[1](),
            lambda request, pending: self._wait(pending, request[0]),
        )

    def get_many(
        self, znode_paths: Sequence[str], per_request: int = multi_read.MAX_MULTI_READ_OPS
    ) -> list[Any]:
        """Read the data of many znodes, ``per_request`` (default 100) to a request.

        Each request is a ``multiRead`` (:mod:`~kpo_broker.zk.multi_read`) and the
        requests are pipelined (:meth:`handle_requests`). A server without ``multiRead``
        (before ZooKeeper 3.6) is read one ``getData`` per znode from then on.

        Args:
            znode_paths: the znodes.
            per_request: znodes per ``multiRead``; lower it for large znodes, whose data
                share one answer.

        Returns:
            per znode, in order: ``(data, ZnodeStat)`` as kazoo's ``get`` returns it, or
            the ``ZookeeperError`` its read failed with (``NoNodeError`` when absent).

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self._read_many(znode_paths, multi_read.GET_DATA_TYPE, "get_async", per_request)

    def get_children_many(self, znode_paths: Sequence[str]) -> list[Any]:
        """List the children of many znodes, like :meth:`get_many` reads data.

        Returns:
            per znode, in order: its children's names, or the ``ZookeeperError`` the
            listing failed with (``NoNodeError`` when absent).

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self._read_many(
            znode_paths,
            multi_read.GET_CHILDREN_TYPE,
            "get_children_async",
            multi_read.MAX_MULTI_READ_OPS,
        )

    def _read_many(
        self, znode_paths: Sequence[str], op_type: int, method: str, per_request: int
    ) -> list[Any]:
        if len(znode_paths) > 1 and self._multi_read:
            chunks = multi_read.chunk(list(znode_paths), per_request)
            answers = self.handle_requests(
                [(part[0], self._multi_read_request(part, op_type)) for part in chunks]
            )
            unsupported = next((a for a in answers if multi_read.is_unsupported(a)), None)
            if unsupported is None:
                results: list[Any] = []
                for part, answer in zip(chunks, answers, strict=True):
                    # A request failing as a whole fails each of its reads.
                    results.extend(answer if isinstance(answer, list) else [answer] * len(part))
                return results
            _log.warning(
                "ZooKeeper does not answer multiRead (%s): reading one znode per request",
                type(unsupported).__name__,
            )
            self._multi_read = False
        return self.handle_requests([self.request(method, p) for p in znode_paths])

    def _multi_read_request(self, znode_paths: Sequence[str], op_type: int) -> Request:
        """Return a request sending one ``multiRead`` of ``znode_paths`` through kazoo."""
        zk = self._zk
        root = (zk.chroot or "").rstrip("/")
        full = tuple(root + p if p != "/" else root or "/" for p in znode_paths)

        def send() -> Any:
            result = zk.handler.async_result()
            zk._call(multi_read.MultiRead(full, op_type), result)
            return result

        return send

    def request(self, method: str, path: str, *args: Any, **kwargs: Any) -> tuple[str, Request]:
        """Return a ``(path, send)`` pair calling kazoo's async ``method(path, ...)``.

        Args:
            method: a kazoo ``KazooClient`` async method, e.g. ``"get_async"``.
            path: the znode, relative to the chroot.
            *args: the method's other positional arguments.
            **kwargs: the method's keyword arguments.
        """
        if method in ("create_async", "ensure_path_async") and "acl" not in kwargs:
            kwargs = {**kwargs, "acl": self._security.acls(path)}

        def send() -> Any:
            return getattr(self._zk, method)(path, *args, **kwargs)

        return path, send

    def handle_request(self, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        """Call kazoo's async ``method(path, ...)`` and wait (see :meth:`handle_requests`).

        Returns:
            its result, or the ``ZookeeperError`` it failed with.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self.handle_requests([self.request(method, path, *args, **kwargs)])[0]

    def multi_request(self, ops: Sequence[Op], fence_zk_version: int | None = None) -> Request:
        """Return a request sending ``ops`` as one multi (transaction).

        Read its result with :func:`multi_results`.

        Args:
            ops: the operations, applied atomically and in order.
            fence_zk_version: when set, the multi first checks that ``/controller_epoch``
                has this znode version (the controller's fence).
        """

        def send() -> Any:
            transaction = self._zk.transaction()
            if fence_zk_version is not None:
                transaction.check(paths.CONTROLLER_EPOCH, fence_zk_version)
            for op in ops:
                if isinstance(op, CreateOp):
                    transaction.create(
                        op.path,
                        op.data,
                        acl=self._security.acls(op.path),
                        ephemeral=op.ephemeral,
                        sequence=op.sequence,
                    )
                elif isinstance(op, SetDataOp):
                    transaction.set_data(op.path, op.data, op.version)
                elif isinstance(op, DeleteOp):
                    transaction.delete(op.path, op.version)
                else:
                    transaction.check(op.path, op.version)
            return transaction.commit_async()

        return send

    def handle_multis(
        self, groups: Sequence[Sequence[Op]], fence_zk_version: int | None = None
    ) -> list[list[Any]]:
        """Apply each group of ``groups`` as if it were its own multi, packing many into one.

        Consecutive groups share a multi of at most :data:`MAX_MULTI_OPS` operations and
        :data:`MAX_MULTI_BYTES` of paths and data (under ZooKeeper's ``jute.maxbuffer``);
        the shared multis are pipelined. A shared multi commits all its groups or none:
        when one fails (a version conflict in one group aborts it), its groups are sent
        again each as its own multi, so every group's outcome is the one it would have had
        alone (Kafka writes one multi per partition; this sends about one per
        :data:`MAX_MULTI_OPS` partitions when nothing conflicts).

        Args:
            groups: the operations of each group, applied atomically and in order.
            fence_zk_version: when set, every multi first checks ``/controller_epoch``.

        Returns:
            per group, in order: its per-operation results (the fence's dropped), each a
            kazoo result or the ``ZookeeperError`` it failed with.

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
            ZkOperationError: a multi failed as a whole.
        """
        fenced = fence_zk_version is not None
        chunks = _pack_groups(groups)
        requests = [
            (
                groups[chunk[0]][0].path if groups[chunk[0]] else paths.CONTROLLER_EPOCH,
                self.multi_request([op for i in chunk for op in groups[i]], fence_zk_version),
            )
            for chunk in chunks
        ]
        outcomes: list[list[Any] | None] = [None] * len(groups)
        alone: list[int] = []
        for chunk, (path, _), result in zip(
            chunks, requests, self.handle_requests(requests), strict=True
        ):
            results = multi_results(result, fenced, path)
            if len(chunk) == 1 or multi_error(results) is None:
                start = 0
                for i in chunk:
                    outcomes[i] = results[start : start + len(groups[i])]
                    start += len(groups[i])
            else:
                alone.extend(chunk)
        if alone:
            retried = self.handle_requests(
                [
                    (
                        groups[i][0].path if groups[i] else paths.CONTROLLER_EPOCH,
                        self.multi_request(groups[i], fence_zk_version),
                    )
                    for i in alone
                ]
            )
            for i, result in zip(alone, retried, strict=True):
                path = groups[i][0].path if groups[i] else paths.CONTROLLER_EPOCH
                outcomes[i] = multi_results(result, fenced, path)
        return [outcome if outcome is not None else [] for outcome in outcomes]

    def multi(self, ops: Sequence[Op], fence_zk_version: int | None = None) -> list[Any]:
        """Send one multi and return its per-operation results (see :func:`multi_results`).

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
            ZkOperationError: the request failed as a whole.
        """
        path = ops[0].path if ops else paths.CONTROLLER_EPOCH
        result = self.handle_requests([(path, self.multi_request(ops, fence_zk_version))])[0]
        return multi_results(result, fence_zk_version is not None, path)

    def ensure_paths(self, znode_paths: Sequence[str]) -> None:
        """Create persistent znodes (and their parents) that do not exist yet, pipelined.

        Without znode ACLs one wave of ``ensure_path`` requests; with them, level by level
        (parents first), so that each znode gets its own path's ACLs (a parent of a
        sensitive path is not sensitive itself).

        Raises:
            ZkConnectionLossError: the session failed.
            ZkOperationError: a path could not be created.
        """
        if self._security.set_acl:
            levels: dict[int, list[str]] = {}
            for path in dict.fromkeys(a for p in znode_paths for a in _ancestors_and_self(p)):
                levels.setdefault(path.count("/"), []).append(path)
            waves = [levels[depth] for depth in sorted(levels)]
        else:
            waves = [list(znode_paths)]
        for wave in waves:
            results = self.handle_requests([self.request("ensure_path_async", p) for p in wave])
            for path, result in zip(wave, results, strict=True):
                if isinstance(result, ZookeeperError):
                    raise ZkOperationError(path, type(result).__name__)

    def set_or_create(
        self, path: str, data: bytes, expected_version: int | None = None
    ) -> int | None:
        """Write ``data`` to a persistent znode.

        Args:
            path: the znode.
            data: its new content.
            expected_version: None writes unconditionally, creating the znode (and its
                parents) when missing; a version makes the write a compare-and-set on an
                existing znode.

        Returns:
            the znode's new version, or None on a version conflict (or a missing znode
            under compare-and-set).

        Raises:
            ZkConnectionLossError: the session failed.
            ZkOperationError: ZooKeeper refused the write.
        """
        version = -1 if expected_version is None else expected_version
        result = self.handle_request("set_async", path, data, version)
        if expected_version is None and isinstance(result, NoNodeError):
            created = self.handle_request(
                "create_async", path, data, makepath=True, include_data=True
            )
            if not isinstance(created, NodeExistsError):
                if isinstance(created, ZookeeperError):
                    raise ZkOperationError(path, type(created).__name__)
                return int(created[1].version)
            # Created by someone else meanwhile: overwrite, as an unconditional write does.
            result = self.handle_request("set_async", path, data, -1)
        if isinstance(result, BadVersionError | NoNodeError) and expected_version is not None:
            return None
        if isinstance(result, ZookeeperError):
            raise ZkOperationError(path, type(result).__name__)
        return int(result.version)

    def delete_recursive(self, roots: Sequence[str], fence_zk_version: int | None) -> None:
        """Delete znodes with their subtrees, children first, pipelined level by level.

        Znodes that do not exist are skipped. Children are listed with ``multiRead``
        (:meth:`get_children_many`). With ``fence_zk_version`` the deletes go in multis
        checking the controller epoch first, many to a multi (:meth:`handle_multis`).

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
            ZkOperationError: a znode could not be deleted (e.g. a child was added meanwhile).
        """
        levels: list[list[str]] = []
        level = list(roots)
        while level:
            levels.append(level)
            listed = self.get_children_many(level)
            below: list[str] = []
            for path, children in zip(level, listed, strict=True):
                if isinstance(children, NoNodeError):
                    continue
                if isinstance(children, ZookeeperError):
                    raise ZkOperationError(path, type(children).__name__)
                below.extend(f"{path}/{child}" for child in children)
            level = below
        for level in reversed(levels):
            if fence_zk_version is None:
                results = self.handle_requests([self.request("delete_async", p) for p in level])
            else:
                # Fenced deletes share multis (each still succeeds or fails on its own).
                groups = [[DeleteOp(p)] for p in level]
                results = [multi_error(r) for r in self.handle_multis(groups, fence_zk_version)]
            for path, result in zip(level, results, strict=True):
                if isinstance(result, ZookeeperError) and not isinstance(result, NoNodeError):
                    raise ZkOperationError(path, type(result).__name__)
