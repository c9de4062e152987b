"""Benchmarks that start a whole Mnemo in-process, print figures and write JSON/PNG results."""
