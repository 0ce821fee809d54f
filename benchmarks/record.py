"""Each benchmark's current figures as JSON, `benchmarks/results/<name>.json`.

A benchmark script ends with `record.write(name, figures)`; `benchmarks/summarize.py` turns
every results file into the one table of `benchmarks/README.md`. A figure is a dict with
`measure`, `figure` (text, as a reader should see it), `target` ("" when none) and `met`
(True, False or None when there is no target). The file also names the command, the machine
(`workbench.hardware.cpu_device_name`), its load and the UTC date of the run; history stays in
git.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

# BENCHMARK_RESULTS_DIR moves them (a trial run that must not replace the current figures).
RESULTS = Path(os.environ.get("BENCHMARK_RESULTS_DIR")
               or Path(__file__).resolve().parent / "results")


def figure(measure: str, value: str, target: str = "", met: bool | None = None) -> dict[str, Any]:
    return {"measure": measure, "figure": value, "target": target, "met": met}


def write(name: str, figures: list[dict[str, Any]], details: dict[str, Any] | None = None,
          keep_other_models: bool = False, machine: str | None = None,
          data: dict[str, Any] | None = None) -> Path:
    """Writes this run's figures (and an optional detail table: title, columns, rows).

    `keep_other_models`: a script run once per model (measures named "<model>: ...") keeps the
    rows of the other models from the previous file. `machine` names where the figures were
    measured when that is not this machine (a lent GPU); `data`, raw measurements other
    scripts read (not drawn in the table).
    """
    from workbench.hardware import cpu_device_name

    path = RESULTS / f"{name}.json"
    if keep_other_models and path.exists():
        mine = {row["measure"].split(":")[0] for row in figures}
        figures = [row for row in json.loads(path.read_text())["figures"]
                   if row["measure"].split(":")[0] not in mine] + figures

    document = {
        "benchmark": name,
        "command": "python " + " ".join(shlex.quote(a) for a in [f"benchmarks/{name}.py",
                                                                  *sys.argv[1:]]),
        "machine": machine or cpu_device_name(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        # Our machines are shared: the 1-minute load average at the end says how busy it was.
        "load": round(os.getloadavg()[0], 1),
        "figures": figures,
    }
    if details:
        document["details"] = details
    if data:
        document["data"] = data
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(document, indent=1) + "\n")
    print(f"\nfigures written to {path} (benchmarks/summarize.py puts them in the table)")
    return path
