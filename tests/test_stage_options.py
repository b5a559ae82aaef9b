"""Each stage's options are declared once (its ``options.py`` table); the command, the audit
config's schema file, and the options object must all say what the table says."""
from __future__ import annotations

import dataclasses
import inspect
import json
import re

import click
import pytest
from click.testing import CliRunner

from conftest import run_cli
from scoring.model_spec import backend_named
from curate.core.options import Option, click_options, schema_properties
from schemas import SCHEMA_DIR


def _stages():
    """(command, table, options object (or function), {option: its keyword}, audit section, config class)."""
    from annotate.cli import annotate
    from annotate.options import ANNOTATE, AnnotateOptions
    from curate.analyses.cli import analyze
    from curate.analyses.options import ANALYZE, AnalyzeOptions
    from curate.items.cli import init
    from curate.filter.cli import filter_command
    from curate.filter.options import FILTER, FilterOptions
    from curate.items.duplicates.cli import duplicates
    from curate.items.duplicates.options import DUPLICATES, DuplicatesOptions
    from curate.items.ingest_options import INGEST, IngestOptions
    from generate.cli import generate
    from generate.options import GENERATE, GenerateOptions
    from curate.plant.cli import evaluate as plant_evaluate
    from curate.plant.cli import new as plant_new
    from curate.plant.evaluate import evaluate_workspace
    from curate.plant.options import EVALUATE, PLANT, PlantOptions
    from curate.release.cli import create as release_create
    from curate.release.options import RELEASE, ReleaseOptions
    from scoring.cli import score, text_scores
    from scoring.options import SCORE, TEXT_SCORES, ScoreOptions, TextScoresOptions
    from scoring.answer_options import IMPORT_ANSWERS, ImportAnswersOptions
    from scoring.import_cli import import_answers, import_scores
    from scoring.import_options import IMPORT_SCORES, ImportScoresOptions

    return {
        "init": (init, INGEST, IngestOptions, {}, "benchmark", IngestOptions),
        "release": (release_create, RELEASE, ReleaseOptions, {}, "release", ReleaseOptions),
        "score": (score, SCORE, ScoreOptions, {}, "scoring", ScoreOptions),
        "text-scores": (text_scores, TEXT_SCORES, TextScoresOptions, {}, None, None),
        "annotate": (annotate, ANNOTATE, AnnotateOptions, {}, "annotator", AnnotateOptions),
        "generate": (generate, GENERATE, GenerateOptions, {}, None, None),
        "duplicates": (duplicates, DUPLICATES, DuplicatesOptions, {}, None, None),
        "analyze": (analyze, ANALYZE, AnalyzeOptions, {}, None, None),
        "filter": (filter_command, FILTER, FilterOptions, {}, "filter", None),
        "plant": (plant_new, PLANT, PlantOptions, {}, None, None),
        "plant evaluate": (plant_evaluate, EVALUATE, evaluate_workspace, {"json_output": None}, None, None),
        "import-answers": (import_answers, IMPORT_ANSWERS, ImportAnswersOptions, {}, "answer_import",
                           ImportAnswersOptions),
        "import-scores": (import_scores, IMPORT_SCORES, ImportScoresOptions, {}, "score_import", ImportScoresOptions),
    }


STAGES = list(_stages())


def _params(command) -> dict[str, click.Parameter]:
    return {p.name: p for p in command.params}


@pytest.mark.parametrize("stage", STAGES)
def test_the_command_takes_each_option_as_declared(stage):
    command, table, *_ = _stages()[stage]
    params = _params(command)
    for o in table:
        p = params[o.name]
        assert o.spelling in p.opts and p.hidden == (o.backend is not None), o.name  # a backend's: -o NAME
        if o.type is bool:
            assert p.is_flag and p.default is False, o.name
            continue
        assert p.default == o.default, o.name
        if o.choices:
            assert list(p.type.choices) == list(o.choices), o.name
        if o.min is not None or o.max is not None:
            assert (p.type.min, p.type.max) == (o.min, o.max), o.name
        for i, alias in enumerate(o.aliases):
            hidden = params[f"{o.name}__alias{i}"]
            assert hidden.opts == [alias.split("=")[0]] and hidden.hidden, alias  # --old=VALUE: a flag


