"""A real, standalone ZooKeeper server (Debian's ``zookeeper`` 3.8) on a loopback port.

With ``sasl_users`` the server authenticates clients with SASL DIGEST-MD5, configured as
ZooKeeper documents it: a JAAS file (``java.security.auth.login.config``) whose
``Server`` section lists ``DigestLoginModule`` users as ``user_<name>="<password>"``,
``authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider`` in
``zoo.cfg`` and, unless ``enforce_sasl`` is False, ``enforce.auth.enabled=true`` with
``enforce.auth.schemes=sasl`` (ZooKeeper 3.7+): a client that has not authenticated
with SASL gets no answer but a closed session.

With ``tls`` (:class:`ZooKeeperTls`) the server's only client port is a TLS port
(``secureClientPort``, on ZooKeeper's Netty connection factory
``serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory``, whose Netty jars
Debian's ``zookeeper`` package brings), with PEM stores (``ssl.keyStore.type=PEM``,
``ssl.trustStore.type=PEM``), ``ssl.clientAuth`` and ZooKeeper's ``x509`` authentication
provider (a client's certificate subject is its ``x509`` identity, which znodes created
with the ``auth`` scheme's ACLs name). A plaintext client gets no answer there; the
readiness check sends ``ruok`` over TLS.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from kpo_broker.zk.security import DIGEST_LOGIN_MODULE, jaas_section
from kpo_devenv.net import LOOPBACK, free_port, port_accepts
from kpo_devenv.process import ManagedProcess, ProcessStartError
from kpo_devenv.runner import Runner
from kpo_devenv.tools import ZOOKEEPER_JARS, java_path, zookeeper_classpath

#: ZooKeeper's standalone entry point (the one zkServer.sh starts).
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
#: ZooKeeper's SASL authentication provider (``authProvider.<n>``).
SASL_AUTH_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
#: ZooKeeper's TLS client-certificate authentication provider (scheme ``x509``).
X509_AUTH_PROVIDER = "org.apache.zookeeper.server.auth.X509AuthenticationProvider"
#: ZooKeeper's Netty connection factory, the one serving TLS.
NETTY_SERVER_CNXN_FACTORY = "org.apache.zookeeper.server.NettyServerCnxnFactory"


@dataclass(frozen=True)
class ZooKeeperTls:
    """The TLS of a ZooKeeper server's client port (ZooKeeper's ``ssl.*`` settings).

    Attributes:
        keystore: PEM file with the server's private key and certificate chain.
        truststore: PEM file of the CA certificates client certificates must chain to.
        client_auth: ZooKeeper's ``ssl.clientAuth``: ``need`` (its default), ``want``
            or ``none``.
        probe_keystore: the PEM keystore the readiness check presents (default
            :attr:`keystore`, which must then allow client use).
    """

    keystore: Path
    truststore: Path
    client_auth: str = "need"
    probe_keystore: Path | None = None

    def settings(self) -> dict[str, str]:
        """Return the ``zoo.cfg`` lines of this TLS set-up (without the port)."""
        return {
            "serverCnxnFactory": NETTY_SERVER_CNXN_FACTORY,
            "ssl.keyStore.location": str(self.keystore),
            "ssl.keyStore.type": "PEM",
            "ssl.trustStore.location": str(self.truststore),
            "ssl.trustStore.type": "PEM",
            "ssl.clientAuth": self.client_auth,
            "authProvider.x509": X509_AUTH_PROVIDER,
        }

    def probe_context(self) -> ssl.SSLContext:
        """Return a client context for the readiness check.

        It trusts :attr:`truststore` and presents :attr:`probe_keystore`, without a host
        name check (the server listens on loopback).
        """
        context = ssl.create_default_context(cafile=str(self.truststore))
        context.check_hostname = False
        context.load_cert_chain(str(self.probe_keystore or self.keystore))
        return context


def four_letter_word(
    port: int,
    word: str,
    host: str = LOOPBACK,
    timeout_s: float = 2.0,
    context: ssl.SSLContext | None = None,
) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``srvr``...) and return the reply text.

    Args:
        port: the client port.
        word: the command.
        host: the server's address.
        timeout_s: connect and read timeout, s.
        context: a TLS client context for a secure client port; None: plaintext.

    Raises:
        OSError: the server cannot be reached (``ssl.SSLError`` for a failed handshake).
    """
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        sock = context.wrap_socket(raw, server_hostname=host) if context is not None else raw
        sock.sendall(word.encode("ascii"))
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


