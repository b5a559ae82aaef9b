"""The audit config: the embedded defaults, the examples docs/stages/audit.md describes, and a
clear error for each kind of mistake, naming the file and the dotted path of the bad key."""
from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest
import yaml

import schemas
from conftest import PAPER_SCORES, ROOT, one_line_error, run_cli
from curate import demo
from curate.audit.config import DEFAULT_CONFIG, config_problems, describe, load_config, missing_inputs, read_yaml
from curate.audit.stages.ingest import resolved
from curate.audit.stages.release import target
from curate.core.errors import InputError
from curate.items.canonical import MODES
from scoring.model_spec import backend_named

EXAMPLES = sorted((ROOT / "examples" / "audit").glob("*.yaml"))


def test_embedded_defaults_are_the_offline_demo(tmp_path):
    config = load_config(cwd=tmp_path, check_files=False)
    assert config.file == DEFAULT_CONFIG.resolve() == demo.config_path().resolve()
    # inputs resolve beside the config file, outputs under the directory curate runs in
    [source], [rules] = config.options("ingest"), config.options("filter")
    assert Path(source.options.data) == demo.benchmark_path().resolve()
    assert rules.rules == demo.rules_path().resolve()
    assert config.workspace == tmp_path / "demo-out" / "workspace"
    [release] = config.options("release")
    assert target(release.to) == ("local", tmp_path / "demo-out" / "release")
    rounds = config.options("annotate")
    assert [(o.annotator, backend_named(o.annotator, "")[0], o.round) for o in rounds] == [
        ("local:smollm2-135m", "local", 1), ("local:smollm2-135m", "local", 2)]
    [scoring] = config.options("score")
    assert scoring.model == "smollm2-135m"
    assert scoring.modes == ["full", "zero", "choice-only"]
    assert (scoring.dtype, scoring.device) == ("float32", "cpu")
    assert missing_inputs(config) == []
    assert (rules.annotator, rules.tokenizer) == (None, None)
    plan = "\n".join(describe(config))
    assert "local:smollm2-135m rounds 1, 2" in plan and "demo-clean 0.1.0 -> local" in plan


