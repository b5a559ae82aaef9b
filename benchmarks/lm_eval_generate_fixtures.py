"""Regenerate tests/fixtures/lm_eval_generate/: lm-evaluation-harness's own `--log_samples` output
of a multiple-choice task answered by generation (``generate_until``).

Runs the ``lm_eval`` command of lm-eval 0.4.13 (hf backend, float32, CPU) on SmolLM2-135M (reached
through a link named ``SmolLM2-135M``, as benchmarks/lm_eval_samples_fixtures.py does) for the
first ``--limit`` documents of lm-eval's ``arc_challenge_chat`` task (the question and lettered
options in the prompt, the answer generated after "The best answer is", its filter
``remove_whitespace``), pointed at the local ARC-Challenge file. The sample file is gzipped and the
results file copied as lm-eval wrote them, into ``OUT/SmolLM2-135M/``.
tests/test_import_answers.py imports them with `curate import-answers --format lm-eval-generate`.

    nice -n 10 python benchmarks/lm_eval_generate_fixtures.py [--limit 20] [--out tests/fixtures/lm_eval_generate]
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"
DATA = SHARED / "benchmarks" / "arc_challenge" / "validation.jsonl.gz"
TASK = "arc_challenge_chat"
MODEL_NAME = "SmolLM2-135M"


def run(limit: int, out: Path) -> list[Path]:
    """Run lm_eval once; the files it wrote, copied (samples gzipped) into out/MODEL_NAME."""
    import lm_eval

    from benchmarks.lmeval_reference import _yaml
    from benchmarks.lm_eval_samples_fixtures import lm_eval_into

    def write(folder: Path) -> list[str]:
        builtin = Path(lm_eval.__file__).parent / "tasks" / "arc" / f"{TASK}.yaml"
        (folder / f"{TASK}_local.yaml").write_text(_yaml(builtin, f"{TASK}_local", DATA))
        return [f"{TASK}_local"]

    return lm_eval_into(write, limit, 8, out)


def main(argv=None):
    from benchmarks.lm_eval_samples_fixtures import main as fixtures_main

    fixtures_main(argv, make=run, limit=20, out=ROOT / "tests" / "fixtures" / "lm_eval_generate", doc=__doc__)


if __name__ == "__main__":
    main()
