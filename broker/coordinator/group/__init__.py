"""Consumer groups, classic protocol (JoinGroup/SyncGroup), as Kafka's group coordinator.

  group_metadata.py  one group's state machine and members (pure data, no I/O, no timers)
  coordinator.py     the API logic: join/sync/heartbeat/leave, list/describe/delete, rebalance,
                     session and initial-delay timers, shard loading
  offsets.py         committed offsets: commit (also transactional), fetch, delete, expiry
  group_writes.py    acks=all writes to `__consumer_offsets` through the PartitionWriter
  results.py         what the coordinator answers (plain data)
  codec.py           keys and values of `__consumer_offsets` records (Kafka's layout)
  offsets_log.py     appending to and replaying `__consumer_offsets`

Handlers live in broker/apis/handlers/ (find_coordinator, join_group, sync_group, heartbeat,
leave_group, offset_commit, offset_fetch, list_groups, describe_groups, delete_groups).
"""
