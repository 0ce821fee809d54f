"""MkDocs hooks: the CLI reference generated from `workbench.cli`'s argument parser at build
time, the Lessons section of the nav, and the benchmark table and plotly.js published with the
site.

`docs/cli.md` holds the marker `<!-- cli-reference -->`; every subcommand the parser knows
(including ones added later) is rendered there, so the reference cannot drift from the code.
The Lessons are every executed notebook in docs/notebooks/ (tools/render_notebooks.py writes
them), in name order; a page with plotly figures loads plotly.js once, from the site itself.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
CLI_MARKER = "<!-- cli-reference -->"
LESSONS = ("Lessons", "notebooks")  # the nav section and its folder under docs/
NAV_AFTER = "Getting started"
PLOTLY_JS = "javascripts/plotly.min.js"


def on_config(config: Any) -> Any:
    """The Lessons section, after Getting started: one page per notebook copy, titled by its
    number and heading (a notebook added later appears without editing mkdocs.yml)."""
    title, folder = LESSONS
    pages = [{lesson_title(p): f"{folder}/{p.name}"}
             for p in sorted((ROOT / "docs" / folder).glob("*.ipynb"))]
    nav = [entry for entry in config["nav"] if title not in entry]
    after = next(i for i, entry in enumerate(nav) if NAV_AFTER in entry)
    config["nav"] = [*nav[:after + 1], {title: pages}, *nav[after + 1:]]
    return config


def lesson_title(path: Path) -> str:
    """"02 Choosing minimum_segment_size" for 02_minimum_segment_size.ipynb: the number, then
    its first heading up to a colon."""
    cells = json.loads(path.read_text())["cells"]
    lines = ["".join(c["source"]).splitlines() for c in cells if c["cell_type"] == "markdown"]
    heading = next((line[2:] for text in lines for line in text if line.startswith("# ")),
                   path.stem.partition("_")[2].replace("_", " "))
    number = path.stem.partition("_")[0]
    return f"{number} {heading.split(':')[0].replace('`', '')}".strip()


def on_files(files: Files, config: Any) -> Files:
    """Adds the benchmark table (a file to download, which pages link) and plotly.js."""
    table = ROOT / "benchmarks" / "README.md"
    files.append(File.generated(config, "benchmarks/README.txt", abs_src_path=str(table)))
    from plotly.offline import get_plotlyjs

    files.append(File.generated(config, PLOTLY_JS, content=get_plotlyjs()))
    return files


def on_post_page(output: str, page: Any, config: Any) -> str:
    """A page showing plotly figures loads plotly.js in its head, before the figures' scripts."""
    if 'class="plotly-graph-div"' not in output:
        return output
    up = "../" * page.file.url.count("/")
    return output.replace("</head>", f'<script src="{up}{PLOTLY_JS}"></script>\n</head>', 1)


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
