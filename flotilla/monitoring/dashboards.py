"""The shipped Grafana dashboards: cluster, fetch sessions, quotas, transactions, record deletions,
rebalancing.
Every query names only metrics the brokers or the operator export (a test reads their /metrics)."""

from __future__ import annotations

from typing import Any

from .grafana import OP_SEL, RATE, SEL, Panel, Row, Target, dashboard, p99, rate

T = Target
TXN_APIS = "init_producer_id|add_partitions_to_txn|add_offsets_to_txn|end_txn|write_txn_markers|txn_offset_commit"
RED = [(None, "green"), (1, "red")]
INCREMENTAL_SHARE = (rate("flotilla_fetch_requests_total", "kind", extra='kind="incremental"')
                     + f" / ignoring(kind) sum(rate(flotilla_fetch_requests_total{{{SEL}}}[{RATE}]))")


#: Kafka's RequestMetrics stages (broker/apis/request_stages.py): (histogram, legend)
STAGES = (("flotilla_request_queue_time_seconds", "queue"), ("flotilla_request_local_time_seconds", "local"),
          ("flotilla_request_remote_time_seconds", "remote"), ("flotilla_response_queue_time_seconds", "response queue"),
          ("flotilla_response_send_time_seconds", "send"))


def stage_mean(metric: str, api: str) -> str:
    """Mean seconds per request of one stage for one API, over the selected brokers."""
    sel = f'{SEL}, api="{api}"'
    return (f"sum(rate({metric}_sum{{{sel}}}[{RATE}])) / sum(rate({metric}_count{{{sel}}}[{RATE}]))")


