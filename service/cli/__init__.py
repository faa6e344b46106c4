"""The `procsift` command: one thin entry point; each verb lives in its own module here.

Errors from every package arrive as ProcsiftError subclasses and are turned into one
plain line on stderr with a non-zero exit here, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from procsift.collector.errors import ProcsiftError
from procsift.collector.schema import printable

# Modules that add verbs; each has `register(subparsers)` and sets `func` on its parsers.
_VERB_MODULES = (
    "procsift.service.cli._collect",
    "procsift.service.cli._trace",
    "procsift.service.cli._simulate",
    "procsift.service.cli._models",
    "procsift.service.cli._distribute",
    "procsift.service.cli._run",
    "procsift.service.cli._serve",
)

__all__ = ["main", "build_parser", "version"]


def version() -> str:
    """The installed distribution's version (pyproject.toml's, as pip recorded it)."""
    from importlib.metadata import PackageNotFoundError  # noqa: PLC0415
    from importlib.metadata import version as dist_version  # noqa: PLC0415

    try:
        return dist_version("procsift")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every verb registered."""
    from procsift.service.cli._args import Parser  # noqa: PLC0415

    parser = Parser(
        prog="procsift",
        description="Learn what each process is doing from its behaviour, and place it accordingly.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run 'procsift VERB --help' for a verb's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"procsift {version()}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for name in _VERB_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:  # the verb module is not there yet
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run procsift with `argv`; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except ProcsiftError as err:
        print(f"procsift: error: {printable(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except OSError as err:  # the last net: a file or folder the system refused, as one line
        where = f"{err.filename}: " if err.filename else ""
        print(f"procsift: error: {printable(where)}{err.strerror or err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
