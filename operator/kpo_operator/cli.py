"""``kpo-reassign``: PartitionReassignment manifests for users of ``kafka-reassign-partitions``.

* ``from-json`` turns Kafka's reassignment JSON (``--reassignment-json-file``), or the whole
  output of ``kafka-reassign-partitions --generate``, into PartitionReassignment YAML;
* ``to-json`` turns manifests back into Kafka's JSON, for ``kafka-reassign-partitions
  --execute``;
* ``generate`` proposes a new placement of whole topics over a broker list, as
  ``kafka-reassign-partitions --generate`` does, and prints it as a manifest.

Manifests and JSON go to stdout; the current assignment, notes and errors go to
stderr. On an error nothing is printed on stdout and the exit code is 1 (2 for a
usage error).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from kpo_kafka.admin import KafkaAdmin, KafkaPythonAdmin
from kpo_kafka.admin_types import KafkaAdminError, KafkaUnsupportedError, PartitionInfo
from kpo_kafka.assignment import ReplicaAssignmentError
from kpo_kafka.client_config import ClientConfigError, client_security_from_env
from kpo_kafka.generate import (
    GenerateError,
    assignment_targets,
    parse_topics_to_move,
    propose_move,
)
from kpo_kafka.manifests import (
    MAX_PARTITIONS_PER_OBJECT,
    ManifestError,
    ManifestOptions,
    ParsedManifest,
    dump_manifests,
    merge_targets,
    parse_manifests,
    to_manifests,
)
from kpo_kafka.reassignment_json import (
    KafkaJsonError,
    dump_reassignment_json,
    parse_reassignment_json,
)
from kpo_kafka.topic_partition import TopicPartition

app = typer.Typer(
    name="kpo-reassign",
    help="PartitionReassignment manifests from and to Kafka's reassignment JSON, and "
    "kafka-reassign-partitions --generate as a manifest.",
    no_args_is_help=True,
    add_completion=False,
)

CURRENT_HEADER = "Current partition replica assignment"


def connect(
    bootstrap_servers: str, request_timeout_ms: int, command_config: Path | None = None
) -> KafkaAdmin:
    """Return the Admin API client ``generate`` uses (tests replace this function).

    Args:
        bootstrap_servers: comma-separated ``host:port`` list.
        request_timeout_ms: timeout of each request, in ms.
        command_config: Kafka client properties (TLS, SASL) as Kafka's tools'
            ``--command-config``; the ``KPO_KAFKA_*`` variables apply too.

    Raises:
        ClientConfigError: an unknown or unsupported client setting.
    """
    return KafkaPythonAdmin(
        bootstrap_servers,
        client_id="kpo-reassign",
        request_timeout_ms=request_timeout_ms,
        security=client_security_from_env(None, command_config),
    )


class _UsageError(Exception):
    """A command-line value that cannot be used; reported like the other errors."""


@contextmanager
def _reported() -> Iterator[None]:
    """Print known errors on stderr, one problem a line, and exit with code 1."""
    try:
        yield
    except (KafkaJsonError, ManifestError) as exc:
        typer.echo("error: " + ("\n  ".join(["invalid input:", *exc.errors])), err=True)
        raise typer.Exit(1) from exc
    except (
        GenerateError,
        ReplicaAssignmentError,
        KafkaAdminError,
        ClientConfigError,
        _UsageError,
        yaml.YAMLError,
    ) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    except (OSError, UnicodeDecodeError) as exc:
        typer.echo(f"error: cannot read input: {exc}", err=True)
        raise typer.Exit(1) from exc


def _read(source: str) -> str:
    """Read a file, or stdin for ``-``."""
    if source == "-":
        return sys.stdin.read()
    with open(source, encoding="utf-8") as handle:
        return handle.read()


def _emit(manifests: list[dict[str, Any]]) -> None:
    if len(manifests) > 1:
        names = f"{manifests[0]['metadata']['name']} .. {manifests[-1]['metadata']['name']}"
        typer.echo(
            f"note: {sum(len(m['spec']['partitions']) for m in manifests)} partitions split "
            f"into {len(manifests)} PartitionReassignments of at most "
            f"{MAX_PARTITIONS_PER_OBJECT} ({names})",
            err=True,
        )
    typer.echo(dump_manifests(manifests), nl=False)


NameOption = Annotated[
    str, typer.Option("--name", help="metadata.name of the PartitionReassignment.")
]
NamespaceOption = Annotated[
    str | None, typer.Option("--namespace", help="metadata.namespace (omitted by default).")
]
ThrottleOption = Annotated[
    int | None,
    typer.Option(
        "--throttle",
        min=1,
        help="Replication throttle in bytes/s (spec.throttle.replicationRate), "
        "as kafka-reassign-partitions --throttle.",
    ),
]
ElectionOption = Annotated[
    bool,
    typer.Option(
        "--preferred-leader-election",
        help="Elect the preferred leaders when the move completes.",
    ),
]
SuspendOption = Annotated[
    bool, typer.Option("--suspend", help="Create it suspended: planned, but nothing moves.")
]


@app.command("from-json")
def from_json(
    file: Annotated[
        str,
        typer.Argument(
            metavar="FILE|-",
            help="Reassignment JSON (or --generate output) to convert; - reads stdin.",
        ),
    ],
    name: NameOption,
    namespace: NamespaceOption = None,
    throttle: ThrottleOption = None,
    preferred_leader_election: ElectionOption = False,
    suspend: SuspendOption = False,
) -> None:
    """Convert Kafka's reassignment JSON (version 1) into PartitionReassignment YAML."""
    options = ManifestOptions(name, namespace, throttle, preferred_leader_election, suspend)
    with _reported():
        targets = parse_reassignment_json(_read(file))
        manifests = to_manifests(targets, options)
    _emit(manifests)