def cluster() -> dict[str, Any]:
    overview = Row("Overview", [
        Panel("Brokers Ready / desired", [T(f"sum(flotilla_operator_ready_brokers{{{OP_SEL}}})", "ready"),
                                          T(f"sum(flotilla_operator_desired_brokers{{{OP_SEL}}})", "desired")],
              kind="stat", width=4, height=4, description="From the operator (KafkaCluster status)."),
        Panel("Active controllers", [T(f"sum by (kafka_cluster) (flotilla_controller_active{{{SEL}}})", "{{kafka_cluster}}")],
              kind="stat", width=4, height=4, thresholds=[(None, "red"), (1, "green"), (2, "red")],
              description="Brokers acting as controller: exactly one per cluster."),
        Panel("Under-replicated partitions", [T(f"sum(flotilla_under_replicated_partitions{{{SEL}}})")],
              kind="stat", width=4, height=4, thresholds=[(None, "green"), (1, "orange")]),
        Panel("Under min.insync.replicas", [T(f"sum(flotilla_under_min_isr_partitions{{{SEL}}})")],
              kind="stat", width=4, height=4, thresholds=RED),
        Panel("Offline partitions", [T(f"sum(flotilla_offline_partitions{{{SEL}}})")],
              kind="stat", width=4, height=4, thresholds=RED),
        Panel("Offline log dirs", [T(f"sum(flotilla_log_dir_offline{{{SEL}}})")],
              kind="stat", width=4, height=4, thresholds=RED),
    ])
    throughput = Row("Throughput", [
        Panel("Bytes in per topic", [T(rate("flotilla_topic_bytes_in_total", "topic"), "{{topic}}")], unit="Bps", width=8),
        Panel("Bytes out per topic", [T(rate("flotilla_topic_bytes_out_total", "topic"), "{{topic}}")], unit="Bps", width=8),
        Panel("Records in per topic", [T(rate("flotilla_topic_messages_in_total", "topic"), "{{topic}}")], unit="ops", width=8),
        Panel("Bytes in / out per broker", [T(rate("flotilla_topic_bytes_in_total", "pod"), "in {{pod}}"),
                                            T(rate("flotilla_topic_bytes_out_total", "pod"), "out {{pod}}")],
              unit="Bps", width=12),
        Panel("Client connections per broker", [T(f"sum by (pod) (flotilla_connections{{{SEL}}})", "{{pod}}")], width=12),
    ])
    requests = Row("Requests", [
        Panel("Requests per API", [T(rate("flotilla_requests_total", "api"), "{{api}}")], unit="reqps", stack=True),
        Panel("p99 latency per API", [T(p99("api"), "{{api}}")], unit="s",
              description="From request parsed to response ready (flotilla_request_latency_seconds)."),
        Panel("Produce time by stage (mean)", [T(stage_mean(metric, "produce"), label) for metric, label in STAGES],
              unit="s", stack=True,
              description="Where an average Produce's time goes, as Kafka's RequestMetrics split it: remote is the "
                          "wait for the followers (acks=all), response queue the event loop busy with others "
                          "(docs/architecture.md, 'Where a produce's time goes')."),
        Panel("Event loop lag p99 per broker",
              [T(f"histogram_quantile(0.99, sum by (pod, le) (rate(flotilla_event_loop_lag_seconds_bucket{{{SEL}}}"
                 f"[{RATE}])))", "{{pod}}")], unit="s",
              description="How late the broker's event loop runs what is ready: every request waits this long."),
        Panel("Handler errors per API", [T(rate("flotilla_request_errors_total", "api"), "{{api}}")], unit="reqps"),
        Panel("Request memory held / malformed frames",
              [T(f"sum by (pod) (flotilla_request_memory_used_bytes{{{SEL}}})", "memory {{pod}}"),
               T(rate("flotilla_malformed_frames_total", "pod"), "malformed/s {{pod}}")], unit="short"),
    ])
    replication = Row("Replication", [
        Panel("Under-replicated / under-min-ISR partitions per broker",
              [T(f"sum by (pod) (flotilla_under_replicated_partitions{{{SEL}}})", "under-replicated {{pod}}"),
               T(f"sum by (pod) (flotilla_under_min_isr_partitions{{{SEL}}})", "under min ISR {{pod}}")], width=8),
        Panel("ISR shrinks / expands", [T(rate("flotilla_isr_shrinks_total", "pod"), "shrinks {{pod}}"),
                                        T(rate("flotilla_isr_expands_total", "pod"), "expands {{pod}}")],
              unit="ops", width=8),
        Panel("Follower lag (offsets)", [T(f"max by (follower) (flotilla_follower_max_lag_offsets{{{SEL}}})",
                                           "broker {{follower}}")], width=8),
        Panel("Replica fetches per leader", [T(rate("flotilla_replica_fetches_total", "pod, leader"), "{{pod}} from {{leader}}")],
              unit="reqps", width=12),
        Panel("Offline partitions", [T(f"sum by (kafka_cluster) (flotilla_offline_partitions{{{SEL}}})", "{{kafka_cluster}}")],
              width=12),
    ])
    controller = Row("Controller and Leases", [
        Panel("Controller (node id)", [T(f"max by (kafka_cluster) (flotilla_controller_id{{{SEL}}})", "seen by brokers {{kafka_cluster}}"),
                                       T(f"max by (name) (flotilla_operator_controller{{{OP_SEL}}})", "Lease {{name}}")],
              width=8, description="-1: no controller."),
        Panel("Registered brokers (live Leases)",
              [T(f"min by (kafka_cluster) (flotilla_registered_brokers{{{SEL}}})", "fewest seen {{kafka_cluster}}"),
               T(f"max by (name) (flotilla_operator_registered_brokers{{{OP_SEL}}})", "operator {{name}}"),
               T(f"max by (name) (flotilla_operator_desired_brokers{{{OP_SEL}}})", "desired {{name}}")], width=8),
        Panel("Assignments written by the controller", [T(rate("flotilla_controller_assignment_writes_total", "pod"), "{{pod}}")],
              unit="ops", width=8),
        Panel("Operator reconciliations", [T('sum by (kind, result) (rate(flotilla_operator_reconcile_total[$__rate_interval]))',
                                             "{{kind}} {{result}}")], unit="ops"),
        Panel("Operator reconcile p99", [T("histogram_quantile(0.99, sum by (kind, le) "
                                           "(rate(flotilla_operator_reconcile_duration_seconds_bucket[$__rate_interval])))",
                                           "{{kind}}")], unit="s"),
        Panel("Served certificates: time left", [T(f"min by (pod, listener) (flotilla_broker_certificate_expiry_timestamp_seconds"
                                                   f"{{{SEL}}} - time())", "{{pod}} {{listener}}")],
              unit="s", description="What each TLS listener serves, from the brokers (FlotillaCertificateExpiring)."),
        Panel("Stalled resources", [T("sum by (kind) (flotilla_operator_resource_stalled{namespace=~\"$namespace\"})",
                                      "{{kind}}")],
              description="Resources whose spec cannot be reconciled as written (FlotillaResourceStalled)."),
    ])
    storage = Row("Storage", [
        Panel("Log dir usable space", [T(f"min by (pod, dir) (flotilla_log_dir_usable_bytes{{{SEL}}} / "
                                         f"flotilla_log_dir_total_bytes{{{SEL}}})", "{{pod}} {{dir}}")],
              unit="percentunit", width=8),
        Panel("Log size per topic", [T(f"sum by (topic) (flotilla_log_size_bytes{{{SEL}}})", "{{topic}}")], unit="bytes", width=8),
        Panel("Log cleaner", [T(rate("flotilla_log_cleaner_read_bytes_total", "pod"), "read {{pod}}"),
                              T(rate("flotilla_log_cleaner_written_bytes_total", "pod"), "written {{pod}}")],
              unit="Bps", width=8),
    ])
    return dashboard("flotilla-cluster", "Flotilla / Cluster",
                     "Brokers of a KafkaCluster: throughput, requests, replication, controller, Leases, storage.",
                     [overview, throughput, requests, replication, controller, storage])


