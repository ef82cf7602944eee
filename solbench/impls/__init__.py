"""Implementations of the shipped workloads (functions referenced from workloads/*.yaml)."""