@pytest.mark.parametrize("stage", STAGES)
def test_the_options_object_defaults_are_the_tables(stage):
    _, table, run, keywords, *_ = _stages()[stage]
    signature = inspect.signature(run).parameters
    for o in table:
        keyword = keywords.get(o.name, o.name)
        if keyword is not None:
            wanted = inspect.Parameter.empty if o.required else o.default
            assert signature[keyword].default == wanted, o.name


@pytest.mark.parametrize("stage", [s for s in STAGES if _stages()[s][4]])
def test_the_audit_schema_and_config_take_the_tables_defaults_types_and_ranges(stage):
    _, table, _, _, section, config_class = _stages()[stage]
    written = json.loads((SCHEMA_DIR / "audit.schema.json").read_text())["$defs"][section]["properties"]
    fields = {f.name: f.default for f in dataclasses.fields(config_class)} if config_class else None
    for name, prop in schema_properties(table).items():
        assert written[name] == prop, name
        if fields is not None:  # filter: the config's overrides pass to FilterOptions as they are
            option = next(o for o in table if o.name == name)
            assert fields[name] == (dataclasses.MISSING if option.required else option.default), name


def test_an_old_spelling_sets_the_option_and_is_hidden_from_help():
    table = [Option("quiet", bool, False, aliases=("--no-progress",)),
             Option("n_resamples", int, 2000, min=100, flag="--bootstrap", aliases=("--boot",))]

    @click.command()
    @click_options(table)
    def show(quiet, n_resamples):
        click.echo(f"{quiet} {n_resamples}")

    runner = CliRunner()
    assert runner.invoke(show, []).output == "False 2000\n"
    assert runner.invoke(show, ["--no-progress", "--boot", "150"]).output == "True 150\n"
    assert runner.invoke(show, ["--quiet", "--bootstrap", "300"]).output == "True 300\n"
    refused = runner.invoke(show, ["--boot", "5"])
    assert refused.exit_code == 2 and "5 is not in the range x>=100" in refused.output
    help_text = runner.invoke(show, ["--help"]).output
    assert "--bootstrap" in help_text and "--boot " not in help_text and "--no-progress" not in help_text


def test_a_backends_own_setting_is_given_with_o_and_checked_as_its_flag():
    """One -o NAME VALUE for the knobs of one backend (simonw/llm's design): set, typed and
    range-checked as the (now hidden) flag is; an unknown name or a setting given both ways is
    refused; --help names every backend's settings on the -o line."""
    table = [Option("retries", int, 6, min=0, backend="anthropic"), Option("batch_size", int, 64, min=1, backend="local"),
             Option("seeds", int, 5, min=1)]

    @click.command()
    @click_options(table)
    def run(retries, batch_size, seeds):
        click.echo(f"{retries} {batch_size} {seeds}")

    runner = CliRunner()
    assert runner.invoke(run, []).output == "6 64 5\n"
    assert runner.invoke(run, ["-o", "retries", "2", "--option", "batch-size", "8"]).output == "2 8 5\n"
    assert runner.invoke(run, ["--retries", "3"]).output == "3 64 5\n"  # the old flag still works
    for args, message in ((["-o", "retries", "-1"], "-o retries '-1': -1 is not in the range x>=0"),
                          (["-o", "retries", "x"], "'x' is not a valid integer"),
                          (["-o", "retry", "2"], "-o retry: no such setting; the backends take batch_size, retries"),
                          (["--retries", "1", "-o", "retries", "2"], "both set retries: give it once")):
        result = runner.invoke(run, args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)
    help_text = runner.invoke(run, ["--help"]).output
    assert "anthropic:retries;local:batch-size" in "".join(help_text.split()) and "--retries" not in help_text


