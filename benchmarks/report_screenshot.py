"""Remake docs/report.png: the first screen of report.html at 1280 x 800 for HellaSwag validation
with the study's ten models' released scores, filtered by rules/zero-prompt-core.yaml.

    .venv/bin/python benchmarks/report_screenshot.py [--out docs/report.png]

Runs the commands a user runs (curate init, import-scores, filter, analyze) in a temporary
folder, then loads the report in Debian's headless Chromium (tests/headless.py) and saves the
screenshot. About a minute on two cores.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "tests"))


def curate(*args) -> None:
    subprocess.run([sys.executable, "-m", "curate", *map(str, args)], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)


def main(argv=None) -> None:
    from headless import Browser, Tab, find_chromium

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report.png")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ws, tmp = Path(tmp) / "ws", Path(tmp)
        curate("init", ws, "--benchmark", "hellaswag", "--data", SHARED / "hellaswag" / "validation.jsonl.gz")
        curate("import-scores", ws, "--format", "study-csv", "--dir", SHARED / "paper-scores", "--quiet")
        curate("filter", ws, "--rules", ROOT / "rules" / "zero-prompt-core.yaml", "--out", tmp / "decisions",
               "--tokenizer", "smollm2-135m")
        curate("analyze", ws, "--out", tmp / "report", "--decisions", tmp / "decisions")
        browser = Browser(find_chromium() or sys.exit("Debian chromium is needed (apt-get install -y chromium)"))
        try:
            tab = Tab(browser, 1280, 800)
            tab.goto((tmp / "report" / "report.html").as_uri())
            tab.screenshot(args.out)
        finally:
            browser.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
