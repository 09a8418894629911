"""Telemetry: periodic samples of storage, fabric, GPU and host counters on one node."""