def test_a_setting_given_twice_or_of_the_other_backend_is_refused():
    """`-o retries 3 -o retries 5` kept the last silently, and a setting of the backend the model
    does not run on was ignored silently; both are refused, naming the setting and the backend.
    A text-typed setting (key-header) is converted as its flag is (it raised AttributeError)."""
    table = [Option("retries", int, 6, min=0, backend="anthropic"), Option("key_header", backend="anthropic"),
             Option("batch_size", int, 64, min=1, backend="local")]

    @click.command()
    @click.option("--model", default="smollm2-135m")
    @click_options(table, backend_of=lambda kw: backend_named(kw["model"], "--model"))
    def run(model, retries, key_header, batch_size):
        click.echo(f"{retries} {key_header} {batch_size}")

    runner = CliRunner()
    claude = ["--model", "anthropic:claude-haiku-4-5"]
    assert runner.invoke(run, [*claude, "-o", "key-header", "x-api-key"]).output == "6 x-api-key 64\n"
    assert runner.invoke(run, ["-o", "batch-size", "8"]).output == "6 None 8\n"
    for args, message in (
            ([*claude, "-o", "retries", "3", "-o", "retries", "5"], "-o retries is given twice ('3', then '5')"),
            (["-o", "retries", "3"], "-o retries is a setting of the anthropic backend; --model smollm2-135m runs "
                                     "on the local backend, which would ignore it"),
            ([*claude, "-o", "batch-size", "8"], "-o batch-size is a setting of the local backend; --model "
                                                 "anthropic:claude-haiku-4-5 runs on the anthropic backend"),
            ([*claude, "--batch-size", "8"], "--batch-size is a setting of the local backend")):
        result = runner.invoke(run, args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)


def test_a_float_option_refuses_nan_and_infinity():
    @click.command()
    @click_options([Option("max_cost", float, min=0)])
    def spend(max_cost):
        click.echo(max_cost)

    for bad in ("nan", "inf"):
        result = CliRunner().invoke(spend, ["--max-cost", bad])
        assert result.exit_code == 2 and "is not a finite number" in result.output


@pytest.mark.parametrize("spec, expected", [
    ("anthropic:claude-haiku-4-5", ("anthropic", "claude-haiku-4-5")),
    ("local:smollm2-135m", ("local", "smollm2-135m")),
    ("smollm2-135m", ("local", "smollm2-135m")),         # generate's old form, now annotate's too
    ("HuggingFaceTB/SmolLM2-135M", ("local", "HuggingFaceTB/SmolLM2-135M")),
    ("C:/models/m.gguf", ("local", "C:/models/m.gguf")),  # a prefix that is no backend belongs to the name
])
def test_one_model_grammar_for_every_stage(spec, expected):
    from scoring.model_spec import canonical, parse

    assert parse(spec, "annotator") == parse(spec) == expected
    assert canonical(spec) == ":".join(expected)


@pytest.mark.parametrize("spec", ["anthropic:", "local:", "local: ", ""])
def test_a_model_spec_without_a_name_is_refused_in_one_line(spec):
    from curate.core.errors import CurateError
    from scoring.model_spec import parse

    with pytest.raises(CurateError, match=r"^annotator .*: expected anthropic:MODEL, local:NAME or a local model NAME$"):
        parse(spec, "annotator")


