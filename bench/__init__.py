"""Benchmarks: programs (not timed tests) that print figures and ratios against a peer.

Run them all with ``python -m bench`` (``--quick`` for small sizes); see
``docs/benchmarks.md`` for the targets and the latest results.
"""
