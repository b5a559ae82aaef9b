"""The report's sections: one module each, found here, run and shown in the order of their ``ORDER``.

A section module holds everything about its part of the report:

- ``ORDER`` (a number): where it comes; its heading number is its place among the sections shown (a section with nothing to show is left out of the numbering).
- ``ABOUT``: ``{metrics key: what it holds}`` for the keys it adds to metrics.json (the file's
  "about" lists them).
- ``compute(ctx) -> dict``: its metrics entries, from a ``Context`` (the workspace's data read
  once, the run's options); it may add plot files to ``ctx.plots`` and read what sections before
  it left there (``ctx.subsets``).
- ``render(m, number, out) -> blocks``: its part of report.md and report.html, from the metrics
  ``m`` alone (blocks as ``curate.analyses.render`` takes them; images read from ``out``).
- ``findings(m) -> list`` (optional): its lines on the report's first screen (flags per signal, a
  sentence, likely broken items, a table), from the metrics alone (``_findings`` documents them).
- ``FILES`` (optional): regular expressions of the file names it writes into the report folder,
  ``FOLDERS`` the folders (``curate.analyses.outdir`` replaces them with the next report's).
- ``SCORES = False`` (optional): it also runs on a workspace that holds generations or stored
  answers but no scores.

Adding a section is adding its module here; modules whose name starts with ``_`` are helpers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pandas as pd

from curate.analyses import render
from curate.core.registry import Registry
from curate.analyses.sections import _findings
from curate.analyses.sections._common import p_text as _p_text  # noqa: F401 (tests read it here)
from curate.analyses.stats import level

__all__ = ["Context", "registry", "report_blocks"]


#: The sections (``curate.core.registry``).
SECTIONS = Registry(__name__, what="report section", required=("ORDER", "ABOUT", "compute", "render"))


def registry() -> list[ModuleType]:
    """Every section, in report order."""
    return sorted(SECTIONS.modules.values(), key=lambda m: (m.ORDER, m.__name__))


def name(section: ModuleType) -> str:
    return section.__name__.rpartition(".")[2]


@dataclass
class Context:
    """What the sections' ``compute`` read. ``scores`` is None for a workspace with generations
    or stored answers only; the prediction frames then are empty. Sections run in order, so a later one may read
    what an earlier one added (``subsets``, ``plots``)."""
    root: Path
    out: Path                      # the folder the report is built in: plots are written here
    items: list[dict]
    gold: pd.Series                # item_id -> gold option index
    round1: pd.DataFrame           # annotation records per round (may be empty)
    round2: pd.DataFrame
    gens: pd.DataFrame             # generated answers and their runs (may be empty)
    gen_runs: pd.DataFrame
    alpha: float
    n_resamples: int
    seed: int
    length_units: tuple = ("chars",)
    core_mode: str = "zero"
    core_threshold: int | None = 7
    answers: pd.DataFrame | None = None   # stored answers (scoring.answers.read_answers), None: none
    ws: object = None                     # the open workspace (the run's one connection), for what else a section reads
    scores: pd.DataFrame | None = None    # the scores of one shot count (0 where present)
    fewshot_scores: pd.DataFrame | None = None  # every shot count's scores (the few-shot section)
    normalization: str | None = None   # the primary normalization: the one named, or most models have
    normalizations: dict = field(default_factory=dict)  # model -> its normalization (the primary where it has it)
    preds_all: pd.DataFrame | None = None  # argmax predictions under every normalization
    preds: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["model", "mode", "formulation", "item_id", "pred", "gold", "correct"]))  # each model's own
    mode_order: list = field(default_factory=list)
    formulation_order: list = field(default_factory=list)
    base_forms: list = field(default_factory=list)   # the formulations that are not rotations
    primary: str | None = None                       # the primary formulation
    decisions: object = None                         # a `curate filter --out` folder read (review.data.Decisions)
    subsets: dict = field(default_factory=dict)      # name -> item ids (all, each source, ...)
    plots: dict = field(default_factory=dict)        # plot name -> file name in ``out``

    @property
    def own_normalizations(self) -> dict:
        """The models without the primary normalization, each with the one it is read under."""
        return {m: n for m, n in self.normalizations.items() if n != self.normalization}

    @property
    def base(self) -> pd.DataFrame:
        """Primary-normalization predictions in the base formulations (rotations are read by the
        position audit alone)."""
        return self.preds[self.preds["formulation"].isin(self.base_forms)]

    @property
    def primary_preds(self) -> pd.DataFrame:
        """Primary-normalization predictions in the primary formulation."""
        return self.preds[self.preds["formulation"] == self.primary]


def runs_for(ctx: Context, section: ModuleType) -> bool:
    """Whether ``section`` runs on this workspace (sections need scores unless they say not)."""
    return ctx.scores is not None or not getattr(section, "SCORES", True)


def about() -> dict:
    """Each section's metrics keys and what they hold, in report order."""
    return {key: text for section in registry() for key, text in section.ABOUT.items()}


