"""MkDocs hooks: the CLI reference generated from `workbench.cli`'s argument parser at build
time, and the notebooks and benchmark table published with the site so pages can link them.

`docs/cli.md` holds the marker `<!-- cli-reference -->`; every subcommand the parser knows
(including ones added later) is rendered there, so the reference cannot drift from the code.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
CLI_MARKER = "<!-- cli-reference -->"
PUBLISHED = ("notebooks/*.ipynb", "benchmarks/README.md")


def on_files(files: Files, config: Any) -> Files:
    """Adds the notebooks and the benchmark table to the site (links to them then resolve)."""
    for pattern in PUBLISHED:
        for path in sorted(ROOT.glob(pattern)):
            relative = path.relative_to(ROOT).as_posix()
            if relative.endswith(".md"):  # published as a file to download, not a page
                relative = relative.removesuffix(".md") + ".txt"
            files.append(File.generated(config, relative, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    return markdown


def cli_reference() -> str:
    """Markdown for `workbench` and each subcommand: usage, description, every option."""
    from workbench.cli import _parser

    os.environ["COLUMNS"] = "90"  # argparse wraps usage lines at the terminal's width
    parser = _parser()
    parts = [_usage(parser)]
    for name, sub in _subcommands(parser).items():
        parts.append(f"## `workbench {name}`\n")
        if sub.description or sub._subparser_help:
            parts.append(f"{sub.description or sub._subparser_help}\n")
        parts.append(_usage(sub))
        parts.append(_options_table(sub))
    return "\n".join(parts)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                sub._subparser_help = helps.get(name)  # type: ignore[attr-defined]
                found[name] = sub
    return found


def _usage(parser: argparse.ArgumentParser) -> str:
    lines = parser.format_usage().removeprefix("usage: ").strip().splitlines()
    usage = "\n".join([lines[0], *("    " + line.strip() for line in lines[1:])])
    return f"```text\n{usage}\n```\n"


def _options_table(parser: argparse.ArgumentParser) -> str:
    rows = ["| argument | meaning |", "|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        names = ", ".join(f"`{n}`" for n in action.option_strings) or f"`{action.dest}`"
        if action.metavar and action.option_strings:
            names += f" `{action.metavar}`"
        meaning = (action.help or "").replace("|", "\\|").replace("\n", " ")
        if action.choices and not isinstance(action, argparse._SubParsersAction):
            meaning += " (one of: " + ", ".join(f"`{c}`" for c in action.choices) + ")"
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in meaning:
            meaning += f" (default: `{action.default}`)"
        rows.append(f"| {names} | {meaning} |")
    return "\n".join(rows) + "\n"
