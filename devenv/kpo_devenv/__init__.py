"""Local, real infrastructure for the project's tests and demo.

Starts and stops real processes on loopback ports in temporary directories:
a ZooKeeper server (Debian's ``zookeeper`` package), and a Kubernetes control
plane made of etcd and kube-apiserver (built by ``make tools``), with its PKI
and a kubeconfig shared by ``kubectl`` and the Python ``kubernetes`` client.
Nothing here is a mock: every class wraps a real server process.
"""

from kpo_devenv.controlplane import ControlPlane
from kpo_devenv.process import ManagedProcess, ProcessStartError
from kpo_devenv.tools import ToolNotFoundError
from kpo_devenv.zookeeper import ZooKeeperServer

__all__ = [
    "ControlPlane",
    "ManagedProcess",
    "ProcessStartError",
    "ToolNotFoundError",
    "ZooKeeperServer",
]
