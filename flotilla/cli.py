"""The `flotilla` command. Each subcommand lives with the code it runs; this file only routes.

A subcommand module provides `add_arguments(parser)` and `run(args) -> int`, and is imported
only when chosen, so `flotilla broker` never pays for kopf or the Kubernetes client.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = {
    "broker": ("broker.cli", "run a Kafka-compatible broker"),
    "image": ("flotilla.image_cli", "build the Flotilla image with buildah (no Docker) and push it to a registry"),
    "operator": ("flotilla_operator.cli", "run the Kubernetes operator (kopf) against the current kubeconfig"),
    "random-uuid": ("broker.metadata.random_uuid", "print a new cluster.id (as kafka-storage.sh random-uuid does)"),
    "testenv": ("flotilla.testenv.cli", "build, start and stop a local Kubernetes control plane for tests"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="flotilla", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if argv and argv[0] in SUBCOMMANDS:
        # Load only the chosen subcommand's module.
        chosen = {argv[0]: SUBCOMMANDS[argv[0]]}
    else:
        chosen = {}
    modules = {}
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        if name in chosen:
            modules[name] = importlib.import_module(module_name)
            modules[name].add_arguments(sp)
    args = parser.parse_args(argv)
    return int(modules[args.command].run(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
