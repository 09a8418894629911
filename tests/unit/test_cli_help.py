"""Every dlperf command's --help ends with an example, and every example parses."""

from __future__ import annotations

import argparse
import shlex

import pytest
from dlperf.cli import EXAMPLES, build_parser, subcommand


def commands(parser: argparse.ArgumentParser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path
    for action in subs:
        for name, child in action.choices.items():
            yield from commands(child, (*path, name))


def test_every_command_has_an_example():
    assert sorted(commands(build_parser())) == sorted(EXAMPLES)


@pytest.mark.parametrize("path", sorted(EXAMPLES), ids=" ".join)
def test_the_example_parses_and_is_printed_whole(path):
    parser = build_parser()
    words = shlex.split(EXAMPLES[path])
    args, rest = parser.parse_known_args(words[words.index("dlperf") + 1 :])
    if path == ("sweep",):  # a sweep passes the flags it does not know to every `dlperf train`
        parser.parse_args(["train", *rest, "--output", "point"])  # the sweep adds --output
    else:
        assert rest == []
    assert [args.command, getattr(args, "data_command", None)][: len(path)] == list(path)
    assert f"example:\n  {EXAMPLES[path]}\n" in subcommand(parser, path).format_help()
