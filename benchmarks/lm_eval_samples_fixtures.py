"""Regenerate tests/fixtures/lm_eval_samples/: lm-evaluation-harness's own `--log_samples` output.

Runs the ``lm_eval`` command of lm-eval 0.4.13 (hf backend, float32, CPU) on SmolLM2-135M (the
folder ``scoring.models.resolve("smollm2-135m")`` converts from its GGUF file, reached through a
link named ``SmolLM2-135M`` so the results file names the model so) for the first ``--limit``
documents of HellaSwag, ARC-Challenge and MMLU abstract_algebra, each lm-eval task pointed at the
local data file (benchmarks/lmeval_reference.py). The sample files are gzipped and the results
file copied as lm-eval wrote them, into ``OUT/SmolLM2-135M/``. tests/test_import_lm_eval.py
imports them and compares with `curate score`.

    nice -n 10 python benchmarks/lm_eval_samples_fixtures.py [--limit 50] [--out tests/fixtures/lm_eval_samples]
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"
MMLU_SUBJECT = "abstract_algebra"
#: our benchmark -> (data file, the lm-eval task run on it)
TASKS = {
    "hellaswag": (SHARED / "hellaswag" / "validation.jsonl.gz", "hellaswag_local"),
    "arc_challenge": (SHARED / "benchmarks" / "arc_challenge" / "validation.jsonl.gz", "arc_challenge_local"),
    "mmlu": (SHARED / "benchmarks" / "mmlu" / "test.jsonl.gz", f"mmlu_{MMLU_SUBJECT}_local"),
}
MODEL_NAME = "SmolLM2-135M"


def run(limit: int, out: Path, batch_size: int = 16) -> list[Path]:
    """Run lm_eval once over the three tasks; the files it wrote, copied (samples gzipped) into out/MODEL_NAME."""
    from benchmarks.lmeval_reference import local_tasks

    def write(folder: Path) -> list[str]:
        for name, (data, _) in TASKS.items():
            local_tasks(folder, name, data)
        return [task for _, task in TASKS.values()]

    return lm_eval_into(write, limit, batch_size, out)


def lm_eval_into(write_tasks, limit: int, batch_size: int, out: Path) -> list[Path]:
    """The ``lm_eval`` command on the tasks ``write_tasks(folder)`` writes there (it returns their
    names) with SmolLM2-135M (hf, float32, CPU, ``--log_samples``); what it wrote, copied
    (samples gzipped) into ``out/MODEL_NAME``."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "tasks").mkdir()
        return _run_and_copy(tmp, write_tasks(tmp / "tasks"), limit, batch_size, out)


def _run_and_copy(tmp: Path, tasks: list[str], limit: int, batch_size: int, out: Path) -> list[Path]:
    from scoring.models import resolve

    model = tmp / MODEL_NAME
    model.symlink_to(resolve("smollm2-135m").path, target_is_directory=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    subprocess.run([str(Path(sys.executable).parent / "lm_eval"), "--model", "hf",
                    "--model_args", f"pretrained={model},dtype=float32", "--tasks", ",".join(tasks),
                    "--include_path", str(tmp / "tasks"), "--limit", str(limit), "--device", "cpu",
                    "--batch_size", str(batch_size), "--log_samples", "--output_path", str(tmp / "out")],
                   check=True, env=env)
    [written] = [d for d in (tmp / "out").iterdir() if d.is_dir()]  # lm-eval's folder for the model
    target = out / MODEL_NAME
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    files = []
    for f in sorted(written.iterdir()):
        if f.suffix == ".jsonl":
            dest = target / (f.name + ".gz")
            with f.open("rb") as src, gzip.GzipFile(dest, "wb", mtime=0) as gz:
                shutil.copyfileobj(src, gz)
        else:
            dest = target / f.name
            shutil.copyfile(f, dest)
        files.append(dest)
    return files


def main(argv=None, *, make=None, limit: int = 50, out: Path = ROOT / "tests" / "fixtures" / "lm_eval_samples",
         doc: str = __doc__):
    """The command line of a fixtures script: ``make(limit, out)`` (default: ``run``), its files listed."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--limit", type=int, default=limit)
    parser.add_argument("--out", type=Path, default=out)
    args = parser.parse_args(argv)
    for f in (make or run)(args.limit, args.out):
        print(f"{f} ({f.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