def test_embedded_adapter_reads_the_demo_rows(tmp_path):
    [source] = load_config(cwd=tmp_path, check_files=False).options("ingest")
    adapter = source.adapter
    row = json.loads(demo.benchmark_path().read_text().splitlines()[0])
    item = adapter.to_item(row, 0, resolved(source)["split"])
    assert item["item_id"] == "demo/validation/0"
    assert item["prompts"]["full"] == f"{row['topic']}: {row['context']} {row['start']}"
    assert item["prompts"]["zero"] == row["start"] and item["options"] == row["endings"]
    assert item["native_ids"] == {"id": row["id"]} and item["source"] == row["domain"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_documented_examples_validate(example, tmp_path):
    config = load_config(example, cwd=tmp_path, check_files=False)
    assert config.options("ingest")[0].named in ("hellaswag", "generic")


def test_examples_cover_hub_claude_batches_and_each_release_target(tmp_path):
    configs = [load_config(p, cwd=tmp_path, check_files=False) for p in EXAMPLES]
    claude = [a for c in configs for a in c.options("annotate") if a.annotator.startswith("anthropic:")]
    assert claude and all(a.batch for a in claude)
    assert {target(r.to)[0] for c in configs for r in c.options("release")} == {"hub", "git", "local"}
    assert any(not s.local and s.options.data == "Rowan/hellaswag" and s.options.revision
               for c in configs for s in c.options("ingest"))


def test_schema_enums_match_the_code():
    audit = schemas.load("audit")
    assert audit["$defs"]["scoring"]["properties"]["modes"]["items"]["enum"] == list(MODES)
    assert schemas.load("plants")["$defs"]["kind"]["enum"] == list(demo.KINDS)


@pytest.fixture
def base(tmp_path):
    """The demo config as a dict, with input paths made absolute so it loads from tmp_path."""
    data = read_yaml(DEFAULT_CONFIG)
    data["benchmark"]["path"] = str(demo.benchmark_path())
    rules = tmp_path / "rules.yaml"
    rules.write_text("stages: []\n")
    data["filter"]["rules"] = str(rules)
    return data


def load_changed(tmp_path, data, change):
    data = copy.deepcopy(data)
    change(data)
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_config(path, cwd=tmp_path)


def _set(*keys_then_value):
    """Set data[k1][k2]... = value (the last argument)."""
    *keys, value = keys_then_value

    def change(data):
        target = data
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return change


def _delete(*keys):
    def change(data):
        target = data
        for key in keys[:-1]:
            target = target[key]
        del target[keys[-1]]
    return change


BAD = [
    ("unknown key", _set("scoring", "batch_token", 512), "scoring.batch_token", "unknown key; expected one of: models"),
    ("misspelled mode", _set("scoring", "modes", ["full", "fulll"]), "scoring.modes[1]", "'fulll' is not one of"),
    ("repeated mode", _set("scoring", "modes", ["full", "full"]), "scoring.modes", "non-unique"),
    ("no models", _set("scoring", "models", []), "scoring.models", "should be non-empty"),
    ("bad device", _set("scoring", "device", "gpu"), "scoring.device", "cuda, cuda:N, mps, or auto"),
    ("negative self-check", _set("scoring", "self_check", -1), "scoring.self_check", "less than the minimum of 0"),
    ("bad dtype", _set("scoring", "dtype", "fp8"), "scoring.dtype", "'fp8' is not one of"),
    ("annotator with a space", _set("annotators", 0, "annotator", "local:smollm2 135m"), "annotators[0].annotator",
     "anthropic:MODEL"),
    ("annotator with no name", _set("annotators", 0, "annotator", "local:"), "annotators[0].annotator", "anthropic:MODEL"),
    ("annotator twice, once bare", lambda d: d["annotators"].append({"annotator": "smollm2-135m", "rounds": [2]}),
     "annotators[1].annotator", "listed twice (also annotators[0])"),
    ("round 3", _set("annotators", 0, "rounds", [1, 3]), "annotators[0].rounds[1]", "3 is not one of [1, 2]"),
    ("batch on a local model", _set("annotators", 0, "batch", True), "annotators[0].batch", "anthropic: annotators only"),
    ("negative budget", _set("annotators", 0, "max_cost", -5), "annotators[0].max_cost", "less than or equal to the minimum"),
    ("NaN budget", _set("annotators", 0, "max_cost", float("nan")), "annotators[0].max_cost", "give a finite number"),
    ("infinite budget", _set("annotators", 0, "max_cost", float("inf")), "annotators[0].max_cost", "give a finite number"),
    ("Claude model without a price", _set("annotators", 0, "annotator", "anthropic:claude-2"), "annotators[0].annotator",
     "no price known for model 'claude-2'"),
    ("annotator twice", lambda d: d["annotators"].append({"annotator": "local:smollm2-135m", "rounds": [2]}),
     "annotators[1].annotator", "listed twice (also annotators[0])"),
    ("missing workspace", _delete("workspace"), "workspace", "missing (required)"),
    ("missing rounds", _delete("annotators", 0, "rounds"), "annotators[0].rounds", "missing (required)"),
    ("path and hub", _set("benchmark", "hub", "Rowan/hellaswag"), "benchmark", "exactly one of 'path'"),
    ("neither path nor hub", _delete("benchmark", "path"), "benchmark", "exactly one of 'path'"),
    ("revision of a file", _set("benchmark", "revision", "abc123"), "benchmark.revision", "needs 'hub'"),
    ("generic without columns", _delete("benchmark", "columns"), "benchmark.columns", "needs a column mapping"),
    ("columns for hellaswag", _set("benchmark", "adapter", "hellaswag"), "benchmark.columns", "takes no column mapping"),
    ("unknown adapter", _set("benchmark", "adapter", "mmlu_pro"), "benchmark.adapter", "'mmlu_pro' is not one of"),
    ("zero limit", _set("benchmark", "limit", 0), "benchmark.limit", "less than the minimum of 1"),
    ("column typo", _set("benchmark", "columns", "anwser", "label"), "benchmark.columns.anwser", "unknown key"),
    ("choices a number", _set("benchmark", "columns", "choices", 4), "benchmark.columns.choices", "is not of type"),
    ("release without filter", _delete("filter"), "release", "add a 'filter' section"),
    ("two release targets", _set("release", "target", {"local": "a", "hub": "me/x"}), "release.target",
     "exactly one of: local, git, hub"),
    ("no release target", _set("release", "target", {}), "release.target", "exactly one of: local, git, hub"),
    ("short version", _set("release", "version", "1.0"), "release.version", "'1.0' is not valid here"),
    ("leading zero", _set("release", "version", "1.02.0"), "release.version", "'1.02.0' is not valid here"),
    ("capital name", _set("release", "name", "Demo"), "release.name", "'Demo' is not valid here: Release name"),
    ("hub target without org", _set("release", "target", {"hub": "goldenswag"}), "release.target.hub", "not valid here"),
    ("analyze without out", _set("analyze", {}), "analyze.out", "missing (required)"),
    ("models without modes", _delete("scoring", "modes"), "scoring", "'modes' is a dependency of 'models'"),
    ("nothing to score", _set("scoring", {"dtype": "float32"}), "scoring", "give models (with modes) to score, imports"),
    ("unknown import format", _set("scoring", "imports", [{"format": "lm-eval", "dir": "x"}]),
     "scoring.imports[0].format", "'lm-eval' is not one of ['lm-eval-samples', 'study-csv']"),
    ("import without dir", _set("scoring", "imports", [{"format": "study-csv"}]), "scoring.imports[0].dir",
     "missing (required)"),
    ("import dir missing", _set("scoring", "imports", [{"format": "study-csv", "dir": "no/scores"}]),
     "scoring.imports[0].dir", "no such file or folder"),
    ("filter reads another annotator", _set("filter", "annotator", "anthropic:claude-haiku-4-5"), "filter.annotator",
     "not one of this audit's annotators (local:smollm2-135m)"),
    # JSON Schema's integer admits 1.0; Python's islice and the prompt file names do not
    ("a limit written as a float", _set("benchmark", "limit", 3.0), "benchmark.limit", "is not of type 'integer'"),
    ("a round written as a float", _set("annotators", 0, "rounds", [1.0]), "annotators[0].rounds[0]",
     "is not of type 'integer'"),
    # stages writing one folder, or into another's: the audit would stop half-way
    ("analyze and filter share a folder", _set("filter", "out", "demo-out/report"), "analyze.out",
     "the same folder as filter.out"),  # the filter runs first, so its folder is named first
    ("release inside the decisions", lambda d: (d["filter"].__setitem__("out", "dec"),
                                                d["release"].__setitem__("target", {"local": "dec/releases"})),
     "release.target.local", "inside filter.out"),
    ("workspace inside the report", _set("workspace", "demo-out/report/ws"), "analyze.out", "holds workspace"),
]


@pytest.mark.parametrize("why, change, field, message", BAD, ids=[b[0] for b in BAD])
def test_bad_config_names_the_key(tmp_path, base, why, change, field, message):
    with pytest.raises(InputError) as caught:
        load_changed(tmp_path, base, change)
    assert caught.value.path == str(tmp_path / "audit.yaml")
    assert caught.value.field == field, caught.value
    assert message in caught.value.detail, caught.value


def test_release_targets_as_release_takes_them(tmp_path, base):
    specs = {}
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)  # a git target must exist
    for kind, value in (("local", "out/rel"), ("git", "repo"), ("hub", "me/demo-clean")):
        config = load_changed(tmp_path, base, _set("release", "target", {kind: value}))
        specs[kind] = config.options("release")[0].to
    assert specs == {"local": str(tmp_path / "out" / "rel"), "git": f"git:{tmp_path / 'repo'}",
                     "hub": "hf:me/demo-clean"}
    from curate.release.targets import GitTarget, HubTarget, LocalTarget, parse_target
    assert [type(parse_target(specs[k])) for k in ("local", "git", "hub")] == [LocalTarget, GitTarget, HubTarget]


