"""dlperf: the benchmark side of dlperf-cluster (ResNet-50 scaling study, telemetry, report)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dlperf")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"
