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
#: dependencies, and slf4j-simple sends the server's log to stderr.
ZOOKEEPER_JARS = (
    Path("/usr/share/java/zookeeper.jar"),
    Path("/usr/share/java/slf4j-simple.jar"),
)


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
