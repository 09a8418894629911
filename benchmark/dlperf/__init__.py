"""dlperf: the benchmark side of dlperf-cluster (ResNet-50 scaling study, telemetry, report)."""


def __getattr__(name: str) -> str:
    # __version__ is read from the installed metadata on first use: importing the package stays
    # cheap for dlperf-cuda-libs.pth, which every Python of a venv with dlperf runs.
    if name != "__version__":
        raise AttributeError(f"module 'dlperf' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("dlperf")
    except PackageNotFoundError:  # running from a source tree that was not installed
        found = "0.0.0+unknown"
    globals()["__version__"] = found
    return found