class ZooKeeperServer:
    """A standalone ZooKeeper server with its data in ``workdir``.

    Args:
        workdir: folder for ``zoo.cfg``, the data directory and ``zookeeper.log``.
        port: client port on 127.0.0.1; a free one is picked when None.
        tick_time_ms: ZooKeeper's ``tickTime`` (ms); session timeouts are
            bounded to 2..20 ticks.
        extra_config: further ``zoo.cfg`` settings, overriding the defaults.
        runner: how the server runs: a local process with the machine's Java and Debian's
            jars (default), or e.g. a container of the ``zookeeper`` image
            (:class:`kpo_devenv.runner.ContainerRunner`; the same jars at the same paths).
        sasl_users: user name -> password of the SASL DIGEST-MD5 users the server
            accepts (its JAAS ``Server`` section); None: no SASL.
        enforce_sasl: with ``sasl_users``, refuse every client that has not
            authenticated with SASL (``enforce.auth.enabled``).
        tls: serve ``port`` with TLS only (``secureClientPort``; no plaintext port);
            None: a plaintext ``clientPort``.
    """

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        tick_time_ms: int = 500,
        extra_config: Mapping[str, str] | None = None,
        runner: Runner | None = None,
        sasl_users: Mapping[str, str] | None = None,
        enforce_sasl: bool = True,
        tls: ZooKeeperTls | None = None,
    ) -> None:
        self.workdir = workdir
        self.tls = tls
        self.sasl_users = dict(sasl_users) if sasl_users is not None else None
        self.enforce_sasl = enforce_sasl
        self.jaas_path = workdir / "zookeeper_jaas.conf"
        self.port = port if port is not None else free_port()
        self.tick_time_ms = tick_time_ms
        self.extra_config = dict(extra_config or {})
        self.config_path = workdir / "zoo.cfg"
        self.data_dir = workdir / "data"
        options = [
            "-Xmx256m",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dzookeeper.jmx.log4j.disable=true",
        ]
        if self.sasl_users is not None:
            options.append(f"-Djava.security.auth.login.config={self.jaas_path}")
        log = workdir / "zookeeper.log"
        config = str(self.config_path)
        self.process: ManagedProcess
        if runner is None:
            self.process = ManagedProcess(
                "zookeeper",
                [str(java_path()), *options, "-cp", zookeeper_classpath(), MAIN_CLASS, config],
                log,
            )
        else:
            classpath = ":".join(str(jar) for jar in ZOOKEEPER_JARS)
            self.process = runner.process(
                "zookeeper",
                "zookeeper",
                ["java", *options, "-cp", classpath, MAIN_CLASS, config],
                log,
                mounts=[workdir],
            )

    @property
    def connect_string(self) -> str:
        """The ``zookeeper.connect`` string, e.g. ``"127.0.0.1:2181"``."""
        return f"{LOOPBACK}:{self.port}"

    def write_config(self) -> None:
        """Write ``zoo.cfg`` (and the JAAS file with SASL) for a standalone server on 127.0.0.1.

        The client port is ``clientPort``, or ``secureClientPort`` with :attr:`tls`.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        settings = {
            "tickTime": str(self.tick_time_ms),
            "dataDir": str(self.data_dir),
            "maxClientCnxns": "0",
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat,mntr",
        }
        if self.tls is None:
            settings.update(clientPort=str(self.port), clientPortAddress=LOOPBACK)
        else:
            settings.update(secureClientPort=str(self.port), secureClientPortAddress=LOOPBACK)
            settings.update(self.tls.settings())
        if self.sasl_users is not None:
            self.jaas_path.write_text(
                jaas_section(
                    "Server",
                    DIGEST_LOGIN_MODULE,
                    {f"user_{name}": password for name, password in self.sasl_users.items()},
                )
            )
            self.jaas_path.chmod(0o600)
            settings["authProvider.sasl"] = SASL_AUTH_PROVIDER
            if self.enforce_sasl:
                settings["enforce.auth.enabled"] = "true"
                settings["enforce.auth.schemes"] = "sasl"
        settings.update(self.extra_config)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))

    def is_serving(self) -> bool:
        """Return whether the server answers ``ruok`` with ``imok`` (over TLS with :attr:`tls`)."""
        context = self.tls.probe_context() if self.tls is not None else None
        try:
            return four_letter_word(self.port, "ruok", context=context) == "imok"
        except OSError:
            return False

    def start(self, timeout_s: float = 60.0) -> ZooKeeperServer:
        """Write the config, start the server and wait until it serves.

        Raises:
            ProcessStartError: the port is already taken, or the server exited or
                did not serve within ``timeout_s`` s (the message carries the log tail).
        """
        if port_accepts(self.port):
            raise ProcessStartError(f"zookeeper: port {self.port} on {LOOPBACK} is already in use")
        self.write_config()
        self.process.start()
        self.process.wait_ready(self.is_serving, timeout_s)
        return self

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        self.process.stop()

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