def _load_objects(text: str) -> list[object]:
    """Decode a YAML stream; empty documents are dropped and a ``List``'s items unpacked."""
    objects: list[object] = []
    for document in yaml.safe_load_all(text):
        if isinstance(document, dict) and str(document.get("kind", "")).endswith("List"):
            items = document.get("items")
            objects.extend(items if isinstance(items, list) else [document])
        elif document is not None:
            objects.append(document)
    return objects


def _hints(manifests: Sequence[ParsedManifest]) -> None:
    """Tell, on stderr, which parts of the manifests Kafka's JSON cannot carry."""
    for manifest in manifests:
        label = manifest.name or "a PartitionReassignment"
        throttle = manifest.spec.throttle
        if throttle is not None and throttle.replication_rate is not None:
            typer.echo(
                f"note: {label} sets a replication throttle; pass "
                f"--throttle {throttle.replication_rate} to kafka-reassign-partitions --execute",
                err=True,
            )
        if throttle is not None and throttle.log_dir_move_rate is not None:
            typer.echo(
                f"note: {label} sets a log dir move throttle; pass "
                f"--replica-alter-log-dirs-throttle {throttle.log_dir_move_rate}",
                err=True,
            )
        if manifest.spec.cancel:
            typer.echo(
                f"note: {label} asks for cancellation; use kafka-reassign-partitions --cancel",
                err=True,
            )


@app.command("to-json")
def to_json(
    manifest: Annotated[
        str,
        typer.Argument(
            metavar="MANIFEST_FILE|-",
            help="PartitionReassignment YAML (one or more documents, or a List); - reads stdin.",
        ),
    ],
    pretty: Annotated[bool, typer.Option("--pretty", help="Indent the JSON.")] = False,
) -> None:
    """Convert PartitionReassignment YAML into Kafka's reassignment JSON (one document)."""
    with _reported():
        parsed = parse_manifests(_load_objects(_read(manifest)))
        text = dump_reassignment_json(merge_targets(parsed), indent=2 if pretty else None)
    _hints(parsed)
    typer.echo(text)


def _split(value: str, option: str) -> list[str]:
    items = [item.strip() for item in value.split(",")]
    if not all(items):
        raise _UsageError(f"{option}: empty entry in {value!r}")
    return items


def _broker_ids(value: str) -> list[int]:
    ids: list[int] = []
    for item in _split(value, "--broker-list"):
        if not (item.isascii() and item.isdigit()):
            raise _UsageError(f"--broker-list: {item!r} is not a broker id")
        ids.append(int(item))
    return ids


def _topics(topics: str | None, topics_file: str | None) -> list[str]:
    if (topics is None) == (topics_file is None):
        raise _UsageError("give exactly one of --topics and --topics-to-move-json-file")
    if topics is not None:
        return _split(topics, "--topics")
    return parse_topics_to_move(_read(str(topics_file)))