def test_scoring_on_several_devices_and_its_self_check(tmp_path, base):
    """``device: auto`` with ``max_memory`` and ``self_check`` reach ``curate score`` as its
    --device, --max-memory and --self-check."""
    def change(data):
        data["scoring"].update(device="auto", max_memory="0=70GiB,1=70GiB,cpu=100GiB,disk", self_check=5)
    [scoring] = load_changed(tmp_path, base, change).options("score")
    assert (scoring.device, scoring.max_memory, scoring.self_check) == ("auto", "0=70GiB,1=70GiB,cpu=100GiB,disk", 5)
    assert load_changed(tmp_path, base, lambda d: None).options("score")[0].self_check == 2


def test_vllm_settings_reach_the_vllm_backend(tmp_path, base):
    """vLLM's settings are scoring keys (the same table as `curate score -o`), passed to the vllm
    backend's options object as given, and defaulted as -o defaults them."""
    def change(data):
        data["scoring"].update(backend="vllm", tensor_parallel_size=8, gpu_memory_utilization=0.85,
                               max_model_len=4096, enable_prefix_caching=True, enforce_eager="false",
                               server="http://head:8000", tokens_per_call=1000)
    [options] = load_changed(tmp_path, base, change).options("score")
    assert options.model == "smollm2-135m"
    assert (options.backend, options.tensor_parallel_size, options.gpu_memory_utilization, options.max_model_len,
            options.enable_prefix_caching, options.enforce_eager, options.server, options.tokens_per_call) == (
        "vllm", 8, 0.85, 4096, True, False, "http://head:8000", 1000)
    [defaults] = load_changed(tmp_path, base, _set("scoring", "backend", "vllm")).options("score")
    assert (defaults.tensor_parallel_size, defaults.enforce_eager, defaults.max_model_len) == (1, True, None)


