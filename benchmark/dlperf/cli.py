"""The single `dlperf` command. Subcommands are registered here as the package grows."""

from __future__ import annotations

import argparse
import platform
import sys

from dlperf import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dlperf",
        description="Reproduce the ResNet-50 scaling study of the Ready Solutions for AI v1.1 "
        "reference cluster: training, telemetry, sweep and report.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"dlperf {__version__} (Python {platform.python_version()})",
    )
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return 0
