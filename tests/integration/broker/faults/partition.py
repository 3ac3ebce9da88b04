"""A network partition of one broker on a shared loopback (nftables and cgroup v2).

Every process of the fault suite runs on 127.0.0.1 with its own ports, so the partition
drops TCP by port and by owning process, in a dedicated nftables table named per use
(``inet kpo_netfault_<pid>_<hex>``) whose only chain hooks ``output``; deleting the table
heals everything at once, and nothing else on the host (other xdist workers' brokers, the
test's own clients) is matched:

- the isolated broker is moved into its own cgroup v2 group and its peers into another;
  ``socket cgroupv2`` then drops new connections the isolated broker opens to ZooKeeper
  or to a peer's listener, and new connections a peer opens to the isolated broker's
  listener (clients in other cgroups still reach it, as on a real partition between
  brokers and ZooKeeper);
- connections already open between them (a socket keeps the cgroup it was created in)
  are dropped by their exact port pair, in both directions, read from ``/proc/net/tcp*``
  and the processes' descriptors.

The isolated broker's ZooKeeper session then expires (the server hears nothing from it)
and the controller elects other leaders from the ISR. Requires root, nftables (``nft``)
and a cgroup v2 hierarchy (pure or hybrid), as on the CI hosts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: Where the cgroup v2 paths in nftables rules are resolved from (nft's own root).
NFT_CGROUP_ROOT = Path("/sys/fs/cgroup")
#: TCP states of ``/proc/net/tcp`` (hex) worth dropping: everything but LISTEN (0A).
_LISTEN = "0A"


@dataclass(frozen=True)
class Connection:
    """One TCP socket of a process: its local and remote ports."""

    local_port: int
    remote_port: int


def parse_proc_net_tcp(text: str) -> dict[int, Connection]:
    """Socket inode -> its ports, from the text of ``/proc/net/tcp`` or ``tcp6``.

    Listening sockets are left out. Lines look like
    ``0: 0100007F:1F90 0100007F:C350 01 ... <uid> <timeout> <inode> ...`` (hex ports).
    """
    sockets: dict[int, Connection] = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] == _LISTEN:
            continue
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        remote_port = int(fields[2].rsplit(":", 1)[1], 16)
        sockets[int(fields[9])] = Connection(local_port, remote_port)
    return sockets


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets process ``pid`` holds (``/proc/<pid>/fd`` links ``socket:[n]``)."""
    inodes: set[int] = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(fd_dir / name)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    return inodes


def tcp_connections(pid: int) -> list[Connection]:
    """The TCP connections (not listeners) of process ``pid``."""
    table: dict[int, Connection] = {}
    for name in ("tcp", "tcp6"):
        try:
            table.update(parse_proc_net_tcp(Path(f"/proc/{pid}/net/{name}").read_text()))
        except OSError:
            continue
    return [table[i] for i in sorted(socket_inodes(pid)) if i in table]


def partition_ruleset(
    table: str,
    isolated_cgroup: str,
    peers_cgroup: str,
    isolated_port: int,
    blocked_ports: Iterable[int],
    open_connections: Iterable[Connection],
) -> str:
    """The ``nft -f`` text of the partition's table (pure).

    Args:
        table: the table's name (family ``inet``).
        isolated_cgroup: the isolated broker's cgroup, relative to :data:`NFT_CGROUP_ROOT`.
        peers_cgroup: its peers' cgroup, relative to :data:`NFT_CGROUP_ROOT`.
        isolated_port: the isolated broker's listener port.
        blocked_ports: the ports it must not reach (ZooKeeper's, the peers' listeners).
        open_connections: connections already open across the partition (dropped both ways).
    """
    blocked = ", ".join(str(p) for p in sorted(set(blocked_ports)))

    def level(path: str) -> int:
        # The depth in the cgroup v2 hierarchy: the mount's own path is not counted.
        return len(Path(path).relative_to(_cgroup2_prefix(path)).parts)

    rules = [
        f'socket cgroupv2 level {level(isolated_cgroup)} "{isolated_cgroup}" '
        f"tcp dport {{ {blocked} }} drop",
        f'socket cgroupv2 level {level(peers_cgroup)} "{peers_cgroup}" '
        f"tcp dport {isolated_port} drop",
    ]
    for conn in sorted(set(open_connections), key=lambda c: (c.local_port, c.remote_port)):
        rules.append(f"tcp sport {conn.local_port} tcp dport {conn.remote_port} drop")
        rules.append(f"tcp sport {conn.remote_port} tcp dport {conn.local_port} drop")
    body = "\n".join(f"    {rule}" for rule in rules)
    return (
        f"table inet {table} {{\n"
        "  chain output {\n"
        "    type filter hook output priority -10; policy accept;\n"
        f"{body}\n"
        "  }\n"
        "}\n"
    )