def _in_flight_notes(
    admin: KafkaAdmin, described: Mapping[str, Mapping[int, PartitionInfo]]
) -> list[str]:
    wanted = [TopicPartition(t, p) for t, parts in described.items() for p in parts]
    try:
        listed = admin.list_partition_reassignments(wanted)
    except KafkaUnsupportedError:  # Kafka < 2.4: nothing to list
        return []
    return [
        f"note: a reassignment of {t}-{p} is in flight (adding {list(r.adding)}, removing "
        f"{list(r.removing)}); its current replicas include both"
        for (t, p), r in sorted(listed.items())
    ]


@app.command("generate")
def generate(
    bootstrap_server: Annotated[
        str, typer.Option("--bootstrap-server", help="host:port[,host:port...] of the cluster.")
    ],
    broker_list: Annotated[
        str, typer.Option("--broker-list", help="Brokers to place on, e.g. 1,2,3.")
    ],
    name: NameOption,
    topics: Annotated[
        str | None, typer.Option("--topics", help="Topics to move, e.g. orders,payments.")
    ] = None,
    topics_to_move_json_file: Annotated[
        str | None,
        typer.Option(
            "--topics-to-move-json-file",
            help='Kafka\'s {"version":1,"topics":[{"topic":"a"}]} file instead of --topics.',
        ),
    ] = None,
    namespace: NamespaceOption = None,
    throttle: ThrottleOption = None,
    preferred_leader_election: ElectionOption = False,
    suspend: SuspendOption = False,
    all_partitions: Annotated[
        bool,
        typer.Option(
            "--all-partitions",
            help="List every partition, as Kafka does, not only those whose replicas change.",
        ),
    ] = False,
    disable_rack_aware: Annotated[
        bool, typer.Option("--disable-rack-aware", help="Ignore the brokers' racks.")
    ] = False,
    start_index: Annotated[
        int | None,
        typer.Option(
            "--start-index", min=0, help="Kafka's fixed start index (default: drawn from --seed)."
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the per-topic start index and shift.")
    ] = 0,
    request_timeout_ms: Annotated[
        int, typer.Option("--request-timeout-ms", min=1, help="Admin request timeout, ms.")
    ] = 30000,
    command_config: Annotated[
        Path | None,
        typer.Option(
            "--command-config",
            help="Kafka client properties (TLS, SASL), as kafka-reassign-partitions takes them.",
        ),
    ] = None,
) -> None:
    """Propose a placement of whole topics over a broker list, as --generate does.

    The current assignment is printed on stderr as Kafka JSON (keep it to roll
    back with from-json); the proposal is printed on stdout as a manifest.
    """
    options = ManifestOptions(name, namespace, throttle, preferred_leader_election, suspend)
    with _reported():
        wanted = _topics(topics, topics_to_move_json_file)
        brokers = _broker_ids(broker_list)
        if problems := options.problems():
            raise ManifestError(problems)
        admin = connect(bootstrap_server, request_timeout_ms, command_config)
        try:
            cluster = admin.describe_cluster()
            described = admin.describe_topics(wanted)
            notes = _in_flight_notes(admin, described)
        finally:
            admin.close()
        current = {
            t: {p: info.replicas for p, info in parts.items()} for t, parts in described.items()
        }
        move = propose_move(
            current,
            wanted,
            brokers,
            cluster.brokers,
            rack_aware=not disable_rack_aware,
            start_index=start_index,
            seed=seed,
        )
        chosen = move.targets(all_partitions)
        manifests = to_manifests(chosen, options) if chosen else []
    for note in [*notes, *(f"note: {n}" for n in move.notes)]:
        typer.echo(note, err=True)
    typer.echo(CURRENT_HEADER, err=True)
    typer.echo(dump_reassignment_json(assignment_targets(move.current)), err=True)
    placement = "rack-aware" if move.rack_aware else "without racks"
    typer.echo(
        f"Proposed: {len(move.changed())} of {len(move.proposed)} partitions change "
        f"({placement}, brokers {sorted(brokers)})",
        err=True,
    )
    if not manifests:
        typer.echo("nothing to move: every partition already has its proposed replicas", err=True)
        return
    _emit(manifests)
