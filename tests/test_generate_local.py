"""Generation with the real SmolLM2-135M-Instruct on CPU, on real HellaSwag items: what is stored,
resuming after kill -9, reproducible sampling, and the analyses, filter and export built on it.
Kept small for CI; the 50-item x 3-seed x 2-mode acceptance run is the slow test at the end."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from annotate_helpers import copy_ws, kill_when_stored, small_workspace
from conftest import run_cli
from generate.local import LocalGenerator
from generate.parse import parse_reply
from generate.prompts import shown_options
from generate.run import Generate
from generate.options import GenerateOptions
from generate.store import open_generations, read_generations, read_runs

MODEL = "smollm2-135m"
QUIET = dict(quiet=True)


def stored(root, **kw) -> pd.DataFrame:
    with open_generations(root) as ws:
        return read_generations(ws, **kw)


@pytest.fixture(scope="module")
def gen_ws(tmp_path_factory):
    """3 items x 2 modes x 2 seeds with the numbered template, 3 x 1 x 2 with the question one."""
    ws = small_workspace(tmp_path_factory.mktemp("gen-local") / "ws", 3)
    first = Generate(ws, GenerateOptions(model=MODEL, modes=["full", "zero"], seeds=2, batch_size=8, **QUIET)).run()
    second = Generate(ws, GenerateOptions(model=MODEL, modes=["full"], seeds=2, template="question", batch_size=8,
                                          **QUIET)).run()
    return ws, first, second


def test_every_output_is_stored_with_its_parse_status_and_maps_back(gen_ws):
    ws, first, second = gen_ws
    assert (first["computed"], first["units"], first["remaining"]) == (12, 12, 0)
    assert second["computed"] == 6
    frame = stored(ws)
    assert len(frame) == 18 and not frame.duplicated(["template", "mode", "seed", "item_id"]).any()
    items = {it["item_id"]: it for it in open_generations(ws).items()}
    for r in frame.itertuples():
        again = parse_reply(r.raw, shown_options(items[r.item_id]["options"], r.order))  # stored status is reproducible
        assert (again.status, again.shown) == (r.status, None if pd.isna(r.shown) else r.shown)
        assert sorted(r.order) == [0, 1, 2, 3] and r.gold == items[r.item_id]["gold"]
        if r.status == "unparsed":
            assert pd.isna(r.pred) and pd.isna(r.correct) and r.detail
        else:
            assert r.pred == r.order[r.shown - 1] and r.correct == (r.pred == r.gold)
        assert r.finish in ("eos", "length") and 1 <= r.new_tokens <= 8 and r.attempts == 1
    assert first["strict"] + first["lenient"] + first["unparsed"] == 12
    # the order depends on item and seed only: the same in every mode and template
    orders = frame.groupby(["item_id", "seed"])["order"].apply(lambda s: len({tuple(o) for o in s}))
    assert orders.eq(1).all()


def test_runs_record_their_settings_and_a_second_run_does_nothing(gen_ws):
    ws, first, _ = gen_ws
    with open_generations(ws) as w:
        runs = read_runs(w)
    info = json.loads(runs.set_index("run_id").loc[first["run_id"], "info_json"])
    assert info["settings"] == {"temperature": 0.0, "top_p": 1.0, "max_new_tokens": 8}
    assert info["seeds"] == [0, 1] and info["template"] == "numbered" and info["template_hash"].startswith("sha256:")
    assert info["prompt_format"] == "chat-template" and info["sampling"] == "greedy"
    assert info["identity"]["model_hash"].startswith("sha256:") and info["identity"]["chat_template"]
    assert {"torch", "transformers", "benchcurate", "python"} <= set(info["versions"])
    again = Generate(ws, GenerateOptions(model=MODEL, modes=["full", "zero"], seeds=2, batch_size=8, **QUIET)).run()
    assert (again["computed"], again["cached"], again["remaining"]) == (0, 12, 0)


def test_answers_of_another_dtype_under_one_label_are_refused_until_replaced(gen_ws, tmp_path):
    """A bfloat16 run under the label of float32 answers would replace them one (item, mode, seed)
    at a time and leave the label mixing both: it is refused, naming the run, and --replace
    deletes the label's answers for that template and settings first."""
    from curate.core.errors import CurateError

    ws = copy_ws(gen_ws[0], tmp_path / "ws")
    before = stored(ws)
    with pytest.raises(CurateError, match=r"label 'smollm2-135m' already holds answers \(numbered, t=0,p=1,n=8\) "
                                          r"made otherwise than this run would make them .* or --replace"):
        Generate(ws, GenerateOptions(model=MODEL, modes=["zero"], seeds=1, limit=1, dtype="bfloat16", batch_size=8,
                                     **QUIET)).run()
    pd.testing.assert_frame_equal(stored(ws), before)
    out = run_cli("generate", ws, "--model", MODEL, "--modes", "zero", "--seeds", "1", "--limit", "1",
                  "--dtype", "bfloat16", "--replace", "--quiet").stdout
    after = stored(ws, templates=["numbered"])
    assert len(after) == 1 and after["run_id"].iloc[0] not in set(before["run_id"]), out
    assert len(stored(ws, templates=["question"])) == 6  # another template's answers are not touched


