"""`curate audit`: ingest -> answers -> annotate -> score -> filter -> analyze -> release, in one
workspace.

Every stage is resumable on its own (ingest makes the workspace once; an answers import whose
answers are all held stores nothing; annotation and scoring cache by request/content key), so
running an audit again does only what is missing. The two
stages that recompute from stored data, filter and analyze, are skipped when their inputs have
not changed: each output folder keeps the fingerprint of the workspace state and the settings it
was made from (``.audit-fingerprint``). The filter runs before the analysis so the report counts
what it removes (``curate analyze --decisions``). A release version is immutable: when it exists with the
same kept items the stage is done, otherwise the audit stops and asks for a new version.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

import curate
from curate.audit.config import AuditConfig
from curate.audit.plan import answers_fit_problems, import_fit_problems, scoring_fit_problems
from curate.core.errors import CurateError
from curate.core.lock import folder_lock
from curate.core.reading import read_json
from curate.items.store import Workspace

FINGERPRINT = ".audit-fingerprint"


@dataclass
class Outcome:
    """What one stage did: 'ran' (new work), 'skipped' (nothing to do) or 'stopped'; ``seconds``
    for a stage of several outcomes (each annotation round, each scorer), each its own time."""
    stage: str
    status: str
    detail: str
    data: dict = field(default_factory=dict)
    seconds: float | None = None


def workspace_state(root: Path) -> str:
    """A hash that changes whenever items, scores, annotations, generations or stored answers in
    the workspace change. Annotations count record by record with their answers and write times,
    so a human verdict edited in place (same request key, new answer) changes it too; stored
    answers count answer by answer."""
    queries = {
        "items": "SELECT count(*), max(row_index) FROM items",
        "scores": "SELECT run_id, model, mode, count(*), sum(coalesce(logprob_sum, 0) + coalesce(seq_mean, 0)) "
                  "FROM scores GROUP BY run_id, model, mode ORDER BY run_id, model, mode",
        "annotations": "SELECT annotator, round, item_id, status, request_key, result_json, created_at "
                       "FROM annotations ORDER BY annotator, round, item_id",
        "generations": "SELECT run_id, model, template, settings, mode, seed, count(*), max(created_at) "
                       "FROM generations GROUP BY run_id, model, template, settings, mode, seed "
                       "ORDER BY run_id, model, template, settings, mode, seed",
        # generated answers count as generations: the copy of older ones, made when answers are
        # first read, changes nothing
        "answers": "SELECT model, source, run, item_id, choice FROM answers WHERE source != 'generate' "
                   "ORDER BY model, source, run, item_id",
    }
    h = hashlib.sha256()
    with Workspace.open(root) as ws:
        tables = ws.tables()
        for table, sql in queries.items():  # a table not made yet counts as an empty one
            rows = ws.conn.execute(sql).fetchall() if table in tables else []
            if table == "answers" and not rows:
                continue  # a workspace without imported answers keeps the state it had before they counted
            for row in rows:
                h.update(json.dumps(tuple(row), default=str).encode())
            h.update(b"\n")
    return "sha256:" + h.hexdigest()


def fingerprint(state: str, settings: dict) -> str:
    text = json.dumps({"state": state, "settings": settings, "toolkit": curate.__version__}, sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


#: The output file of each recomputing stage whose digest the fingerprint records: another
#: command writing into the same folder (``curate filter --out``, ``curate analyze --out``)
#: rewrites it, and the audit then reruns the stage instead of trusting what it finds.
OUTPUT = {"analyze": "metrics.json", "filter": "summary.json"}


def _stamp_with_output(out: Path, stage: str, stamp: str) -> str:
    from curate.items.sources import file_sha256
    made = out / OUTPUT[stage]
    return f"{stamp} {file_sha256(made) if made.is_file() else 'missing'}"


def up_to_date(out: Path, stage: str, stamp: str) -> bool:
    marker = out / FINGERPRINT
    return marker.is_file() and marker.read_text().strip() == _stamp_with_output(out, stage, stamp)


def mark(out: Path, stage: str, stamp: str) -> None:
    from curate.core.atomic import write_text
    write_text(out / FINGERPRINT, _stamp_with_output(out, stage, stamp) + "\n")


# --- stages ---------------------------------------------------------------------------------

def ingest_stage(cfg: AuditConfig) -> Outcome:
    from curate.items.ingest import Ingest, same_adapter
    from curate.items.ingest_options import IngestOptions

    b = cfg.benchmark
    if (cfg.workspace / "workspace.db").is_file():
        with Workspace.open(cfg.workspace) as ws:
            stored, split, n = ws.meta("adapter", {}), ws.meta("split"), ws.count_items()
        if not same_adapter(stored, b.make_adapter()) or split != b.source()["split"]:
            raise CurateError(f"{cfg.workspace}: was ingested with other benchmark settings than {cfg.file} "
                              f"names (adapter, columns or split); use a new workspace directory")
        changed = source_changes(cfg.workspace, b.source())
        if changed:
            raise CurateError(f"{cfg.workspace}: was ingested from other data than {cfg.file} names ({changed}); "
                              f"use a new workspace directory, or restore the benchmark settings")
        return Outcome("ingest", "skipped", f"workspace exists ({n} items)", {"items": n})
    Ingest(cfg.workspace, IngestOptions(**b.source()), b.make_adapter()).run()
    with Workspace.open(cfg.workspace) as ws:
        n = ws.count_items()
    return Outcome("ingest", "ran", f"{n} items from {b.source()['data']}", {"items": n})


def source_changes(root: Path, want: dict) -> str:
    """What differs between the data a workspace was made from and the data a config names
    (``BenchmarkConfig.source()``): the row limit, the local data's content (a file moved
    elsewhere is the same data), the Hub dataset, its pinned revision or configuration. Empty
    when nothing does."""
    from curate.items.sources import local_sha256

    with Workspace.open(root) as ws:
        source, limit = ws.meta("source", {}), ws.meta("limit")
    changes = []
    if limit != want["limit"]:
        changes.append(f"limit {limit} in the workspace, {want['limit']} in the config")
    if source.get("kind") == "local":
        path = Path(want["data"])
        if not path.exists():
            changes.append(f"{path} does not exist")
        elif local_sha256(path, want["split"], want["config"]) != source.get("sha256"):
            changes.append(f"the content of {path} differs from the data the workspace was made from")
    else:
        for key, given in (("repo_id", want["data"]), ("revision", want["revision"]), ("config", want["config"])):
            if source.get(key) != given:
                changes.append(f"{key} {source.get(key)} in the workspace, {given} in the config")
    return "; ".join(changes)


def answers_stage(cfg: AuditConfig) -> list[Outcome]:
    """Each of ``answers.imports``, as `curate import-answers` imports it; one whose answers the
    workspace already holds, as the files give them, stores nothing (skipped)."""
    from scoring.answer_imports import import_answers
    from scoring.answer_options import reading

    outcomes = []
    for imp in cfg.answer_imports:
        start, o = time.perf_counter(), imp.options
        summary = import_answers(cfg.workspace, o.format, [imp.path], keep_unchanged=True, **reading(o))
        if not any(s["stored"] for s in summary):
            outcomes.append(Outcome("answers", "skipped", f"{o.format} answers from {imp.path} already imported",
                                    seconds=time.perf_counter() - start))
            continue
        total, unread = sum(s["answers"] for s in summary), sum(s["unreadable"] for s in summary)
        outcomes.append(Outcome("answers", "ran", f"imported {total} answers of {len(summary)} model"
                                f"{'s' * (len(summary) != 1)} ({unread} unreadable) from {imp.path} ({o.format})",
                                {"imported": summary}, time.perf_counter() - start))
    return outcomes


def annotate_stage(cfg: AuditConfig) -> list[Outcome]:
    from annotate.options import AnnotateOptions
    from annotate.run import Annotate

    outcomes = []
    for i, a in enumerate(cfg.annotators):
        for rnd in a.rounds:
            start = time.perf_counter()
            s = Annotate(cfg.workspace, AnnotateOptions(round=rnd, annotator=a.annotator, batch=a.batch,
                                                        concurrency=a.concurrency, max_cost=a.max_cost)).run()
            new = s["valid"] + s["invalid"] + s["refused"]
            status = "stopped" if s.get("stopped") else ("ran" if new else "skipped")
            # the cap is the config's key here, not the command's option
            stopped = (s.get("stopped") or "").replace("--max-cost", f"annotators[{i}].max_cost")
            detail = (f"{a.annotator} round {rnd}: {new} new ({s['valid']} valid, {s['invalid']} invalid, "
                      f"{s['refused']} refused), {s['skipped']} already done" + (f"; stopped: {stopped}" if stopped else ""))
            outcomes.append(Outcome(f"annotate r{rnd}", status, detail, s, time.perf_counter() - start))
            if s.get("stopped"):
                return outcomes
    return outcomes


def score_stage(cfg: AuditConfig) -> list[Outcome]:
    from scoring.imports import get
    from scoring.run import Score

    sc, outcomes = cfg.scoring, []
    for imp in sc.imports:  # a format of scoring.imports, as the schema allows
        start = time.perf_counter()
        fmt = get(imp.format)
        if fmt.imported(cfg.workspace, [imp.dir]):
            outcomes.append(Outcome("score", "skipped", f"{imp.format} scores from {imp.dir} already imported",
                                    seconds=time.perf_counter() - start))
            continue
        summary = fmt.import_scores(cfg.workspace, [imp.dir], progress=False)
        pairs = sorted({(r["model"], r["mode"]) for r in summary})
        outcomes.append(Outcome("score", "ran", f"imported {imp.format} scores from {imp.dir}: {len(pairs)} "
                                f"model-modes of {len({m for m, _ in pairs})} models", {"imported": summary},
                                time.perf_counter() - start))
    for model in sc.models:
        start = time.perf_counter()
        options = sc.options_for(model)
        s = Score(cfg.workspace, options).run()
        status = "ran" if s["computed"] or s["text_computed"] else "skipped"
        texts = f", {s['text_computed']} text scores computed" if options.text_scores else ""
        outcomes.append(Outcome("score", status, f"{model} ({', '.join(sc.modes)}, {options.dtype}): "
                                f"{s['computed']} item-modes computed, {s['cached']} cached{texts}", s,
                                time.perf_counter() - start))
    return outcomes


def analyze_stage(cfg: AuditConfig, state: str) -> Outcome:
    from curate.analyses.options import AnalyzeOptions
    from curate.analyses.report import Analyze
    from curate.items.sources import file_sha256

    decisions = cfg.filter_out if cfg.filter_rules else None  # the report counts what the filter removed
    summary = decisions / "summary.json" if decisions else None
    stamp = fingerprint(state, {"stage": "analyze", "decisions": file_sha256(summary) if summary else None})
    with folder_lock(cfg.analyze_out, command="analyze"):  # the output checked and stamped is this run's own
        if up_to_date(cfg.analyze_out, "analyze", stamp):
            return Outcome("analyze", "skipped", f"report up to date in {cfg.analyze_out}")
        metrics = Analyze(cfg.workspace, AnalyzeOptions(out=cfg.analyze_out, decisions=decisions)).run()
        mark(cfg.analyze_out, "analyze", stamp)
    return Outcome("analyze", "ran", f"report in {cfg.analyze_out / 'report.html'}", {"metrics": metrics})


def filter_stage(cfg: AuditConfig, state: str) -> Outcome:
    from curate.filter.engine import Filter
    from curate.filter.options import FilterOptions
    from curate.items.sources import file_sha256

    stamp = fingerprint(state, {"stage": "filter", "rules": file_sha256(cfg.filter_rules), **cfg.filter_options})
    with folder_lock(cfg.filter_out, command="filter"):  # the output checked and stamped is this run's own
        if up_to_date(cfg.filter_out, "filter", stamp):
            summary = read_json(cfg.filter_out / "summary.json", "a decisions summary")
            return Outcome("filter", "skipped", f"decisions up to date in {cfg.filter_out}", summary)
        summary = Filter(cfg.workspace, FilterOptions(rules=cfg.filter_rules, out=cfg.filter_out,
                                                      **cfg.filter_options)).run()
        mark(cfg.filter_out, "filter", stamp)
    return Outcome("filter", "ran", f"decisions in {cfg.filter_out}", summary)


def release_stage(cfg: AuditConfig) -> Outcome:
    import pandas as pd

    from curate.release import Release, parse_target, release_line
    from curate.release.options import ReleaseOptions
    from curate.release.targets import VersionExists

    r = cfg.release
    target = parse_target(r.spec)
    try:
        target.check_new(r.name, r.version)
    except VersionExists:  # done if it holds exactly these decisions' items (other errors are raised)
        from curate.release import fetched
        from curate.release.manifest import read_manifest
        with fetched(r.spec, r.name, r.version) as folder:
            kept = set(read_manifest(folder)["kept"])
        decided = pd.read_parquet(cfg.filter_out / "decisions.parquet")
        if kept == set(decided.loc[decided["kept"], "item_id"]):
            return Outcome("release", "skipped", f"{r.name} {r.version} already released at {r.spec}")
        raise CurateError(f"{r.name} {r.version} exists at {r.spec} with other items; releases are immutable: "
                          f"set a new release.version in {cfg.file}") from None
    manifest = Release(cfg.workspace, ReleaseOptions(decisions=cfg.filter_out, name=r.name, version=r.version,
                                                     to=r.spec, license=r.license)).run()
    return Outcome("release", "ran", f"{r.name} {r.version}: {release_line(manifest)}", manifest)


# --- the whole audit ------------------------------------------------------------------------

def run_audit(cfg: AuditConfig, *, echo=click.echo) -> list[Outcome]:
    """Run every stage the config names, in order; stop after a stage that stopped."""
    plan = ["ingest", *(["answers"] if cfg.answer_imports else []), *(["annotate"] if cfg.annotators else []),
            *(["score"] if cfg.scoring else []),
            *(["filter"] if cfg.filter_rules else []), *(["analyze"] if cfg.analyze_out else []),
            *(["release"] if cfg.release else [])]
    outcomes: list[Outcome] = []
    for n, stage in enumerate(plan, start=1):
        echo(click.style(f"[{n}/{len(plan)}] {stage}", bold=True))
        start = time.perf_counter()
        if stage == "ingest":
            done = [ingest_stage(cfg)]
            # a rotation letters+rK needs items with more than K options, and imported scores and
            # answers need files that fit the items (a Hub dataset's are known only now): before
            # anything is spent
            done += [Outcome("score", "stopped", f"{cfg.file}, field '{key}': {message}")
                     for key, message in scoring_fit_problems(cfg) + import_fit_problems(cfg)]
            done += [Outcome("answers", "stopped", f"{cfg.file}, field '{key}': {message}")
                     for key, message in answers_fit_problems(cfg)]
        elif stage == "answers":
            done = answers_stage(cfg)
        elif stage == "annotate":
            done = annotate_stage(cfg)
        elif stage == "score":
            done = score_stage(cfg)
        elif stage == "analyze":
            done = [analyze_stage(cfg, workspace_state(cfg.workspace))]
        elif stage == "filter":
            done = [filter_stage(cfg, workspace_state(cfg.workspace))]
        else:
            done = [release_stage(cfg)]
        for o in done:
            took = time.perf_counter() - start if o.seconds is None else o.seconds
            echo(f"      {o.status:<8}{o.detail}  ({took:.1f}s)")
        outcomes += done
        if any(o.status == "stopped" for o in done):
            echo("audit stopped; fix the cause and run the same command again to resume")
            break
    return outcomes


def summary_lines(cfg: AuditConfig, outcomes: list[Outcome]) -> list[str]:
    """The closing summary: what was found, where things are, what it cost."""
    lines = [f"workspace  {cfg.workspace}"]
    new_work = [o.stage for o in outcomes if o.status == "ran"]
    lines.append(f"new work   {', '.join(new_work) if new_work else 'none (everything was up to date)'}")
    cost = sum(float((o.data.get("cost") or {}).get("usd") or 0) for o in outcomes if o.stage.startswith("annotate"))
    if any(o.stage.startswith("annotate") for o in outcomes):
        lines.append(f"cost       ${cost:.4f} in this run (annotation ledger; local annotators cost nothing)")
    filt = next((o for o in outcomes if o.stage == "filter"), None)
    if filt and filt.data.get("stages"):
        lines.append("filter     stage                               matched  removed     left")
        for row in filt.data["stages"]:
            lines.append(f"           {row['stage']:<34}{row['matched']:>8}{row['removed_here']:>9}{row['left']:>9}")
    if cfg.analyze_out:
        lines.append(f"report     {cfg.analyze_out / 'report.html'}")
    if cfg.filter_out:
        lines.append(f"decisions  {cfg.filter_out / 'decisions.parquet'}")
        lines.append(f"review     curate review {cfg.workspace} --decisions {cfg.filter_out} --queue removed "
                     "--reviewer NAME   (then open http://127.0.0.1:8000/)")
    rel = next((o for o in outcomes if o.stage == "release"), None)
    if rel and cfg.release:
        lines.append(f"release    {cfg.release.name} {cfg.release.version} at {cfg.release.spec}")
    return lines
