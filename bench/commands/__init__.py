"""The harnesses of their own, `python -m bench <command>` (bench/catalog.py lists them): each module
has a `main(argv)` and writes bench/results/<name>.{json,md}; a command's plan or report sits beside
it when it is large enough to test on its own (drain_plan, drain_report, security_report)."""
