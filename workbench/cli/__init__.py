"""`workbench` command line: the same work as the Python API, headless.

Errors are one line on stderr and a non-zero exit code; `--debug` shows the traceback. The
commands are listed in `registry`; the options they share are declared once in `options`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from workbench.cli.options import EXIT_INTERNAL, EXIT_MISMATCH, EXIT_USAGE
from workbench.errors import WorkbenchError

__all__ = ["EXIT_INTERNAL", "EXIT_MISMATCH", "EXIT_USAGE", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    _quiet_tensorflow(getattr(args, "debug", False))
    try:
        return args.run(args)
    except WorkbenchError as exc:
        return _fail(args, f"error: {exc}", EXIT_USAGE)
    except KeyboardInterrupt:
        return _fail(args, "interrupted", 130)
    except Exception as exc:  # anything else is our bug: say so in one line
        first = (str(exc).strip().splitlines() or [""])[0]
        return _fail(args, f"internal error: {type(exc).__name__}: {first} "
                           "(rerun with --debug for the traceback)", EXIT_INTERNAL)


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    if getattr(args, "debug", False):
        import traceback

        traceback.print_exc()
    print(f"workbench: {message}", file=sys.stderr)
    return code


def _parser() -> argparse.ArgumentParser:
    from workbench.cli.registry import COMMANDS, command_help

    parser = argparse.ArgumentParser(
        prog="workbench", description="Explore and tune TF-TRT conversions without a GPU."
    )
    commands = parser.add_subparsers(dest="command")
    for name, command in COMMANDS.items():
        sub = commands.add_parser(name, help=command_help(command))
        command.add_arguments(sub)
        sub.set_defaults(run=command.run)
    return parser


def _quiet_tensorflow(debug: bool) -> None:
    """TensorFlow's chatter would bury the report (and break --json consumers): stderr is ours
    alone on any CPU, unless --debug, which keeps everything."""
    from workbench import quiet

    if debug:
        quiet.install(level=0)  # nothing filtered; TensorFlow's settings still applied
        return
    quiet.only_fatal_lines()
