"""Every command, by the name `workbench` knows it, in the order `workbench --help` lists them.

A command is a module (`Command`): its docstring is the command's help, `add_arguments(parser)`
declares its options (the shared ones from `options`) and `run(args)` does the work, returning
the exit code. Adding a command means writing that module and naming it here.
"""

from __future__ import annotations

import argparse
from typing import Protocol

from workbench.cli import (
    check,
    convert,
    doctor,
    estimate,
    export,
    graph,
    inspect_converted,
    report,
    strip_engines,
    trtexec_profile,
    tune,
    validate,
)


class Command(Protocol):
    __doc__: str | None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


COMMANDS: dict[str, Command] = {
    "convert": convert, "report": report, "profile": trtexec_profile, "estimate": estimate,
    "validate": validate, "check": check, "inspect": inspect_converted,
    "strip-engines": strip_engines, "tune": tune, "export": export, "graph": graph,
    "doctor": doctor,
}


def command_help(command: Command) -> str:
    """The command's docstring as one line of help."""
    return " ".join((command.__doc__ or "").split())
