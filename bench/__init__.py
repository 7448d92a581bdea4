"""Benchmarks of issue 6: see bench/README.md."""
