"""`python -m sample_models build [NAME ...]`: build or reuse sample SavedModels."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before anything imports TensorFlow

import sample_models  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sample_models")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build sample SavedModels (default: all)")
    build.add_argument("names", nargs="*", metavar="NAME",
                       help=f"any of: {', '.join(sample_models.NAMES)}")
    build.add_argument("--root", type=Path, default=None,
                       help=f"output directory (default: {sample_models.ROOT})")
    build.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def build(names: list[str], root: Path | None) -> None:
    for name in names or sample_models.NAMES:
        sample_models.recipe(name)  # reject every unknown name before building anything
    for name in names or sample_models.NAMES:
        outcome = sample_models.ensure_built(name, root)
        status = "built" if outcome.built else "reused"
        print(f"{status:<6}  {name:<14}  {_shown(outcome.path)}  {outcome.seconds:.1f}s",
              flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        build(args.names, args.root)
    except sample_models.UnknownSampleModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # one line on stderr, as every workbench command does
        if args.debug:
            raise
        first_line = (str(exc).strip().splitlines() or [""])[0]
        print(f"error: {type(exc).__name__}: {first_line} (rerun with --debug for the "
              "traceback)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
