"""One module per Kafka API; `all_handlers()` is the list the dispatcher serves."""

from __future__ import annotations

import importlib

_MODULES = (
    "api_versions", "metadata", "produce", "fetch", "list_offsets",
    "create_topics", "delete_topics", "create_partitions", "describe_configs", "alter_configs",
    "incremental_alter_configs", "describe_cluster",
    "init_producer_id", "add_partitions_to_txn", "add_offsets_to_txn", "end_txn",
    "describe_transactions", "list_transactions", "describe_producers", "txn_offset_commit",
    "find_coordinator", "join_group", "sync_group", "heartbeat", "leave_group",
    "offset_commit", "offset_fetch", "list_groups", "describe_groups", "delete_groups",
    "describe_client_quotas", "alter_client_quotas", "offset_for_leader_epoch", "elect_leaders",
    "delete_records", "describe_log_dirs", "alter_replica_log_dirs", "offset_delete", "describe_quorum", "describe_topic_partitions",
    "list_config_resources",
    "alter_partition_reassignments", "list_partition_reassignments",
    "write_txn_markers",
    "sasl_handshake", "sasl_authenticate",
    "create_acls", "describe_acls", "delete_acls",
    "describe_user_scram_credentials", "alter_user_scram_credentials",
)


def all_handlers() -> list[type]:
    """Handler classes, each module's `HANDLER`."""
    return [importlib.import_module(f"{__name__}.{name}").HANDLER for name in _MODULES]
