"""The report's figures, drawn with matplotlib (Agg backend, no display needed).

Each function takes the analysis tables and writes one PNG atomically; none computes a
statistic of its own.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
# Labels are model names and templates, user text: never matplotlib math ("cost $x$" is text).
matplotlib.rcParams["text.parse_math"] = False
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from curate.core.atomic import atomic_path  # noqa: E402

DPI = 110


def _save(fig, path: Path) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def _names(models) -> dict[str, str]:
    """Model labels for axes: the part after the last '/' (an org or folder prefix) when that
    still tells every model apart, else the full labels."""
    models = list(dict.fromkeys(models))
    short = {m: m.split("/")[-1] for m in models}
    return short if len(set(short.values())) == len(models) else {m: m for m in models}


def accuracy_bars(table: pd.DataFrame, normalization: str, modes: list[str], formulations: list[str],
                  path: Path, chance: float = 0.25, level: str = "95%") -> Path:
    """Accuracy on all items per model, one bar per mode (in ``modes`` order) and formulation,
    with its Wilson interval (at ``level``), and the chance level (the mean of 1 / options over
    items). ``table`` holds one normalization per model (``accuracy.own_rows``); ``normalization``
    names the primary one on the axis."""
    t = table[table["subset"] == "all"]
    models = sorted(t["model"].unique())
    bars = [(m, f) for f in formulations for m in modes if ((t["mode"] == m) & (t["formulation"] == f)).any()]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(models) + 2), 4.2))
    width = 0.8 / max(1, len(bars))
    for i, (mode, formulation) in enumerate(bars):
        m = t[(t["mode"] == mode) & (t["formulation"] == formulation)].set_index("model").reindex(models)
        x = np.arange(len(models)) + (i - (len(bars) - 1) / 2) * width
        err = np.vstack([m["accuracy"] - m["ci_low"], m["ci_high"] - m["accuracy"]])
        ax.bar(x, m["accuracy"], width, yerr=err, capsize=2,
               label=mode if len(formulations) == 1 else f"{mode}, {formulation}")
    ax.axhline(chance, color="grey", lw=0.8, ls="--", label=f"chance ({chance:.2f})")
    names = _names(models)
    ax.set_xticks(np.arange(len(models)), [names[m] for m in models], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel(f"accuracy ({normalization})")
    ax.set_ylim(0, 1)
    ax.set_title(f"Accuracy per model and prompt mode ({level} Wilson intervals)")
    ax.legend(fontsize=8, ncol=min(len(bars) + 1, 5), loc="upper left")
    return _save(fig, path)


def core_curve(curve: pd.DataFrame, mode: str, path: Path) -> Path:
    """Share of items that at least k models answer correctly in ``mode``."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.plot(curve["k"], 100 * curve["share"], marker="o")
    for k, s in zip(curve["k"], curve["share"]):
        ax.annotate(f"{100 * s:.0f}", (k, 100 * s), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    ax.set_xlabel("k (models answering correctly)")
    ax.set_ylabel("% of items")
    ax.set_ylim(0, 100)
    ax.set_xticks(curve["k"])
    ax.set_title(f"{mode}-prompt core: items at least k models get right")
    return _save(fig, path)


def value_vs_length(binned: pd.DataFrame, title: str, unit: str, path: Path) -> Path:
    """Mean option value per length bin, one line per source, one panel per normalization
    (``binned``: normalization, source, length_bin, mean, n)."""
    norms = list(dict.fromkeys(binned["normalization"]))
    fig, axes = plt.subplots(1, len(norms), figsize=(4.2 * len(norms), 3.6), squeeze=False)
    for ax, norm in zip(axes[0], norms):
        for source, g in binned[binned["normalization"] == norm].groupby("source"):
            ax.plot(g["length_bin"], g["mean"], marker=".", label=source)
        ax.set_xlabel(f"option length ({unit})")
        ax.set_ylabel(f"mean {norm}")
        ax.set_title(norm, fontsize=9)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.subplots_adjust(wspace=0.4)
    return _save(fig, path)


def spread_histogram(spread: pd.DataFrame, unit: str, text: str, path: Path) -> Path:
    """Histogram of the relative length spread per source, with the study's 0.15/0.3 cuts."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    bins = np.linspace(0, 1, 41)
    for source, g in spread.groupby(spread["source"].fillna("(none)")):
        ax.hist(g["spread"], bins=bins, alpha=0.55, label=f"{source} (n={len(g)})")
    for cut in (0.15, 0.3):
        ax.axvline(cut, color="k", lw=0.8, ls="--")
    ax.set_xlabel(f"relative length spread ({unit}, {text})")
    ax.set_ylabel("items")
    ax.set_title("(longest - shortest) / longest")
    ax.legend(fontsize=8)
    return _save(fig, path)


def _conditions(table: pd.DataFrame) -> list[str]:
    """One label per row: model, mode, template and settings."""
    names = _names(table["model"])
    return [f"{names[r.model]} {r.mode} [{r.template}, {r.settings}]" for r in table.itertuples()]


def seed_accuracy(table: pd.DataFrame, path: Path, level: str = "95%") -> Path:
    """Generation accuracy of every seed (dots, Wilson intervals at ``level``) per condition,
    and the mean over seeds (bar)."""
    labels = _conditions(table)
    conditions = list(dict.fromkeys(labels))
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(conditions) + 1.6))
    y = {c: i for i, c in enumerate(conditions)}
    means = table.assign(label=labels).groupby("label", sort=False)["accuracy"].mean()
    ax.barh([y[c] for c in means.index], means.to_numpy(), color="#dde6f0", height=0.6, label="mean over seeds")
    err = np.vstack([table["accuracy"] - table["ci_low"], table["ci_high"] - table["accuracy"]])
    jitter = (table["seed"].rank(method="dense").to_numpy() - 1) / max(1, table["seed"].nunique()) * 0.4 - 0.2
    ax.errorbar(table["accuracy"], [y[c] + j for c, j in zip(labels, jitter)], xerr=err, fmt="o", ms=4,
                capsize=2, lw=0.8, color="#1f4e79", label=f"one seed ({level} Wilson)")
    ax.set_yticks(range(len(conditions)), conditions, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("accuracy (unparsed replies count as not correct)")
    ax.set_title("Generation accuracy per seed")
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


def position_bias(positions: pd.DataFrame, path: Path) -> Path:
    """Share of parsed replies choosing each displayed position, one bar group per condition,
    against the share of items whose gold is shown there (ticks)."""
    t = positions.assign(label=_conditions(positions))
    conditions = list(dict.fromkeys(t["label"]))
    k = int(t["position"].max())
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(conditions) + 2), 4))
    width = 0.8 / k
    for p in range(1, k + 1):
        part = t[t["position"] == p].set_index("label").reindex(conditions)
        x = np.arange(len(conditions)) + (p - 1 - (k - 1) / 2) * width
        ax.bar(x, part["chosen_share"], width, label=f"position {p}")
        ax.scatter(x, part["gold_share"], marker="_", color="k", s=80, zorder=3,
                   label="gold shown here" if p == 1 else None)
    ax.set_xticks(np.arange(len(conditions)), conditions, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("share of parsed replies")
    ax.set_ylim(0, 1)
    ax.set_title("Position bias: which displayed position the model names")
    ax.legend(fontsize=7, ncol=k + 1, loc="upper left")
    return _save(fig, path)


def signal_histogram(frame: pd.DataFrame, column: str, title: str, path: Path) -> Path:
    """One histogram of ``column`` per model (frame: model, column), with each model's top-5% cut."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    names = _names(frame["model"])
    for model, g in frame.groupby("model", sort=False):
        values = g[column].dropna()
        ax.hist(values, bins=40, alpha=0.55, label=f"{names[model]} (n={len(values)})")
        if len(values):
            ax.axvline(np.quantile(values, 0.95), lw=0.8, ls="--", color="k")
    ax.set_xlabel(column)
    ax.set_ylabel("items")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(fig, path)


def discrimination_vs_difficulty(stats: pd.DataFrame, flagged: pd.Series, path: Path) -> Path:
    """Each item's discrimination against its difficulty (share of models right), the items
    flagged as likely label errors marked."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.scatter(stats["difficulty"], stats["discrimination"], s=6, alpha=0.35, color="0.45", label="items")
    hit = stats[flagged.to_numpy(dtype=bool)]
    ax.scatter(hit["difficulty"], hit["discrimination"], s=14, color="tab:red", label=f"likely label errors ({len(hit)})")
    ax.axhline(0, lw=0.8, ls="--", color="k")
    ax.set_xlabel("difficulty: share of models right")
    ax.set_ylabel("discrimination (corrected item-total)")
    ax.set_title("Items: discrimination vs difficulty")
    ax.legend(fontsize=8)
    return _save(fig, path)
