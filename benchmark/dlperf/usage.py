"""The error every dlperf subcommand raises for bad command-line input."""


class UsageError(Exception):
    """Bad command-line input; the message names the flag."""
