"""Helpers for bench/gateway.py: the loopback upstream and the open-loop load generator."""
