"""The API versions this broker implements and advertises in ApiVersions (KIP-35/KIP-511).

One table, used both to answer ApiVersions and to reject requests of other versions.
Ranges are what the handlers implement: v2 record batches only (Produce >= 3,
Fetch >= 4), topic names rather than topic ids (Fetch <= 12, Metadata <= 12,
Produce <= 9).
"""

from __future__ import annotations

#: api key -> (min version, max version)
CLIENT_APIS: dict[int, tuple[int, int]] = {
    0: (3, 9),  # Produce
    1: (4, 12),  # Fetch
    2: (1, 7),  # ListOffsets
    3: (0, 12),  # Metadata
    18: (0, 3),  # ApiVersions
    19: (0, 7),  # CreateTopics
    20: (0, 6),  # DeleteTopics (v6: by topic id, KIP-516)
    23: (0, 4),  # OffsetForLeaderEpoch
    32: (0, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    34: (0, 2),  # AlterReplicaLogDirs
    35: (0, 4),  # DescribeLogDirs
    37: (0, 3),  # CreatePartitions
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 0),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    22: (0, 4),  # InitProducerId
    60: (0, 1),  # DescribeCluster
    17: (0, 1),  # SaslHandshake
    36: (0, 2),  # SaslAuthenticate
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    8: (2, 9),  # OffsetCommit
    9: (1, 9),  # OffsetFetch
    10: (0, 4),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups
    42: (0, 2),  # DeleteGroups
    47: (0, 0),  # OffsetDelete
    21: (0, 2),  # DeleteRecords
    29: (1, 3),  # DescribeAcls
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
}

API_KEY_PRODUCE = 0
API_KEY_FETCH = 1
API_KEY_LIST_OFFSETS = 2
API_KEY_METADATA = 3
API_KEY_LEADER_AND_ISR = 4
API_KEY_STOP_REPLICA = 5
API_KEY_UPDATE_METADATA = 6
API_KEY_CONTROLLED_SHUTDOWN = 7
API_KEY_API_VERSIONS = 18
API_KEY_CREATE_TOPICS = 19
API_KEY_DELETE_TOPICS = 20
API_KEY_INIT_PRODUCER_ID = 22
API_KEY_OFFSET_FOR_LEADER_EPOCH = 23
API_KEY_DESCRIBE_CONFIGS = 32
API_KEY_ALTER_CONFIGS = 33
API_KEY_ALTER_REPLICA_LOG_DIRS = 34
API_KEY_DESCRIBE_LOG_DIRS = 35
API_KEY_CREATE_PARTITIONS = 37
API_KEY_ELECT_LEADERS = 43
API_KEY_INCREMENTAL_ALTER_CONFIGS = 44
API_KEY_ALTER_PARTITION_REASSIGNMENTS = 45
API_KEY_LIST_PARTITION_REASSIGNMENTS = 46
API_KEY_DESCRIBE_CLUSTER = 60
API_KEY_SASL_HANDSHAKE = 17
API_KEY_SASL_AUTHENTICATE = 36
API_KEY_DESCRIBE_USER_SCRAM_CREDENTIALS = 50
API_KEY_ALTER_USER_SCRAM_CREDENTIALS = 51
API_KEY_OFFSET_COMMIT = 8
API_KEY_OFFSET_FETCH = 9
API_KEY_FIND_COORDINATOR = 10
API_KEY_JOIN_GROUP = 11
API_KEY_HEARTBEAT = 12
API_KEY_LEAVE_GROUP = 13
API_KEY_SYNC_GROUP = 14
API_KEY_DESCRIBE_GROUPS = 15
API_KEY_LIST_GROUPS = 16
API_KEY_DELETE_GROUPS = 42
API_KEY_OFFSET_DELETE = 47
API_KEY_DELETE_RECORDS = 21
API_KEY_DESCRIBE_ACLS = 29
API_KEY_CREATE_ACLS = 30
API_KEY_DELETE_ACLS = 31
API_KEY_ALTER_PARTITION = 56

#: The controller's requests to brokers, and ControlledShutdown and AlterPartition
#: (KIP-497) from brokers to the controller (inter-broker only).
INTER_BROKER_APIS: dict[int, tuple[int, int]] = {
    API_KEY_LEADER_AND_ISR: (0, 4),
    API_KEY_STOP_REPLICA: (0, 3),
    API_KEY_UPDATE_METADATA: (0, 7),
    API_KEY_CONTROLLED_SHUTDOWN: (1, 3),
    API_KEY_ALTER_PARTITION: (0, 3),
}