@pytest.mark.parametrize("backend, key, value", [("engine", "tensor_parallel_size", 2),
                                                 ("engine", "server", "http://head:8000"),
                                                 ("vllm", "prefix_cache_mb", 64)])
def test_a_setting_of_another_backend_is_refused(tmp_path, base, backend, key, value):
    """A backend's own setting given for models that run on another backend would be ignored:
    check-config names it, as `curate score -o` does."""
    def change(data):
        data["scoring"].update({"backend": backend, key: value})
    with pytest.raises(InputError) as caught:
        load_changed(tmp_path, base, change)
    assert caught.value.field == f"scoring.{key}"
    other = "vllm" if backend == "engine" else "engine"
    assert f"is a setting of the {other} backend; scoring.backend is {backend}" in caught.value.detail


def test_filter_may_read_a_reviewers_verdicts(tmp_path, base):
    cfg = load_changed(tmp_path, base, _set("filter", "annotator", "human:alice"))
    assert cfg.options("filter")[0].annotator == "human:alice"


def test_a_bare_local_model_name_is_an_annotator_as_on_the_command_line(tmp_path, base):
    """One model grammar for every stage (scoring.model_spec): `curate annotate --annotator
    smollm2-135m` and a config's bare name mean local:smollm2-135m, stored and matched so."""
    def change(data):
        data["annotators"][0]["annotator"] = "smollm2-135m"
        data["filter"]["annotator"] = "local:smollm2-135m"  # the filter reads the records by their stored name
    config = load_changed(tmp_path, base, change)
    [annotator] = {(o.annotator, backend_named(o.annotator, "")[0]) for o in config.options("annotate")}
    assert annotator == ("local:smollm2-135m", "local")


def test_filter_overrides_reach_the_filter(tmp_path, base):
    def change(data):
        data["filter"].update(annotator="local:smollm2-135m", tokenizer="smollm2-135m")
    config = load_changed(tmp_path, base, change)
    [rules] = config.options("filter")
    assert {"annotator": rules.annotator, "tokenizer": rules.tokenizer} == {"annotator": "local:smollm2-135m",
                                                                            "tokenizer": "smollm2-135m"}