def test_a_single_valued_option_given_twice_is_refused_for_every_command(tmp_path):
    """`--modes full --modes zero` kept the last value silently (issue 44), while `-o NAME` given
    twice was refused: every single-valued option of a stage's table is refused the same way, on
    every command; a repeatable one still takes each value, and an old spelling beside the new
    one is refused too."""
    table = [Option("modes", default="full"), Option("model", aliases=("--old-model",)),
             Option("decisions", multiple=True, default=()), Option("replace", bool, False)]

    @click.command()
    @click_options(table)
    def run(modes, model, decisions, replace):
        click.echo(f"{modes} {model} {list(decisions)} {replace}")

    runner = CliRunner()
    assert runner.invoke(run, ["--modes", "zero", "--decisions", "a", "--decisions", "b"]).output == \
        "zero None ['a', 'b'] False\n"
    for args, message in ((["--modes", "full", "--modes", "zero"], "--modes is given twice ('full', then 'zero')"),
                          (["--model", "a", "--old-model", "b"], "--old-model and --model both set model"),
                          (["--old-model", "a", "--old-model", "b"], "--old-model is given twice")):
        result = runner.invoke(run, args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)

    ws = tmp_path / "ws"
    ws.mkdir()
    for command in (["score", ws, "--model", "smollm2-135m", "--modes", "full", "--modes", "zero"],
                    ["score", ws, "--model", "smollm2-135m", "--backend", "engine", "--backend", "vllm"],
                    ["export", ws, "scores", "--out", tmp_path / "a.csv", "--out", tmp_path / "b.csv"],
                    ["import-answers", ws, ws, "--format", "table", "--model", "a", "--model", "b"]):
        proc = run_cli(*command, check=False)
        flag = command[-2]
        assert proc.returncode == 2 and f"{flag} is given twice" in proc.stderr and "give it once" in proc.stderr, \
            proc.stderr


@pytest.mark.parametrize("name, message", [("", "is empty"), ("  ", "is empty"), ("a\nb", "control character '\\n'"),
                                           ("a\u202eb", "U+202E"), ("x" * 100_000, "100000 characters long")])
def test_a_model_name_is_checked_in_one_place_for_every_import_and_command(tmp_path, name, message):
    """Model names with newlines, 100,000 characters or invisible controls were accepted, and
    `--model ''` was ignored (issue 44): refused, by `import-answers --model`, a table's model
    column, `import-scores --label` and `score --label` alike. HTML is a name (escaped wherever
    it is shown)."""
    from curate.core.names import model_name

    with pytest.raises(ValueError, match=re.escape(message)):
        model_name(name)
    assert model_name(" <b>m</b> ") == "<b>m</b>"
    ws = tmp_path / "ws"
    ws.mkdir()
    table = tmp_path / "t.csv"
    table.write_text("item,choice\n0,A\n")
    for command in (["import-answers", ws, table, "--format", "table", "--model", name],
                    ["import-scores", ws, table, "--format", "lm-eval-samples", "--label", name],
                    ["score", ws, "--model", "smollm2-135m", "--label", name]):
        proc = run_cli(*command, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and message in proc.stderr, (command, proc.stderr)


@pytest.mark.parametrize("stage", STAGES)
def test_every_float_option_refuses_nan_and_infinity_in_its_options_object(stage):
    """What the flag refuses the options object refuses too (the audit config and Python callers
    build it without click): `temperature: .inf` passed GenerateOptions, whose own conversion
    checked the range alone (issue 44, fail 9)."""
    from curate.core.errors import CurateError

    _, table, options, *_ = _stages()[stage]
    if not isinstance(options, type):
        return
    required = {o.name: {"model": "m", "annotator": "local:m", "round": 1, "format": "table", "rules": "r.yaml",
                         "out": "o", "decisions": "d", "name": "n", "version": "1.0.0", "to": "t"}.get(o.name, "x")
                for o in table if o.required}
    for o in (o for o in table if o.type is float):
        for bad in (float("nan"), float("inf"), float("-inf")):
            with pytest.raises(CurateError, match=f"{o.spelling} {bad!r}"):
                options(**required, **{o.name: bad})


def test_every_commands_options_come_from_a_table():
    """No command declares a click option by hand: each comes from an option table
    (``click_options``), so a flag, its default and its help are written once."""
    from curate.cli import main
    from curate.core.options import _KNOBS, _Once

    def commands(group, path):
        for name, command in group.commands.items():
            yield f"{path} {name}", command
            if isinstance(command, click.Group):
                yield from commands(command, f"{path} {name}")

    for name, command in commands(main, "curate"):
        by_hand = [p.opts[0] for p in command.params
                   if isinstance(p, click.Option) and not isinstance(p, _Once) and p.name != _KNOBS]
        assert not by_hand, (name, by_hand)