def test_prompts_use_the_chat_template_when_the_model_has_one():
    gen = LocalGenerator(MODEL)  # the weights load only when something is generated
    from generate.prompts import load_template
    tpl = load_template("numbered")
    chat = gen.prompt(tpl, "Pick one.", "Text: x\n\nEndings:\n1. a\n2. b")
    assert chat.startswith("<|im_start|>system\nPick one.<|im_end|>") and chat.endswith("<|im_start|>assistant\n")
    gen.chat = False
    assert gen.prompt(tpl, "Pick one.", "Endings:\n1. a") == "Pick one.\n\nEndings:\n1. a\nAnswer:"
    assert "model" not in gen.__dict__


def test_sampling_is_reproducible_per_item_and_seed_across_batch_sizes(tmp_path):
    """Per-row generators: at temperature 0.9 a unit's reply does not depend on its batch; greedy
    replies do not either; different seeds sample differently."""
    ws = small_workspace(tmp_path / "ws", 2)
    for label, size, temp in (("t-b1", 1, 0.9), ("t-b4", 4, 0.9), ("g-b1", 1, None), ("g-b4", 4, None)):
        Generate(ws, GenerateOptions(model=MODEL, modes=["full"], seeds=2, label=label, batch_size=size,
                                     temperature=temp, max_new_tokens=4, **QUIET)).run()
    frame = stored(ws)
    wide = frame.pivot(index=["item_id", "seed"], columns="model", values="raw")
    assert (wide["t-b1"] == wide["t-b4"]).all() and (wide["g-b1"] == wide["g-b4"]).all()
    assert (wide["t-b1"] != wide["g-b1"]).any()
    assert set(frame.loc[frame["model"] == "t-b1", "settings"]) == {"t=0.9,p=1,n=4"}


def test_killed_run_resumes_losing_at_most_the_batch_in_flight(tmp_path):
    ws = small_workspace(tmp_path / "ws", 4)
    args = ["generate", str(ws), "--modes", "zero", "--seeds", "2", "--batch-size", "2", "--max-new-tokens", "3",
            "--quiet"]
    kill_when_stored(args, ws / "workspace.db", "generations", 2, timeout=300)
    before = stored(ws)
    assert 2 <= len(before) < 8 and len(before) % 2 == 0  # whole batches only
    done = run_cli(*args)
    after = stored(ws)
    assert len(after) == 8 and not after.duplicated(["mode", "seed", "item_id"]).any()
    assert f"{8 - len(before)} answers generated" in done.stdout and f"{len(before)} cached" in done.stdout
    kept = before.set_index("request_key")[["raw", "run_id"]]
    assert after.set_index("request_key").loc[kept.index, ["raw", "run_id"]].equals(kept)


