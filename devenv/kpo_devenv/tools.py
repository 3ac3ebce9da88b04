"""Where the external tools live: the ``make tools`` cache and Debian's ZooKeeper.

``make tools`` (``tools/install.sh``) builds etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kubectl, helm and kwok into
``$KPO_TOOLS_DIR/bin`` (default ``~/.cache/kpo-tools/bin``) and installs
ZooKeeper from Debian's ``zookeeper`` package (jars under ``/usr/share/java``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: Jars of Debian's zookeeper package; the main jar's manifest names its
#: dependencies, and slf4j-simple sends the server's log to stderr. The manifest
#: omits Netty's codec jar (from libnetty-java, a dependency of the package), without
#: which the Netty connection factory of a TLS client port fails on each connection.
ZOOKEEPER_JARS = (
    Path("/usr/share/java/zookeeper.jar"),
    Path("/usr/share/java/slf4j-simple.jar"),
    Path("/usr/share/java/netty-codec.jar"),
)


#: Pinned tool versions (``KEY=value`` lines), read by ``tools/install.sh`` too.
VERSIONS_ENV = Path(__file__).resolve().parents[2] / "tools" / "versions.env"


class ToolNotFoundError(FileNotFoundError):
    """A tool the tests need is not installed; the message says how to get it."""


def tools_dir() -> Path:
    """Return the tool cache folder: ``$KPO_TOOLS_DIR`` or ``~/.cache/kpo-tools``."""
    configured = os.environ.get("KPO_TOOLS_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "kpo-tools"


def tool_path(name: str) -> Path:
    """Return the path of an executable built by ``make tools``.

    Args:
        name: the executable's name, e.g. ``"kube-apiserver"`` or ``"etcd"``.

    Raises:
        ToolNotFoundError: the executable is not in the cache folder.
    """
    path = tools_dir() / "bin" / name
    if not os.access(path, os.X_OK):
        raise ToolNotFoundError(f"{name} not found at {path}: run `make tools` first")
    return path


def java_path() -> Path:
    """Return the ``java`` executable that runs ZooKeeper.

    Raises:
        ToolNotFoundError: no Java runtime on ``PATH``.
    """
    found = shutil.which("java")
    if found is None:
        raise ToolNotFoundError("java not found on PATH: ZooKeeper needs a Java runtime")
    return Path(found)


def zookeeper_classpath() -> str:
    """Return the Java class path of Debian's ZooKeeper server.

    Raises:
        ToolNotFoundError: the ``zookeeper`` package is not installed.
    """
    missing = [str(jar) for jar in ZOOKEEPER_JARS if not jar.exists()]
    if missing:
        raise ToolNotFoundError(f"ZooKeeper jars missing ({', '.join(missing)}): run `make tools`")
    return os.pathsep.join(str(jar) for jar in ZOOKEEPER_JARS)


def read_env_value(text: str, key: str) -> str | None:
    """Return ``key``'s value in a ``KEY=value`` file's ``text`` (last one wins), or None.

    Blank lines and ``#`` comments are skipped; surrounding quotes are removed.
    """
    found = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        if name.strip() == key:
            found = value.strip().strip("'\"")
    return found


def pinned_version(key: str, path: Path = VERSIONS_ENV) -> str:
    """Return the version ``key`` (e.g. ``"KAFKA_VERSION"``) pinned in ``tools/versions.env``.

    Raises:
        ToolNotFoundError: the file cannot be read or does not pin ``key``.
    """
    try:
        value = read_env_value(path.read_text(), key)
    except OSError as exc:
        raise ToolNotFoundError(f"cannot read {path}: {exc}") from exc
    if not value:
        raise ToolNotFoundError(f"no {key} in {path}")
    return value