def fetch_sessions() -> dict[str, Any]:
    cache = Row("Session cache (KIP-227)", [
        Panel("Cache slots used / configured", [T(f"sum by (pod) (flotilla_fetch_session_cache_slots_used{{{SEL}}})", "used {{pod}}"),
                                                T(f"sum by (pod) (flotilla_fetch_session_cache_slots{{{SEL}}})", "slots {{pod}}")],
              width=8),
        Panel("Evictions by reason", [T(rate("flotilla_incremental_fetch_session_evictions_total", "reason"), "{{reason}}")],
              unit="ops", width=8, stack=True,
              description="idle: unused past the eviction time; follower: a follower took a consumer's slot; "
                          "larger: a session with more partitions took an old smaller one's."),
        Panel("Partitions cached", [T(f"sum by (pod) (flotilla_incremental_fetch_partitions_cached{{{SEL}}})", "{{pod}}")],
              width=8),
    ])
    requests = Row("Fetch requests", [
        Panel("Fetch requests by kind", [T(rate("flotilla_fetch_requests_total", "kind"), "{{kind}}")], unit="reqps", stack=True,
              description="full (may open a session), incremental, sessionless, session_error."),
        Panel("Incremental share", [T(INCREMENTAL_SHARE, "incremental")], unit="percentunit"),
        Panel("Sessions per broker", [T(f"sum by (pod) (flotilla_incremental_fetch_sessions{{{SEL}}})", "{{pod}}")]),
        Panel("Fetch p99 latency", [T(p99("pod", 'api="fetch"'), "{{pod}}")], unit="s"),
    ])
    return dashboard("flotilla-fetch-sessions", "Flotilla / Fetch sessions",
                     "KIP-227 incremental fetch sessions: cache slots, evictions by reason, full vs incremental fetches.",
                     [cache, requests], cluster_query="flotilla_fetch_requests_total")


