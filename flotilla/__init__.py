"""Flotilla command line: `flotilla broker`, `flotilla operator`, `flotilla testenv`."""