def test_every_problem_is_listed(base):
    data = copy.deepcopy(base)
    data["scoring"]["modes"] = ["fulll"]
    data["release"]["version"] = "one"
    data["colour"] = "blue"
    keys = [key for key, _ in config_problems(data)]
    assert keys == ["colour", "release.version", "scoring.modes[0]"]


def test_missing_input_files_are_named(tmp_path, base):
    with pytest.raises(InputError) as caught:
        load_changed(tmp_path, base, _set("benchmark", "path", "data/nowhere.jsonl"))
    assert caught.value.field == "benchmark.path" and "nowhere.jsonl" in caught.value.detail
    with pytest.raises(InputError) as caught:
        load_changed(tmp_path, base, _set("filter", "rules", "no-rules.yaml"))
    assert caught.value.field == "filter.rules"


def test_relative_inputs_follow_the_config_file(tmp_path, base):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "b.jsonl").write_text(demo.benchmark_path().read_text())
    config = load_changed(tmp_path, base, _set("benchmark", "path", "data/b.jsonl"))
    assert Path(config.options("ingest")[0].options.data) == tmp_path / "data" / "b.jsonl"


@pytest.mark.parametrize("text, message", [
    ("workspace: ws\nbenchmark: [unclosed\n", "not valid YAML: line 3"),
    ("workspace: a\nworkspace: b\n", "'workspace' appears twice (lines 1 and 2)"),
    ("- just\n- a list\n", "expected a YAML mapping of settings, got list"),
    ("", "expected a YAML mapping of settings, got NoneType"),
])
def test_unreadable_yaml(tmp_path, text, message):
    path = tmp_path / "audit.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        load_config(path)


def test_missing_config_file(tmp_path):
    with pytest.raises(InputError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_check_config_cli(tmp_path, base):
    good = run_cli("check-config", "--no-files", cwd=tmp_path)
    assert "score      smollm2-135m on full, zero, choice-only" in good.stdout
    bad = copy.deepcopy(base)
    bad["scoring"]["modes"] = ["fulll"]
    bad["annotators"][0]["annotator"] = "anthropic:"  # a backend with no model name
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(bad))
    proc = run_cli("check-config", path, cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"error: {path}, field 'annotators[0].annotator':")
    assert lines[1].startswith(f"error: {path}, field 'scoring.modes[0]': 'fulll' is not one of")


def test_schema_defaults_are_the_loaders_defaults():
    """The schema documents each default; the dataclasses apply them. They must agree."""
    import dataclasses

    from annotate.options import AnnotateOptions as Annotator
    from curate.items.ingest_options import IngestOptions as Benchmark
    from scoring.options import ScoreOptions  # the scoring section's values become the score stage's options

    defs = schemas.load("audit")["$defs"]
    for cls, name in ((Benchmark, "benchmark"), (Annotator, "annotator"), (ScoreOptions, "scoring")):
        for f in dataclasses.fields(cls):
            if f.name not in defs[name]["properties"]:  # the stage's own, not a config key (model, label, ...)
                continue
            documented = defs[name]["properties"][f.name].get("default", dataclasses.MISSING)
            if documented is not dataclasses.MISSING:
                assert documented == f.default, (name, f.name)
    # The split has no one default: a built-in's own (MMLU: test), else validation (the schema used
    # to say validation for every benchmark, which a built-in's audit did not do).
    assert "default" not in defs["benchmark"]["properties"]["split"]
    assert dataclasses.fields(Benchmark)[[f.name for f in dataclasses.fields(Benchmark)].index("split")].default is None


