"""The cases of the one-broker comparison (`python -m bench`): the Workload contract and its registry
(`base`), the standard workloads (`standard`) and those with a module of their own. bench/catalog.py
imports them all, which registers them."""
