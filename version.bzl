"""The project's version: the Python wheel's, and ps_build_info's on /metrics."""

PS_VERSION = "0.1.0"
