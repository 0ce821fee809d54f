"""Writes `benchmarks/README.md`: the current figure of every benchmark in one table, from the
JSON each benchmark script writes (`benchmarks/results/<name>.json`, see `record.py`).

    python benchmarks/summarize.py           # rewrite the README
    python benchmarks/summarize.py --check   # exit 1 when the README is not the results' table
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
# The order of the table: the everyday figures first, the long runs after.
ORDER = ["segmentation", "ui", "engines", "engine_calls", "open", "tune", "memory_phases", "zoo",
         "tensorrt_builds"]
VERDICT = {True: "met", False: "NOT met", None: ""}

HEADER = """# Benchmarks

The current figure of every benchmark. Each script under `benchmarks/` prints its figures and
writes them to `benchmarks/results/<name>.json` (command, machine, date);
`python benchmarks/summarize.py` regenerates this page from those files (do not edit it by
hand; `tests/test_docs.py` checks it is up to date). Earlier figures are in git's history.
What each benchmark measures and how to read it: `docs/benchmarks.md` (the site's Benchmarks
page).
"""


def load_results(directory: Path = HERE / "results") -> list[dict[str, Any]]:
    found = {path.stem: json.loads(path.read_text()) for path in directory.glob("*.json")}
    names = [n for n in ORDER if n in found] + sorted(set(found) - set(ORDER))
    return [found[name] for name in names]


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(results: list[dict[str, Any]]) -> str:
    lines = [HEADER, "<!-- --8<-- [start:table] -->",  # the docs' Benchmarks page includes it
             "| command | measure | figure | target | machine, date |", "|---|---|---|---|---|"]
    for result in results:
        for i, row in enumerate(result["figures"]):
            target = row["target"]
            if target and row["met"] is not None:
                target = f"{target}: {VERDICT[row['met']]}"
            first = i == 0
            command = f"`{result['command']}`" if first else ""
            where = f"{result['machine']}, {result['date']}" if first else ""
            if first and "load" in result:
                where += f", load {result['load']}"
            if first and result.get("note"):
                where += f" ({result['note']})"
            lines.append(f"| {command} | {_cell(row['measure'])} | {_cell(row['figure'])} | "
                         f"{_cell(target)} | {_cell(where)} |")
    for result in results:
        details = result.get("details")
        if not details:
            continue
        lines += ["", f"### {details['title']}", "",
                  f"`{result['command']}`, {result['machine']}, {result['date']}.", ""]
        if details.get("note"):
            lines += [details["note"], ""]
        lines.append("| " + " | ".join(details["columns"]) + " |")
        lines.append("|" + "---|" * len(details["columns"]))
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in details["rows"]]
    lines.append("<!-- --8<-- [end:table] -->")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when README.md is not what the results make")
    args = parser.parse_args()
    text = render(load_results())
    if args.check:
        if README.read_text() != text:
            print(f"{README} is out of date: run python benchmarks/summarize.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(text)
    print(f"wrote {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