def test_analyze_filter_and_export_use_the_generations(gen_ws, tmp_path):
    ws, _, _ = gen_ws
    ws = copy_ws(ws, tmp_path / "ws")
    from scoring.run import Score
    Score.with_options(ws, model=MODEL, modes=["full", "zero"], quiet=True).run()
    round2 = tmp_path / "round2.csv"
    pd.DataFrame({"original_index": [0, 1, 2], "best_option": ["D", "D", "C"], "worst_option": "A",
                  "equally_good_options": "None", "all_implausible": ["Yes", "No", "Yes"]}).to_csv(round2, index=False)
    run_cli("import-annotations", ws, "--format", "study", "--round", "2", "--file", round2)
    proc = run_cli("analyze", ws, "--out", tmp_path / "report", "--bootstrap", "200")
    assert "generation smollm2-135m full [numbered, t=0,p=1,n=8]: accuracy over 2 seeds" in proc.stdout
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_text())
    g = metrics["generation"]
    assert g["present"] and {r["template"] for r in g["parse"]} == {"numbered", "question"}
    assert len(g["seed_accuracy"]["rows"]) == 6 and len(g["spread"]) == 3
    assert {r["position"] for r in g["position"]} == {1, 2, 3, 4}
    assert {(r["mode"], r["seed"]) for r in g["loglikelihood_agreement"]["rows"]} >= {("full", 0), ("zero", 1)}
    assert {r["n_all_implausible"] for r in g["all_implausible"]} == {2}
    assert len(g["comparisons"]["templates"]["rows"]) == 1 and len(g["comparisons"]["generation_vs_loglikelihood"]["rows"]) == 3
    assert g["comparisons"]["modes"][0]["rows"][0]["alternative"] == "greater"
    report = (tmp_path / "report" / "report.md").read_text()
    assert re.search(r"^## \d+\. Generation$", report, re.M)  # its number is its place among the sections
    for heading in ("### Accuracy per seed", "### Spread over seeds", "### Position bias",
                    "### Generation vs log-likelihood", "### Items annotated all implausible",
                    "### Paired tests: Templates", "### Paired tests: full (a) vs zero (b)"):
        assert heading in report
    assert (tmp_path / "report" / "generation_positions.png").stat().st_size > 1000
    # the filter counts, per item, the seeds answered right
    rules = tmp_path / "rules.yaml"
    rules.write_text("name: gen\nstages:\n  - name: never-right\n    when: {seeds_correct: {model: smollm2-135m, "
                     "mode: full, template: numbered, at_most: 0}}\n")
    run_cli("filter", ws, "--rules", rules, "--out", tmp_path / "dec")
    decisions = pd.read_parquet(tmp_path / "dec" / "decisions.parquet")
    frame = stored(ws, templates=["numbered"], modes=["full"])
    right = frame.assign(r=frame["correct"].fillna(False).astype(bool)).groupby("item_id")["r"].sum()
    assert dict(zip(decisions["item_id"], ~decisions["kept"])) == (right == 0).to_dict()
    summary = json.loads((tmp_path / "dec" / "summary.json").read_text())
    assert {r["template"] for r in summary["inputs"]["generation_runs"]} == {"numbered"}
    # export: one row per record, the documented columns, replies kept
    for ext in ("jsonl", "parquet"):
        run_cli("export", ws, "generations", "--out", tmp_path / f"g.{ext}")
    rows = [json.loads(line) for line in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert len(rows) == 18 and rows[0]["order"] and {"raw", "status", "pred", "correct", "gold_shown"} <= set(rows[0])
    assert len(pd.read_parquet(tmp_path / "g.parquet")) == 18


@pytest.mark.slow
def test_acceptance_50_items_3_seeds_2_modes(tmp_path):
    """The issue's acceptance run: SmolLM2-135M on CPU, 50 HellaSwag items x 3 seeds x 2 modes, end
    to end through the CLI; every output stored with its parse status; the report shows per-seed
    accuracy, the spread and position bias."""
    ws = small_workspace(tmp_path / "ws", 50)
    proc = run_cli("generate", ws, "--modes", "full,zero", "--seeds", "3", "--quiet")
    print(proc.stdout)
    frame = stored(ws)
    assert len(frame) == 300 and frame["status"].isin(["strict", "lenient", "unparsed"]).all()
    assert frame["raw"].notna().all()
    out = run_cli("analyze", ws, "--out", tmp_path / "report")
    print(out.stdout)
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_text())["generation"]
    assert len(metrics["seed_accuracy"]["rows"]) == 6 and len(metrics["spread"]) == 2
    print(json.dumps({k: metrics[k] for k in ("parse", "seed_accuracy", "spread", "position_tests")}, indent=1))
    report = (tmp_path / "report" / "report.md").read_text()
    assert "### Accuracy per seed" in report and "### Spread over seeds" in report and "### Position bias" in report


def test_cached_shared_prefix_gives_the_same_replies_without_deprecation_warnings():
    """The shared prefix's cache reaches transformers under its current keyword: no FutureWarning
    or DeprecationWarning from our call, and greedy replies equal those without the cache."""
    import warnings

    gen = LocalGenerator(MODEL)
    prompts = [gen.prompt(None, "Answer with one word.", q) for q in ("Name a colour.", "Name a fruit, please.")]
    encoded = gen.encode(prompts)
    prefix = gen.shared_prefix(encoded)
    assert prefix > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        cached = gen.generate(encoded, temperature=0, top_p=1, max_new_tokens=4, prefix=prefix)
    plain = gen.generate(encoded, temperature=0, top_p=1, max_new_tokens=4)
    assert [o.text for o in cached] == [o.text for o in plain]


def test_the_command_prints_no_deprecation_warning(tmp_path):
    """`curate generate` with a local model printed transformers' "`past_key_values`/`cache_params`
    are deprecated" (a logged warning, not a Python one) when reading the shared prefix's cache."""
    ws = small_workspace(tmp_path / "ws", 2)
    proc = run_cli("generate", ws, "--model", MODEL, "--modes", "zero", "--seeds", "1", "--max-new-tokens", "4",
                   "--quiet")
    assert len(stored(ws)) == 2, proc.stdout
    assert "deprecated" not in proc.stderr.lower(), proc.stderr