def test_plan_of_the_claude_example(tmp_path):
    config = load_config(ROOT / "examples" / "audit" / "hellaswag-claude.yaml", cwd=tmp_path, check_files=False)
    plan = describe(config)
    assert plan[1] == "ingest     hellaswag: Rowan/hellaswag@<COMMIT-SHA> (split validation)"
    assert plan[2] == "annotate   anthropic:claude-sonnet-4-6 rounds 1, 2 (batch API, concurrency 4, max $150/round)"
    assert plan[3] == f"score      import study-csv scores from {PAPER_SCORES.resolve()}"
    assert plan[-1] == "release    goldenswag 1.0.0 -> hub your-org/goldenswag"
    assert config.options("release")[0].to == "hf:your-org/goldenswag"


# --- plan completeness: every input the rules read will exist -----------------------------------

PINNED = "6002345709e0801764318f06bf06ce1e7d1a1fe3"  # a dataset commit id of the right shape
#: The keys the Claude example's stages need (a key is checked before anything is spent).
KEYS = {"ANTHROPIC_API_KEY": "sk-unused", "HF_TOKEN": "hf_unused"}


def example_in(tmp_path, change) -> "Path":
    """The GoldenSwag example with its input paths made absolute, changed, written to tmp_path."""
    example = ROOT / "examples" / "audit" / "hellaswag-claude.yaml"
    data = read_yaml(example)
    data["benchmark"]["revision"] = PINNED  # the example's <COMMIT-SHA> filled in
    data["filter"]["rules"] = str((example.parent / data["filter"]["rules"]).resolve())
    data["scoring"]["imports"][0]["dir"] = str(PAPER_SCORES)
    change(data)
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_plan_names_every_missing_input(tmp_path):
    from curate.audit.plan import plan_problems

    def change(data):
        data["annotators"][0]["rounds"] = [2]
        data["scoring"] = {"models": ["smollm2-135m", str(tmp_path / "no-model")], "modes": ["full", "zero"]}
        data["filter"]["tokenizer"] = "meta-llama/Llama-3.2-1B"   # not cached, and the Hub is offline here
    problems = plan_problems(load_config(example_in(tmp_path, change), cwd=tmp_path))
    by_key = {}
    for key, message in problems:
        by_key.setdefault(key, []).append(message)
    assert by_key["scoring.models[1]"] == [f"{str(tmp_path / 'no-model')!r} cannot be found: no such file or folder: "
                                           f"{tmp_path / 'no-model'}"]
    [annotation] = by_key["filter.annotator"]
    assert annotation.startswith("stages 'prompt-quality', 'correct-quality', 'incorrect-ungrammatical' of "
                                 "goldenswag.yaml read anthropic:claude-sonnet-4-6's round 1 records, which no "
                                 "planned annotator provides (planned: anthropic:claude-sonnet-4-6 round 2)")
    [tokenizer] = by_key["filter.tokenizer"]
    assert tokenizer.startswith("stages 'length-spread', 'gold-longest' of goldenswag.yaml count tokens with "
                                "'meta-llama/Llama-3.2-1B', which cannot be found: a Hub id that is not in the local")
    scores = by_key["scoring"]
    assert len(scores) == 10 and all("stage 'zero-prompt-core' of goldenswag.yaml read zero-mode seq_mean scores"
                                     in m for m in scores)
    # SmolLM2-135M is scored in zero mode, but is not one of the ten models the stage names
    assert "'meta-llama/Llama-3.2-1B', which no planned stage provides (nothing scores or imports" in " ".join(scores)


def test_plan_counts_what_the_workspace_already_holds(tmp_path):
    """Scores imported by hand before the audit count: the plan needs no import step."""
    from curate.items.adapters import get_adapter
    from curate.audit.plan import plan_problems
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from scoring.study_csv import import_study_csv
    from conftest import HELLASWAG

    scores = tmp_path / "scores"
    for src in PAPER_SCORES.glob("zero_prompt/*.csv"):
        (scores / "zero_prompt").mkdir(parents=True, exist_ok=True)
        with src.open() as fh:
            (scores / "zero_prompt" / src.name).write_text("".join(next(fh) for _ in range(4)))
    Ingest(tmp_path / "ws", IngestOptions(data=str(HELLASWAG), limit=3), get_adapter("hellaswag")).run()
    import_study_csv(tmp_path / "ws", scores)

    def change(data):
        del data["scoring"]
        data["workspace"] = str(tmp_path / "ws")
    assert plan_problems(load_config(example_in(tmp_path, change), cwd=tmp_path)) == []