def quotas() -> dict[str, Any]:
    q = 'quota_type=~"$quota_type", client_id=~"$client_id"'
    rows = [Row("Client quotas (KIP-13)", [
        Panel("Rate vs limit", [T(f"max by (quota_type, client_id) (flotilla_quota_rate{{{SEL}, {q}}} / "
                                  f"flotilla_quota_limit{{{SEL}, {q}}})", "{{quota_type}} {{client_id}}")],
              unit="percentunit", description="The quota's measured rate over its bound (per broker; the worst shown)."),
        Panel("Throttle time (share of time throttled)",
              [T(rate("flotilla_quota_throttle_time_seconds_total", "quota_type, client_id", extra=q),
                 "{{quota_type}} {{client_id}}")], unit="percentunit"),
        Panel("Rate measured (bytes/s; request: % of the event loop)",
              [T(f"sum by (quota_type, client_id) (flotilla_quota_rate{{{SEL}, {q}}})", "{{quota_type}} {{client_id}}")]),
        Panel("Limit", [T(f"max by (quota_type, client_id) (flotilla_quota_limit{{{SEL}, {q}}})", "{{quota_type}} {{client_id}}")]),
        Panel("Throttled requests", [T(rate("flotilla_quota_throttled_requests_total", "quota_type, client_id", extra=q),
                                       "{{quota_type}} {{client_id}}")], unit="reqps", width=24),
    ])]
    d = dashboard("flotilla-client-quotas", "Flotilla / Client quotas",
                  "KIP-13 quotas: byte rates and request time against limits, throttle time per client.",
                  rows, cluster_query="flotilla_requests_total")
    for name, query in (("quota_type", "label_values(flotilla_quota_limit, quota_type)"),
                        ("client_id", 'label_values(flotilla_quota_limit{quota_type=~"$quota_type"}, client_id)')):
        d["templating"]["list"].append({
            "name": name, "label": name, "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": {"query": query, "refId": f"{name}-var"}, "definition": query, "refresh": 2,
            "includeAll": True, "multi": True, "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}})
    return d


def transactions() -> dict[str, Any]:
    rows = [
        Row("Coordinator", [
            Panel("Transactional ids by state", [T(f"sum by (state) (flotilla_transactions{{{SEL}}})", "{{state}}")], stack=True),
            Panel("Transactions started and ended", [T(rate("flotilla_transactions_started_total", "kafka_cluster"), "started"),
                                                     T(rate("flotilla_transactions_ended_total", "result"), "{{result}}"),
                                                     T(rate("flotilla_transactions_timed_out_total", "kafka_cluster"),
                                                       "timed out")],
                  unit="ops"),
            Panel("Markers written", [T(rate("flotilla_transaction_markers_written_total", "pod"), "{{pod}}")], unit="ops", width=8),
            Panel("Mean time to the last marker", [T(f"sum(rate(flotilla_transaction_marker_seconds_sum{{{SEL}}}[{RATE}])) / "
                                                     f"sum(rate(flotilla_transaction_marker_seconds_count{{{SEL}}}[{RATE}]))",
                                                     "marker round")], unit="s", width=8),
            Panel("Mean shard load time", [T(f"sum(rate(flotilla_transaction_coordinator_load_seconds_sum{{{SEL}}}[{RATE}])) / "
                                             f"sum(rate(flotilla_transaction_coordinator_load_seconds_count{{{SEL}}}[{RATE}]))",
                                             "load")], unit="s", width=8),
        ]),
        Row("Partitions (read_committed)", [
            Panel("LSO lag, largest per partition", [T(f"max by (topic, partition) (flotilla_partition_lso_lag_offsets{{{SEL}}})",
                                                       "{{topic}}-{{partition}}")],
                  description="High watermark minus last stable offset: how far read_committed readers are held back by an "
                              "open transaction. Per broker, only the partitions with the largest lag "
                              "(flotilla.transaction.metrics.max.partitions)."),
            Panel("Partitions with an open transaction", [T(f"sum by (pod) (flotilla_partitions_with_open_transactions{{{SEL}}})",
                                                            "{{pod}}")]),
        ]),
        Row("Transactional APIs", [
            Panel("Requests", [T(rate("flotilla_requests_total", "api", extra=f'api=~"{TXN_APIS}"'), "{{api}}")], unit="reqps"),
            Panel("p99 latency", [T(p99("api", f'api=~"{TXN_APIS}"'), "{{api}}")], unit="s"),
        ]),
    ]
    return dashboard("flotilla-transactions", "Flotilla / Transactions",
                     "KIP-98 transactions: coordinator states, commits and aborts, markers, transactional APIs.",
                     rows, cluster_query="flotilla_transactions")


def record_deletions() -> dict[str, Any]:
    rows = [
        Row("RecordDeletion resources (operator)", [
            Panel("Records deleted (per hour)", [T(f"sum by (namespace, name) (increase(flotilla_operator_records_deleted_total"
                                                   f"{{namespace=~\"$namespace\"}}[1h]))", "{{namespace}}/{{name}}")]),
            Panel("Since the last successful run", [T(f"time() - max by (namespace, name) (flotilla_operator_record_deletion_"
                                                      f"last_success_timestamp_seconds{{namespace=~\"$namespace\"}})",
                                                      "{{namespace}}/{{name}}")], unit="s"),
        ]),
        Row("DeleteRecords on the brokers", [
            Panel("DeleteRecords requests", [T(rate("flotilla_requests_total", "pod", extra='api="delete_records"'), "{{pod}}")],
                  unit="reqps", width=8),
            Panel("DeleteRecords p99", [T(p99("pod", 'api="delete_records"'), "{{pod}}")], unit="s", width=8),
            Panel("Log start offset per topic", [T(f"max by (topic) (flotilla_log_start_offset{{{SEL}}})", "{{topic}}")], width=8),
        ]),
    ]
    return dashboard("flotilla-record-deletions", "Flotilla / Record deletions",
                     "DeleteRecords: RecordDeletion runs from the operator, requests and log start offsets on the brokers.",
                     rows, cluster_query="flotilla_log_start_offset")


def rebalancing() -> dict[str, Any]:
    phase = f"flotilla_operator_rebalance_phase{{{OP_SEL}"
    rows = [
        Row("Operator rebalance (status.rebalance)", [
            Panel("Clusters moving", [T(f"sum(flotilla_operator_rebalance_moving{{{OP_SEL}}})")],
                  kind="stat", width=4, height=4, thresholds=[(None, "green"), (1, "blue")]),
            Panel("Clusters paused", [T(f'sum({phase}, phase="Paused"}})')],
                  kind="stat", width=4, height=4, thresholds=[(None, "green"), (1, "orange")],
                  description="flotilla.io/rebalance-paused: moves in flight finish, nothing new starts."),
            Panel("Clusters blocked", [T(f'sum({phase}, phase="Blocked"}})')],
                  kind="stat", width=4, height=4, thresholds=RED,
                  description="A plan that cannot be met or a cluster that cannot be reached: status.rebalance.message."),
            Panel("Partitions left to move", [T(f"sum(flotilla_operator_rebalance_partitions_remaining{{{OP_SEL}}})")],
                  kind="stat", width=4, height=4),
            Panel("Partitions being reassigned", [T(f"sum(flotilla_reassigning_partitions{{{SEL}}})")],
                  kind="stat", width=4, height=4, description="ListPartitionReassignments, as the leaders count them."),
            Panel("Reassignment bytes in", [T(f"sum(rate(flotilla_reassignment_bytes_in_total{{{SEL}}}[{RATE}]))")],
                  kind="stat", width=4, height=4, unit="Bps"),
            Panel("Partitions left to move per cluster",
                  [T(f"max by (namespace, name) (flotilla_operator_rebalance_partitions_remaining{{{OP_SEL}}})",
                     "{{namespace}}/{{name}}")],
                  description="partitionsTotal - partitionsMoved of the current rebalance; flat while Moving "
                              "for 30 minutes fires FlotillaRebalanceStalled."),
            Panel("Phase per cluster", [T(f"max by (namespace, name, phase) ({phase}}}) > 0",
                                          "{{namespace}}/{{name}} {{phase}}")],
                  description="Idle, Moving, Paused or Blocked (1 while in it); Blocked for 15 minutes fires "
                              "FlotillaRebalanceBlocked."),
        ]),
        Row("Reassignments on the brokers (KIP-455)", [
            Panel("Partitions being reassigned, per leader",
                  [T(f"sum by (pod) (flotilla_reassigning_partitions{{{SEL}}})", "{{pod}}")], width=8, stack=True),
            Panel("Reassignment bytes in (appended as an adding replica)",
                  [T(rate("flotilla_reassignment_bytes_in_total", "pod"), "{{pod}}")], unit="Bps", width=8),
            Panel("Reassignment bytes out (sent as leader to adding replicas)",
                  [T(rate("flotilla_reassignment_bytes_out_total", "pod"), "{{pod}}")], unit="Bps", width=8),
        ]),
        Row("Replication throttle (KIP-73)", [
            Panel("Throttled byte rate vs bound",
                  [T(f"max by (pod, side) (flotilla_replication_throttle_rate_bytes{{{SEL}}} / "
                     f"flotilla_replication_throttle_limit_bytes{{{SEL}}})", "{{pod}} {{side}}")],
                  unit="percentunit", width=8,
                  description="leader/follower.replication.throttled.rate: measured over the bound; near 100% the "
                              "throttle is what paces the move. No series: no throttle set."),
            Panel("Throttled byte rate and bound",
                  [T(f"sum by (pod, side) (flotilla_replication_throttle_rate_bytes{{{SEL}}})", "{{pod}} {{side}}"),
                   T(f"max by (pod, side) (flotilla_replication_throttle_limit_bytes{{{SEL}}})", "bound {{pod}} {{side}}")],
                  unit="Bps", width=8),
            Panel("Reads held back by the throttle",
                  [T(rate("flotilla_replication_throttle_held_back_total", "pod, side"), "{{pod}} {{side}}")],
                  unit="ops", width=8,
                  description="Partition reads left out of a replica fetch (only for replicas out of the ISR) "
                              "because the throttle was exceeded."),
            Panel("Throttled bytes replicated", [T(rate("flotilla_replication_throttled_bytes_total", "pod, side"),
                                                   "{{pod}} {{side}}")], unit="Bps"),
            Panel("Throttled partitions", [T(f"sum by (pod, side) (flotilla_replication_throttled_partitions{{{SEL}}})",
                                             "{{pod}} {{side}}")],
                  description="*.replication.throttled.replicas naming this broker."),
        ]),
    ]
    return dashboard("flotilla-rebalancing", "Flotilla / Rebalancing",
                     "Data moves: the operator's rebalances, KIP-455 reassignments on the brokers, KIP-73 replication throttles.",
                     rows, cluster_query="flotilla_reassigning_partitions")


#: File name (under monitoring/dashboards/) -> dashboard.
DASHBOARDS = {
    "flotilla-cluster.json": cluster,
    "flotilla-fetch-sessions.json": fetch_sessions,
    "flotilla-client-quotas.json": quotas,
    "flotilla-transactions.json": transactions,
    "flotilla-record-deletions.json": record_deletions,
    "flotilla-rebalancing.json": rebalancing,
}
