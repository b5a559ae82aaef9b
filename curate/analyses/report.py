"""`curate analyze`: run every analysis on a workspace and write the report.

``analyze_workspace(root, out_dir, **options)`` reads the items, the scores
(``scoring.store.read_scores``) and any annotations (``annotate.store.read_annotations``),
runs the pure analyses of this package and writes into ``out_dir``:

- ``metrics.json``   every number, keyed as in ``ABOUT`` (also stored in the file under "about")
- ``core_items.csv`` every item scored in the core mode with how many models got it right, and
                     which: the item ids behind the zero-prompt core at any k
- ``report.md``, ``report.html`` (self-contained, plots embedded), and the PNG plots.

It returns the metrics dict. Every table in metrics.json names the items it covers (``subset``:
"all" = every item the model was scored on in that mode, "source=<s>" = those of one source),
the scores (``model``, ``mode``, ``formulation``) and the ``normalization`` the predictions come
from. Formulations are analysed like modes; the rotated letters formulations (``letters+rK``)
only in the accuracy table and the position audit.
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

import curate
from annotate.flags import item_flags
from annotate.store import open_annotations, read_annotations
from curate import formulations as forms
from curate.analyses import (accuracy, agreement, annotations, comparisons, core, generation, length, outdir, plots,
                             position, render, stats)
from curate.analyses.sections import report_blocks
from curate.atomic import write_text
from curate.errors import CurateError
from curate.exports import write_records
from curate.items import MODES
from curate.lock import folder_lock
from generate.store import open_generations, read_generations
from generate.store import read_runs as read_generation_runs
from scoring import normalize
from scoring.store import open_scores, read_runs, read_scores, require_one_source, score_sources

SCHEMA_VERSION = 1

ABOUT = {
    "provenance": "workspace, item count and a digest of the items' content hashes, the score runs read, "
                  "and the annotation records read per annotator x round x run x status",
    "settings": "options of this run: primary normalization, modes, models, alpha, bootstrap seed and "
                "resamples, length units, core mode and threshold",
    "accuracy": "rows model x mode x formulation x normalization x subset: n, correct, accuracy, Wilson "
                "interval at the confidence 1 - alpha (settings; `confidence`)",
    "agreement": "rows model x formulation x (mode_a, mode_b) on the items both modes scored: counts and shares of "
                 "both_correct, same_wrong, only_a_correct, only_b_correct, different_wrong; agreement "
                 "(both_correct + same_wrong); Cohen's kappa of the two prediction vectors; `formulations`: the "
                 "same per model x mode x (formulation_a, formulation_b)",
    "core": "items the models answer correctly in the core mode (absent without scores in that mode): curve "
            "(k, items, share) for k = 1..N models over the items every model scored (n_items; n_incomplete: the "
            "others, left out); threshold and n_at_threshold; items_file lists every item "
            "with n_correct and the models that got it right",
    "length": "per length unit: spread summaries (option texts and context+option texts), accuracy when "
              "the gold option is strictly the longest (option texts) vs not with Wilson intervals and a "
              "one-sided Fisher test, Spearman correlation of every normalization with option length by source",
    "annotations": "present only with annotations: label rates by annotator x measure x subset (round 1 labels, "
                   "round 2 wrong_gold / multiple_correct / all_implausible / best_is_worst, refusals), error overlap with the "
                   "models (per model, and error_overlap_mean: its mean over the models of each mode, with their count), and plain / extended / worst-option accuracy on round-2 items",
    "comparisons": "paired tests: modes (per formulation and model, exact McNemar -- one-sided a > b when a is "
                   "full, else two-sided --, paired bootstrap CI at 1 - alpha, Holm and Bonferroni across models, "
                   "intersection-union p for every model on directional claims), formulations (per mode and "
                   "model, two-sided, as modes), models (all pairs per mode and formulation, two-sided exact "
                   "McNemar, Holm and Bonferroni), detectable_difference (minimum detectable difference per "
                   "subset size, alpha, power 0.8, in the primary formulation; null where no difference is "
                   "detectable, and for mdd_paired and median_discordant also where model_pairs is 0: one model, "
                   "nothing to compare)",
    "position": "gold: per subset x option count, the gold option's position counts and shares, chi-square test "
                "against uniform (p and log10_p), skewed = p < alpha; rotations (present with letters+rK scores): "
                "per model x mode, accuracy in the original order and over every cyclic rotation of the options, "
                "share right in every / no rotation, the shares of letters picked and their chi-square test "
                "against uniform",
    "item_pages": "items any annotator flagged (problem labels, round-2 flags, refusals): flagged (count), "
                  "with_page, index (items/index.html, searchable) and rows (item_id, row_index, source, flags, "
                  "page: items/<row_index>.html with the review app's view of the item, readable without a server)",
    "generation": "present only with generations (curate generate); a condition is model x template x settings x "
                  "mode: parse (replies by status strict / lenient / unparsed), seed_accuracy (per seed, Wilson "
                  "interval, unparsed counted as not correct, accuracy_parsed without them), spread (over seeds: mean, "
                  "sd, min, max, range, bootstrap interval over items and seeds, share of items whose answer / "
                  "correctness changes with the seed), position (share of replies naming each displayed position "
                  "vs the gold's), position_tests (chi-square against a uniform choice), loglikelihood_agreement "
                  "(same model and mode, per seed, the primary formulation), all_implausible (accuracy on items "
                  "annotated all implausible vs the others, generation and log-likelihood), comparisons (templates, "
                  "generation vs log-likelihood, modes: exact sign test on seed-averaged per-item accuracy, bootstrap "
                  "interval over items and seeds, Holm and Bonferroni per family), runs",
    "plots": "file names of the PNG figures in the output folder",
}


def analyze_workspace(root, out_dir, *, normalization: str | None = None, models=None, modes=None,
                      length_units=("chars",), core_mode: str = "zero", core_threshold: int | None = 7,
                      alpha: float = 0.05, n_resamples: int = 2000, seed: int = 0) -> dict:
    """Run every analysis on the workspace at ``root``; write the report into ``out_dir``;
    return the metrics. ``normalization`` (default: the first of ``scoring.normalize.PREFERENCE`` all
    (model, mode) pairs have) drives agreement, core, length, annotation and comparison
    results; accuracy is given under every normalization available."""
    out = Path(out_dir)
    for unit in length_units:  # refuse a bad unit or tokenizer before any work is done
        kind, name = length.parse_unit(unit)
        if kind == "tokens":
            length.load_tokenizer(name)
    outdir.check_report_dir(out)
    # One run at a time writes a report folder: two would mix their plots and reports.
    with folder_lock(out, command="analyze"), tqdm(total=7 + len(length_units), desc="analyze", unit="step") as bar:
        built = outdir.staging(out)
        try:
            metrics = _analyze(bar, root, built, normalization=normalization, models=models, modes=modes,
                               length_units=length_units, core_mode=core_mode, core_threshold=core_threshold,
                               alpha=alpha, n_resamples=n_resamples, seed=seed)
            outdir.publish(built, out)
        finally:
            shutil.rmtree(built, ignore_errors=True)
        return metrics


def _analyze(bar, root, out: Path, *, normalization, models, modes, length_units, core_mode, core_threshold,
             alpha, n_resamples, seed) -> dict:
    with _stage(bar, "reading scores and annotations"):
        with open_scores(root) as ws:
            items = ws.items()
            scores = read_scores(ws, models=list(models) if models else None, modes=list(modes) if modes else None)
            runs = read_runs(ws)
            meta = {"benchmark": ws.meta("benchmark"), "split": ws.meta("split"), "source": ws.meta("source", {}),
                    "formulation": ws.meta("formulation", "cloze")}
        with open_annotations(root) as ws:
            round1, round2 = read_annotations(ws, round=1), read_annotations(ws, round=2)
        with open_generations(root) as ws:
            gens = read_generations(ws, models=list(models) if models else None, modes=list(modes) if modes else None)
            gen_runs = read_generation_runs(ws)
    if scores.empty and gens.empty and not (models or modes):
        raise CurateError(f"{root}: no scores or generations; score, import (curate import-scores) or generate "
                          "(curate generate) some first")
    _check_asked(root, "--model", models, set(scores["model"].unique()) | set(gens["model"].unique()),
                 set(runs["model"]) | set(gen_runs["model"]))
    _check_asked(root, "--mode", modes, set(scores["mode"].unique()) | set(gens["mode"].unique()),
                 lambda: _stored_modes(root))
    if core_mode != "none" and core_mode not in MODES and core_mode not in set(scores["mode"].unique()):
        raise CurateError(f"--core-mode {core_mode!r} is not a prompt mode (one of {', '.join(MODES)}, or none)")
    if scores.empty:  # answers by generation only (a model without log-probabilities, such as Claude)
        return _generation_only(bar, root, out, items, meta, gens, gen_runs, round1, round2, alpha=alpha,
                                n_resamples=n_resamples, seed=seed)
    sources = require_one_source(score_sources(scores, runs))  # one source per label; names the runs read

    gold = pd.Series({it["item_id"]: it["gold"] for it in items})
    norm = normalize.primary_normalization(scores, normalization)
    present = set(scores["mode"].unique())
    mode_order = [m for m in MODES if m in present] + sorted(present - set(MODES))
    formulation_order, base_forms = _formulations(scores)
    primary = meta["formulation"] if meta["formulation"] in base_forms else base_forms[0]
    n_options = max(len(it["options"]) for it in items)
    out.mkdir(parents=True, exist_ok=True)
    plot_files = {}

    with _stage(bar, "accuracy and agreement"):
        preds_all = accuracy.all_predictions(scores, gold)
        preds = preds_all[preds_all["normalization"] == norm]
        base = preds[preds["formulation"].isin(base_forms)]  # rotations are read by the position audit
        acc = accuracy.accuracy_table(preds_all, alpha)
        agree = agreement.agreement_table(base, mode_order, n_options)
        agree_forms = agreement.formulation_table(base, base_forms, n_options)
        chance = float(np.mean([1 / len(it["options"]) for it in items]))
        plot_files["accuracy"] = plots.accuracy_bars(acc, norm, mode_order, base_forms, out / "accuracy.png",
                                                     chance, stats.level(alpha)).name
    metrics = {
        "about": ABOUT, "schema_version": SCHEMA_VERSION, "toolkit_version": curate.__version__,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "provenance": _provenance(root, items, meta, sources, pd.concat([round1, round2])),
        "settings": {"normalization": norm, "modes": mode_order, "formulations": formulation_order,
                     "primary_formulation": primary, "models": sorted(scores["model"].unique()),
                     "alpha": alpha, "n_resamples": n_resamples, "seed": seed, "length_units": list(length_units),
                     "core_mode": core_mode, "core_threshold": core_threshold},
        "accuracy": {"interval": "wilson", "confidence": 1 - alpha, "rows": _records(acc)},
        "agreement": {"normalization": norm, "rows": _records(agree), "formulations": _records(agree_forms)},
    }

    subsets = {"all": list(gold.index)}
    for source in sorted({it["source"] for it in items if it["source"]}):
        subsets[f"source={source}"] = [it["item_id"] for it in items if it["source"] == source]
    with _stage(bar, f"{core_mode}-prompt core"):
        if core_mode in present:
            metrics["core"], ids, plot_files["core"] = _core(preds[preds["formulation"] == primary], core_mode,
                                                             core_threshold, norm, out, len(items))
            if ids is not None:
                subsets[f"{core_mode}-core k>={core_threshold}"] = ids

    metrics["length"] = {}
    for i, unit in enumerate(length_units):
        with _stage(bar, f"length in {unit}"):
            metrics["length"][unit], files = _length(items, gold, scores, preds_all, unit, out,
                                                     suffix="" if i == 0 else f"_{i}")
            plot_files.update(files)

    with _stage(bar, "annotations"):
        metrics["annotations"] = _annotations(round1, round2, gold, preds, scores, norm, alpha)
        metrics["item_pages"] = _item_pages(out, root, items, scores, gens, round1, round2, gold)
    with _stage(bar, "paired comparisons and positions"):
        metrics["comparisons"] = {
            "normalization": norm,
            "modes": comparisons.mode_comparisons(base, mode_order, n_resamples=n_resamples, seed=seed, alpha=alpha),
            "formulations": comparisons.formulation_comparisons(base, base_forms, n_resamples=n_resamples, seed=seed,
                                                                alpha=alpha),
            "models": comparisons.model_comparisons(base, mode_order, alpha=alpha),
            "detectable_difference": comparisons.detectable_differences(
                preds[preds["formulation"] == primary], subsets, "full" if "full" in mode_order else mode_order[0],
                alpha=alpha),
        }
        sizes = pd.Series({it["item_id"]: len(it["options"]) for it in items})
        metrics["position"] = {"alpha": alpha, "gold": _records(position.gold_positions(items, alpha)),
                               "rotations": _records(position.rotation_table(preds, sizes, alpha))}
    with _stage(bar, "generation"):
        metrics["generation"], files = _generation(gens, gen_runs, preds[preds["formulation"] == primary], round1,
                                                   round2, gold, out, alpha=alpha, n_resamples=n_resamples, seed=seed)
        plot_files.update(files)
    metrics["plots"] = plot_files
    return _write_report(bar, out, metrics)


def _write_report(bar, out: Path, metrics: dict) -> dict:
    metrics = _clean(metrics)
    with _stage(bar, "writing the report"):
        write_text(out / "metrics.json", json.dumps(metrics, indent=1, allow_nan=False) + "\n")
        blocks = report_blocks(metrics, out)
        write_text(out / "report.md", render.markdown(blocks))
        write_text(out / "report.html", render.html_page(blocks, "benchcurate audit report"))
    return metrics


def _generation_only(bar, root, out: Path, items, meta, gens, gen_runs, round1, round2, *, alpha,
                     n_resamples, seed) -> dict:
    """The report of a workspace with generations but no scores: provenance and generation."""
    gold = pd.Series({it["item_id"]: it["gold"] for it in items})
    present = set(gens["mode"].unique())
    mode_order = [m for m in MODES if m in present] + sorted(present - set(MODES))
    out.mkdir(parents=True, exist_ok=True)
    metrics = {
        "about": ABOUT, "schema_version": SCHEMA_VERSION, "toolkit_version": curate.__version__,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "provenance": _provenance(root, items, meta, pd.DataFrame(columns=SOURCE_COLUMNS), pd.concat([round1, round2])),
        "settings": {"normalization": None, "modes": mode_order, "models": sorted(gens["model"].unique()),
                     "alpha": alpha, "n_resamples": n_resamples, "seed": seed},
    }
    with _stage(bar, "generation"):
        empty = pd.DataFrame(columns=["model", "mode", "item_id", "pred", "gold", "correct"])
        metrics["generation"], plot_files = _generation(gens, gen_runs, empty, round1, round2, gold, out, alpha=alpha,
                                                        n_resamples=n_resamples, seed=seed)
    metrics["plots"] = plot_files
    return _write_report(bar, out, metrics)


def _generation(gens, runs, preds, round1, round2, gold, out: Path, *, alpha, n_resamples, seed):
    """The generation metrics (``{"present": False}`` without generations) and their plots;
    ``preds``: log-likelihood predictions of the primary normalization (may be empty)."""
    if gens.empty:
        return {"present": False}, {}
    modes = [m for m in MODES if m in set(gens["mode"])]
    norm = preds["normalization"].iloc[0] if len(preds) and "normalization" in preds else None
    positions, position_tests = generation.position_bias(gens)
    seed_acc = generation.seed_accuracy(gens, alpha)
    used = runs[runs["run_id"].isin(set(gens["run_id"]))]
    result = {
        "present": True, "unparsed": generation.UNPARSED_POLICY,
        "runs": _records(used[["run_id", "model", "backend", "template", "settings", "created_at"]]),
        "parse": _records(generation.parse_summary(gens)),
        "seed_accuracy": {"interval": "wilson", "confidence": 1 - alpha, "rows": _records(seed_acc)},
        "spread": _records(generation.seed_spread(gens, n_resamples=n_resamples, seed=seed, confidence=1 - alpha)),
        "position": _records(positions), "position_tests": _records(position_tests),
        "loglikelihood_agreement": {"normalization": norm,
                                    "rows": _records(generation.loglikelihood_agreement(gens, preds))},
        "comparisons": generation.generation_comparisons(gens, preds, modes, n_resamples=n_resamples, seed=seed,
                                                         alpha=alpha),
    }
    if not round2.empty:
        flags = item_flags(round1.iloc[0:0], round2, gold)
        result["all_implausible"] = _records(generation.all_implausible_accuracy(gens, preds, flags))
    files = {"generation_seeds": plots.seed_accuracy(seed_acc, out / "generation_seeds.png",
                                                                 stats.level(alpha)).name,
             "generation_positions": plots.position_bias(positions, out / "generation_positions.png").name}
    return result, files


def _check_asked(root, option: str, asked, found: set, known) -> None:
    """Every name given with ``option`` has scores or generations: a typo is an error, not a
    smaller report. ``known`` (a set, or a function giving one) is what the error offers instead."""
    missing = [name for name in asked or () if name not in found]
    if missing:
        known = known() if callable(known) else known
        raise CurateError(f"{root}: no scores or generations for {option} {', '.join(map(repr, missing))} "
                          f"(the workspace has: {', '.join(sorted(known)) or 'none'})")


def _stored_modes(root) -> set:
    """The modes that hold scores or generations (read only when an asked mode has none: the
    frames in hand hold the asked modes alone)."""
    with open_scores(root) as ws:
        modes = {r[0] for r in ws.conn.execute("SELECT DISTINCT mode FROM scores")}
    with open_generations(root) as ws:
        modes |= {r[0] for r in ws.conn.execute("SELECT DISTINCT mode FROM generations")}
    return modes


@contextmanager
def _stage(bar, name: str):
    """Name the stage on the progress bar while it runs; count it when done."""
    bar.set_postfix_str(name)
    yield
    bar.update(1)


def _formulations(scores) -> tuple[list[str], list[str]]:
    """The formulations present in report order (cloze, letters, rotations by K, others), and
    those that are not rotations."""
    def order(name):
        try:
            kind, k = forms.parse(name)
        except CurateError:
            return (2, 0, name)
        return (0 if kind == "cloze" else 1, k, name)
    present = sorted(scores["formulation"].unique(), key=order)
    return present, [f for f in present if order(f)[1] == 0]


def _core(preds, mode, threshold, norm, out, n_total) -> tuple[dict, list | None, str]:
    """Core curve, the per-item counts file, and the ids at ``threshold`` (None when the
    threshold exceeds the number of models). Items some model has no score for in ``mode``
    are left out of the core and counted (``n_incomplete``)."""
    counts = core.correct_counts(preds, mode)
    n_models = preds.loc[preds["mode"] == mode, "model"].nunique()
    curve = core.core_curve(counts, n_models)
    write_records(counts.to_dict("records"), out / "core_items.csv")
    result = {"mode": mode, "normalization": norm, "models": n_models, "n_items": len(counts),
              "n_incomplete": n_total - len(counts),
              "curve": _records(curve), "items_file": "core_items.csv"}
    ids = None
    if threshold is not None and threshold <= n_models:
        ids = core.core_ids(counts, threshold)
        result.update(threshold=threshold, n_at_threshold=len(ids))
    return result, ids, plots.core_curve(curve, mode, out / "core_curve.png").name


SOURCE_COLUMNS = ["model", "mode", "formulation", "run_id", "origin", "dtype", "device", "engine", "items", "model_hash",
                  "created_at"]


def _provenance(root, items, meta, sources, records) -> dict:
    digest = hashlib.sha256("\n".join(it["content_hash"] for it in items).encode()).hexdigest()
    return {"workspace": str(Path(root).resolve()), **meta, "items": len(items),
            "items_digest": f"sha256:{digest}",
            "score_runs": _records(sources[SOURCE_COLUMNS]),
            "annotations": _records(records.groupby(["annotator", "round", "run_id", "status"], dropna=False)
                                    .size().rename("records").reset_index())}


def _length(items, gold, scores, preds_all, unit, out, suffix) -> tuple[dict, dict]:
    """Spread, gold-is-longest accuracy and value/length correlation in one unit."""
    opt = length.option_lengths(items, unit, "option")
    ctx = length.option_lengths(items, unit, "context+option", mode="full")
    spread_opt, spread_ctx = length.item_spread(opt, gold), length.item_spread(ctx, gold)
    # The study's rule: spread over the scored texts, "gold is longest" over the options alone.
    spread_ctx["gold_longest"] = spread_ctx["item_id"].map(spread_opt.set_index("item_id")["gold_longest"])
    groups = normalize.groups_available(scores)
    result = {
        "spread": {"option": length.spread_summary(spread_opt),
                   "context+option (full-mode context)": length.spread_summary(spread_ctx)},
        "gold_longest_accuracy": _records(length.longest_accuracy(preds_all, spread_opt)),
        "correlation": {"text": "option", "method": "spearman",
                        "rows": _records(length.length_correlation(scores, opt, groups))},
    }
    files = {f"spread{suffix}": plots.spread_histogram(spread_ctx, unit, "context+option",
                                                       out / f"spread{suffix}.png").name}
    # Value vs length for the (model, mode, formulation) with the most normalizations (full mode
    # and cloze first).
    model, mode, formulation = max(groups, key=lambda k: (len(groups[k]), k[1] == "full", k[2] == "cloze", k[0]))
    g = scores[(scores["model"] == model) & (scores["mode"] == mode) & (scores["formulation"] == formulation)]
    binned = length.binned_values(g, opt, groups[(model, mode, formulation)])
    if binned.empty:  # too few items for any length bin: no plot rather than an empty one
        result["value_vs_length_plot"] = None
        return result, files
    files[f"value_vs_length{suffix}"] = plots.value_vs_length(
        binned, f"{model}, {mode} mode, {formulation}: option score vs length by source", unit,
        out / f"value_vs_length{suffix}.png").name
    result["value_vs_length_plot"] = {"model": model, "mode": mode, "formulation": formulation, "unit": unit}
    return result, files


def _annotations(round1, round2, gold, preds, scores, norm, alpha) -> dict:
    if round1.empty and round2.empty:
        return {"present": False}
    flags = item_flags(round1, round2, gold)
    result = {"present": True, "normalization": norm,
              "rates": _records(annotations.label_rates(flags)),
              "error_overlap": _records(overlap := annotations.error_overlap(flags, preds)),
              "error_overlap_mean": _records(annotations.overlap_mean(overlap))}
    if not round2.empty:
        worst = accuracy.worst_predictions(scores, norm)
        result["round2_accuracy"] = _records(accuracy.round2_accuracy(preds, worst, round2, alpha))
    return result


def _item_pages(out, root, items, scores, gens, round1, round2, gold) -> dict:
    """A static page per flagged item (curate.review.browser), listed in the report."""
    from curate.review.browser import FOLDER, flag_reasons, write_item_pages
    from curate.review.data import ReviewData

    if round1.empty and round2.empty:
        return {"flagged": 0, "with_page": 0, "index": None, "rows": []}
    reasons = flag_reasons(round1, round2, gold)
    data = ReviewData(Path(root), items, scores, generations=gens)
    rows = write_item_pages(out, data, pd.concat([round1, round2]), reasons)
    return {"flagged": len(rows), "with_page": sum(r["page"] is not None for r in rows),
            "index": f"{FOLDER}/index.html" if rows else None, "rows": rows}


def _records(df: pd.DataFrame) -> list[dict]:
    return df.to_dict("records")


def _clean(value):
    """JSON-ready: numpy scalars to Python, NaN to None."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