def test_audit_refuses_an_incomplete_plan_before_anything_runs(tmp_path):
    config = example_in(tmp_path, lambda data: data.pop("scoring"))
    env = {**KEYS, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    proc = run_cli("audit", config, cwd=tmp_path, check=False, env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(lines) == 10
    assert all(line.startswith(f"error: {config}, field 'scoring': stage 'zero-prompt-core'") for line in lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.yaml"]  # no workspace, nothing else
    check = run_cli("check-config", config, cwd=tmp_path, check=False, env=env)
    offline = "".join(line + "\n" for line in check.stderr.splitlines() if line.startswith("note: cannot check offline"))
    assert check.returncode == 2 and check.stderr == offline + proc.stderr


def test_a_builtin_without_path_or_hub_names_its_own_hub_id_in_the_plan(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("workspace: ws\nbenchmark: {adapter: arc_easy}\n")
    assert describe(load_config(path, cwd=tmp_path, check_files=False))[1] == \
        "ingest     arc_easy: allenai/ai2_arc@unpinned (split validation)"


def test_plan_names_scores_in_another_formulation_rotations_and_generations(tmp_path, base):
    """Rules reading letters scores, rotated letters or generated answers, where the audit
    scores cloze only and generates nothing: each is a gap named before anything is spent."""
    from curate.audit.plan import plan_problems, plan_summary

    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "name: r\nstages:\n"
        "  - {name: letters, when: {correct: {models: [smollm2-135m], mode: full, normalization: sum, "
        "formulation: letters, at_least: 1}}}\n"
        "  - {name: rotated, when: {rotated_correct: {models: [smollm2-135m], mode: full, normalization: sum, "
        "at_least: 0.5}}}\n"
        "  - {name: seeds, when: {seeds_correct: {model: smollm2-135m, mode: zero, at_least: 2}}}\n"
        "  - {name: cloze, when: {correct: {models: [smollm2-135m], mode: full, normalization: sum, at_least: 1}}}\n")
    cfg = load_changed(tmp_path, base, _set("scoring", "formulations", ["cloze"]))
    problems = dict((message.split(" of ")[0], (key, message)) for key, message in plan_problems(cfg))
    assert "in the letters formulation" in problems["stage 'letters'"][1]
    assert "in the letters+rotations formulation" in problems["stage 'rotated'"][1]
    assert problems["stage 'seeds'"][0] == "filter.rules" and "run `curate generate` first" in problems["stage 'seeds'"][1]
    assert "stage 'cloze'" not in problems and len(problems) == 3
    planned = load_changed(tmp_path, base, _set("scoring", "formulations", ["cloze", "letters+rotations"]))
    assert sorted(problems_of := [m.split(" of ")[0] for _, m in plan_problems(planned)]) == ["stage 'seeds'"], problems_of
    assert plan_summary(load_changed(tmp_path, base, _set("scoring", "formulations", ["cloze"]))).startswith("plan")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA: device cuda is fine here")
def test_a_device_this_machine_lacks_is_a_plan_problem(tmp_path, base):
    """`device: cuda` on a machine without CUDA fails in check-config and before the audit's
    first stage, not when the score stage loads the model after ingest and annotation."""
    data = copy.deepcopy(base)
    data["scoring"]["device"] = "cuda"
    data["filter"]["rules"] = str(demo.rules_path())
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(data))
    message = f"error: {path}, field 'scoring.device': device cuda: CUDA is not available here"
    for proc in (run_cli("check-config", path, cwd=tmp_path, check=False),
                 run_cli("check-config", path, "--no-files", cwd=tmp_path, check=False),
                 run_cli("audit", path, cwd=tmp_path, check=False)):
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.yaml", "rules.yaml"]  # the audit made nothing


def test_a_rotation_no_item_has_is_stopped_right_after_ingest(tmp_path):
    """`letters+r7` for 4-option items: check-config says so once the workspace holds its items;
    a fresh audit stops right after its ingest stage, before annotating or scoring anything."""
    config = yaml.safe_load(demo.config_path().read_text())
    config["benchmark"].update(path=str(demo.benchmark_path()), limit=3)
    config["scoring"]["formulations"] = ["cloze", "letters+r7"]
    config["filter"]["rules"] = str(demo.rules_path())
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = run_cli("audit", path, cwd=tmp_path, check=False)
    message = (f"{path}, field 'scoring.formulations': letters+r7 applies to no item: a rotation letters+rK needs "
               f"more than K options, and the workspace's items have at most 4")
    assert proc.returncode == 1 and message in proc.stdout and "audit stopped" in proc.stdout
    assert "[2/" not in proc.stdout  # no stage after ingest ran
    db = tmp_path / "demo-out" / "workspace" / "workspace.db"
    import sqlite3
    tables = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "annotations" not in tables and "scores" not in tables
    check = run_cli("check-config", path, cwd=tmp_path, check=False)
    assert check.returncode == 2 and f"error: {message}" in check.stderr


def test_check_config_refuses_a_thinking_model_and_notes_a_retiring_one(tmp_path):
    """The annotator's model is checked with the config, before any stage runs: a model that
    thinks by default is an error naming the key; one the anthropic SDK lists as retiring is
    planned as usual, with a note giving the date."""
    from anthropic.resources.messages.messages import DEPRECATED_MODELS

    def model(name):
        def change(data):
            data["annotators"][0]["annotator"] = data["filter"]["annotator"] = f"anthropic:{name}"
        return change
    refused = run_cli("check-config", example_in(tmp_path, model("claude-opus-5-5")), "--no-files", cwd=tmp_path,
                      check=False)
    assert refused.returncode == 2 and "field 'annotators[0].annotator': model 'claude-opus-5-5' is not supported: " \
                                       "it thinks by default" in refused.stderr
    retiring = run_cli("check-config", example_in(tmp_path, model("claude-sonnet-4-5")), "--no-files", env=KEYS,
                       cwd=tmp_path)
    assert "annotate   anthropic:claude-sonnet-4-5 rounds 1, 2" in retiring.stdout
    assert f"note: claude-sonnet-4-5 reaches its end of life on {DEPRECATED_MODELS['claude-sonnet-4-5']}" in retiring.stderr
    current = run_cli("check-config", example_in(tmp_path, model("claude-sonnet-4-6")), "--no-files", env=KEYS,
                      cwd=tmp_path)
    assert "note:" not in current.stderr


@pytest.mark.parametrize("key, value, message", [
    ("backend", "VLLM", "'VLLM': no such scoring backend; known: engine, reference, vllm"),
    ("gpu_memory_utilization", float("nan"), "nan: is not a finite number"),
    ("gpu_memory_utilization", float("inf"), "inf is greater than the maximum of 1"),  # the schema's range
])
def test_every_stages_options_are_checked_before_any_stage_runs(tmp_path, base, key, value, message):
    """Issue 44, fail 9: `backend: VLLM` and `gpu_memory_utilization: .nan` passed check-config as
    "plan complete"; the audit stopped only at its score stage, after ingest and the (paid)
    annotation, naming the command's flag. Now each section becomes its stage's options object
    when the config is read: check-config and audit refuse it, naming the config key."""
    data = copy.deepcopy(base)
    data["scoring"].update({"backend": "vllm"} if key != "backend" else {}, **{key: value})
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(data))
    for command in ("check-config", "audit"):
        line = one_line_error(run_cli(command, path, cwd=tmp_path, check=False))
        assert line == f"error: {path}, field 'scoring.{key}': {message}" or (
            line.startswith(f"error: {path}, field 'scoring.{key}': ") and message in line), line
        assert "--" not in line.split("': ", 1)[1]  # no command-line flag named
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.yaml", "rules.yaml"]  # nothing ran