def _cgroup2_prefix(path: str) -> str:
    """The part of an nft cgroup path that is the cgroup v2 mount (``""`` or ``unified``)."""
    return "unified" if path.startswith("unified/") else ""


def cgroup2_mount() -> Path:
    """The cgroup v2 mount point (``/sys/fs/cgroup`` or, hybrid, ``/sys/fs/cgroup/unified``).

    Raises:
        RuntimeError: no cgroup2 file system is mounted under :data:`NFT_CGROUP_ROOT`.
    """
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            mount = Path(fields[1])
            if mount == NFT_CGROUP_ROOT or mount.parent == NFT_CGROUP_ROOT:
                return mount
    raise RuntimeError(f"no cgroup2 hierarchy mounted at or under {NFT_CGROUP_ROOT}")


def require_tools() -> str | None:
    """Why a partition cannot be made here (not root, no ``nft``, no cgroup v2), or None."""
    if os.geteuid() != 0:
        return "network partitions need root (nftables rules, cgroups)"
    if shutil.which("nft") is None:
        return "network partitions need nftables' nft (Debian package nftables)"
    try:
        cgroup2_mount()
    except RuntimeError as exc:
        return str(exc)
    return None


class NetworkPartition:
    """Cut one broker off from its peers and ZooKeeper until :meth:`heal` (a context manager).

    Args:
        isolated_pid: the isolated broker's process id.
        isolated_port: its listener port (peers and the controller reach it there).
        peer_pids: the other brokers' process ids.
        peer_ports: the other brokers' listener ports.
        zookeeper_port: ZooKeeper's client port.

    Raises:
        subprocess.CalledProcessError: ``nft`` refused the ruleset (the cgroups are undone).
        OSError: a cgroup could not be made or joined.
    """

    def __init__(
        self,
        isolated_pid: int,
        isolated_port: int,
        peer_pids: Iterable[int],
        peer_ports: Iterable[int],
        zookeeper_port: int,
    ) -> None:
        self.isolated_pid = isolated_pid
        self.isolated_port = isolated_port
        self.peer_pids = list(peer_pids)
        self.peer_ports = list(peer_ports)
        self.zookeeper_port = zookeeper_port
        name = f"kpo_netfault_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self.table = name
        self._mount = cgroup2_mount()
        self._group = self._mount / name
        self._active = False
        #: pid -> the cgroup v2 group it was in (``/proc/<pid>/cgroup``'s ``0::`` line).
        self._origins: dict[int, Path] = {}

    def _nft_path(self, group: Path) -> str:
        return str(group.relative_to(NFT_CGROUP_ROOT))

    def isolate(self) -> NetworkPartition:
        """Move the processes into their cgroups and load the table."""
        isolated, peers = self._group / "isolated", self._group / "peers"
        isolated.mkdir(parents=True)
        peers.mkdir()
        self._active = True
        try:
            for pid, group in [(self.isolated_pid, isolated)] + [
                (p, peers) for p in self.peer_pids
            ]:
                self._origins[pid] = self._cgroup_of(pid)
                (group / "cgroup.procs").write_text(str(pid))
            crossing = [
                c
                for c in tcp_connections(self.isolated_pid)
                if c.remote_port in {self.zookeeper_port, *self.peer_ports}
            ]
            for pid in self.peer_pids:
                crossing += [c for c in tcp_connections(pid) if c.remote_port == self.isolated_port]
            ruleset = partition_ruleset(
                self.table,
                self._nft_path(isolated),
                self._nft_path(peers),
                self.isolated_port,
                [self.zookeeper_port, *self.peer_ports],
                crossing,
            )
            subprocess.run(
                ["nft", "-f", "-"], input=ruleset, text=True, check=True, capture_output=True
            )
        except BaseException:
            self.heal()
            raise
        return self

    def _cgroup_of(self, pid: int) -> Path:
        """The cgroup v2 group of process ``pid`` (the root when it cannot be read)."""
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
                if line.startswith("0::"):
                    return self._mount / line[3:].lstrip("/")
        return self._mount

    def heal(self) -> None:
        """Delete the table, put the processes back in their cgroups, remove the groups.

        Idempotent; processes that exited meanwhile are skipped.
        """
        if not self._active:
            return
        self._active = False
        subprocess.run(["nft", "delete", "table", "inet", self.table], capture_output=True)
        for group in (self._group / "isolated", self._group / "peers"):
            try:
                pids = (group / "cgroup.procs").read_text().split()
            except OSError:
                pids = []
            for pid in pids:
                origin = self._origins.get(int(pid), self._mount)
                with contextlib.suppress(OSError):  # exited meanwhile
                    (origin / "cgroup.procs").write_text(pid)
            with contextlib.suppress(OSError):
                group.rmdir()
        with contextlib.suppress(OSError):
            self._group.rmdir()

    def __enter__(self) -> NetworkPartition:
        return self.isolate()

    def __exit__(self, *exc: object) -> None:
        self.heal()
