"""Regenerate every generated part of the docs from committed results. Never edit those by hand.

    python scripts/update_docs.py

- README.md: the two sample tables (from results/h200/table.txt and results/simulator/table.txt,
  which `tilegemm bench --table` wrote) and the results section (from results/h200/lab.json and
  its report, via tilegemm.bench.report.update_readme);
- results/h200/report/: the Markdown report and plots of the lab run;
- results/h200/ladder-report/ and docs/ladder.md: the SIMT ladder, from results/h200/ladder.json
  and results/h200/resources.json.
Missing inputs are reported and skipped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from tilegemm.bench import ladder, report, results  # noqa: E402

README = ROOT / "README.md"
H200 = ROOT / "results" / "h200"


def replace_between(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- table:{name}:begin -->", f"<!-- table:{name}:end -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise SystemExit(f"README.md lacks the markers {begin} … {end}")
    return text[: i + len(begin)] + "\n" + body + "\n" + text[j:]


def table_block(path: Path) -> str:
    rows = [ln.rstrip() for ln in path.read_text().splitlines()]
    return "```text\n" + "\n".join(rows).strip("\n") + "\n```"


def main() -> int:
    text = README.read_text()
    for name, path in (("h200", H200 / "table.txt"), ("simulator", ROOT / "results" / "simulator" / "table.txt")):
        if path.exists():
            text = replace_between(text, name, table_block(path))
        else:
            print(f"skipped the {name} table: {path} is missing")
    README.write_text(text)
    lab = H200 / "lab.json"
    if lab.exists():
        doc = results.load(lab)
        ceil = report.find_ceilings(doc, H200 / "ceilings.json" if (H200 / "ceilings.json").exists() else None)
        report.render(doc, H200 / "report", ceilings=ceil)
        report.update_readme(README, doc, H200 / "report")
        print("wrote results/h200/report and the README's results section")
    lad = H200 / "ladder.json"
    if lad.exists():
        doc = results.load(lad)
        doc["_path"] = "results/h200/ladder.json"
        res_path = H200 / "resources.json"
        res = json.loads(res_path.read_text()) if res_path.exists() else []
        (ROOT / "docs" / "ladder.md").write_text(ladder.render(doc, res))
        ceil = report.find_ceilings(doc, H200 / "ceilings.json" if (H200 / "ceilings.json").exists() else None)
        report.render(doc, H200 / "ladder-report", ceilings=ceil)
        print("wrote docs/ladder.md and results/h200/ladder-report")
    return 0


if __name__ == "__main__":
    sys.exit(main())
