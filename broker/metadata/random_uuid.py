"""`flotilla random-uuid`: a new cluster.id for brokers started by hand.

Each broker of one cluster must carry the same cluster.id from its first start (it is written to
meta.properties in every log directory); a broker started without one makes up its own, and a second
such broker is then refused as belonging to another cluster. Kafka's `kafka-storage.sh random-uuid`
plays the same part.
"""

from __future__ import annotations

import argparse

from broker.metadata.meta_properties import new_cluster_id


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def run(args: argparse.Namespace) -> int:
    del args
    print(new_cluster_id())
    return 0