def report_blocks(m: dict, out: Path) -> list:
    """The report as render blocks: the title, what the audit found (``_findings``: the first
    screen), the header, then each section that has metrics here, its heading anchored by its
    name (``#accuracy``) for the findings' links."""
    shown = [section for section in registry()
             if m["settings"]["normalization"] is not None or not getattr(section, "SCORES", True)]
    shown = [section for section in shown if section.render(m, 0, out)]  # numbered without gaps
    details, contents, found = [], [("About this report", "about")], [("about", intro_findings(m))]
    for number, section in enumerate(shown, 1):
        blocks = section.render(m, number, out)
        heading = next((i for i, b in enumerate(blocks) if b[0] == "h2"), None)
        if heading is not None:
            blocks[heading] = ("h2", blocks[heading][1], name(section))
            contents.append((blocks[heading][1], name(section)))
        details += blocks
        if hasattr(section, "findings"):
            found.append((name(section), section.findings(m)))
    return [("h1", "benchcurate audit report"), _findings.block(found, contents), *header_blocks(m), *details]


def intro_findings(m: dict) -> list:
    """The paragraph's first sentence: what was audited."""
    s, prov = m["settings"], m["provenance"]
    what = (f"{len(s['models'])} model(s) in {len(s['modes'])} prompt mode(s) ({', '.join(s['modes'])})")
    answering = len((m.get("suspects") or {}).get("answer_models") or [])
    if answering:  # models read from their answers alone (issue 40): counted apart, as the suspects section does
        what += f" and {answering} more that only gave answers"
    return [_findings.Sentence([f"This audit read {prov['items']} items of ", render.Lit(str(prov["benchmark"])),
                                f" ({prov['split']}), answered by {what}."])]


#: What each normalization's number is, for the report's readers (scoring/normalize.py computes them).
NORMALIZATION_TEXT = {
    "sum": "the option's total log-probability given the context (lm-eval `acc`)",
    "token": "`sum` divided by the option's token count",
    "char": "`sum` divided by the option's character count (lm-eval `acc_norm`)",
    "byte": "`sum` divided by the option's UTF-8 byte count",
    "seq_mean": "the mean log-probability over every predicted token of context + \" \" + option, i.e. minus "
                "the language-model loss of the whole sequence (the reference study's score)",
    "study_sum": "the reference study's released total log-probability",
    "study_byte_mean": "the reference study's released per-byte log-probability",
}


def scores_text(prov: dict, normalization: str) -> list[str]:
    """Which scores were computed here and which imported, and what the primary normalization
    is (a paragraph: model labels and origins are workspace text, kept literal)."""
    runs = prov["score_runs"]
    imported = sorted({r["model"] for r in runs if str(r.get("origin", "")).startswith("imported")})
    computed = sorted({r["model"] for r in runs if not str(r.get("origin", "")).startswith("imported")})
    origins = sorted({r["origin"].split(":", 1)[1] for r in runs if str(r.get("origin", "")).startswith("imported:")})
    parts = [f"`{normalization}` is {NORMALIZATION_TEXT.get(normalization, 'a stored score column')}."]
    if imported:
        parts += [f" The scores of {len(imported)} model(s) were imported (", render.Lit(", ".join(origins)),
                  "), not computed by benchcurate: ", render.Lit(", ".join(imported)), "."]
    if computed:
        parts += [f" The scores of {len(computed)} model(s) were computed here: ", render.Lit(", ".join(computed)), "."]
    return parts


def _own_text(s: dict) -> str:
    """The models read under another normalization than the primary (they lack its scores)."""
    own = s.get("own_normalizations") or {}
    if not own:
        return ""
    why = s.get("own_normalization_why") or {}
    return ("; the models without it are read under their own: " +
            ", ".join(f"{model} `{norm}`" + (f" ({why[model]})" if model in why else "")
                      for model, norm in sorted(own.items())))


def _incomplete_text(s: dict) -> str:
    """Models whose normalization lacks values on some options: those items are left out."""
    gaps = s.get("incomplete") or {}
    if not gaps:
        return ""
    return (" Items a model has no value for are left out of its predictions: " +
            "; ".join(f"{model}: {text}" for model, text in sorted(gaps.items())) + ".")


def header_blocks(m: dict) -> list:
    """The title, what was read, and how to read the numbers."""
    s, prov = m["settings"], m["provenance"]
    blocks = [("h2", "About this report", "about"),
              ("p", f"Workspace `{prov['workspace']}`: {prov['benchmark']} ({prov['split']}), {prov['items']} items "
                    f"(`{prov['items_digest'][:23]}`). Score runs: {len(prov['score_runs'])}; annotation "
                    f"records: {sum(r['records'] for r in prov['annotations'])}. Generated {m['generated_at']} by benchcurate "
                    f"{m['toolkit_version']}. Every number below is in `metrics.json`.")]
    if s["normalization"] is None:  # a workspace with generated or stored answers only
        return blocks + [("p", "No scores are present in the workspace (no log-likelihoods): its models are read from "
                               "their answers alone, generated (curate generate) or imported (curate import-answers), "
                               "and the sections that read scores are left out. Intervals are "
                               f"{level(s['alpha'])} Wilson score intervals; tests use alpha = {s['alpha']}.")]
    blocks += [("p", f"Predictions are the argmax option. Unless a table says otherwise they use the "
                     f"`{s['normalization']}` normalization{_own_text(s)}.{_incomplete_text(s)} Intervals are "
                     f"{level(s['alpha'])} Wilson score intervals; tests use alpha = {s['alpha']}."),
               ("p", scores_text(prov, s["normalization"]))]
    runs = pd.DataFrame(prov["score_runs"])
    return blocks + [("p", "Scores read: each model and mode from one source (`origin` scored here, or imported), "
                           "with the run that stored them."),
                     ("table", runs[[c for c in ("model", "mode", "formulation", "fewshot", "origin", "dtype",
                                                 "device", "engine", "items", "run_id") if c in runs]])]
