"""Item-validity signals against experts' labels: MMLU-Redux's development split.

The data (../shared/data/mmlu-redux-dev, its README): 1900 MMLU test items of 19 subjects with
MMLU-Redux 2.0's expert labels (186 errors), the option each of 20 frontier models chose in the
Stanford HELM MMLU runs (letters only, no probabilities), and seven 2024 LLM judges' verdicts on
398 items. The other 38 subjects are the held-out test: this script reads only the dev split.

The response matrix is what a user's workspace holds after ``curate init --benchmark generic``
and ``curate import-answers --format table`` (``--cli`` runs exactly those commands and checks
that ``curate export WORKSPACE item-stats`` gives the same suspect_score as this script).
Printed for each signal: AUROC over all labelled errors, precision at 50, 100 and 200 (items tied
at the cut counted at their average), AUROC per kind (the kind's items against the items
labelled ok), each with a 95% bootstrap interval over the items; which per-kind score beats
1 - accuracy on its own kind; the panel the default ranking saw and the combination it chose;
the ranking with the judges' verdicts pooled in (``curate.validity.judges``) against without,
on the items they judged; and the same signals on random panels of 5 and 10 of the 20 models.

    .venv/bin/python benchmarks/real_errors.py [--resamples 300] [--cli]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "mmlu-redux-dev"
KINDS = {"wrong groundtruth": "wrong key", "multiple correct answers": "several correct",
         "no correct answer": "no right answer", "bad question clarity": "question unclear",
         "bad options clarity": "options unclear", "expert": "needs an expert"}
#: Per-kind scores and the kind each is named for: used to claim that kind only where it beats 1 - accuracy.
KIND_SCORES = {"several_correct_score": "multiple correct answers", "no_right_answer_score": "no correct answer",
               "label_error_score": "wrong groundtruth"}
AT = (50, 100, 200)


def load() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    items = pd.read_json(DATA / "items.jsonl", lines=True)
    answers = pd.read_csv(DATA / "answers.csv", keep_default_na=False, dtype=str)
    verdicts = pd.read_csv(DATA / "verdicts.csv", dtype=str)
    return items, answers, verdicts


def responses_of(items: pd.DataFrame, answers: pd.DataFrame, models=None):
    """The response matrix of the answers (letters as the item's options; an empty cell an
    unreadable reply), as ``curate import-answers --format table`` stores them."""
    from curate.validity.responses import answers_matrix

    if models is not None:
        answers = answers[answers["model"].isin(models)]
    letters = {c: i for i, c in enumerate("ABCD")}
    frame = pd.DataFrame({"model": answers["model"], "item_id": answers["item"],
                          "choice": answers["choice"].map(letters).astype("Float64"), "run": "helm",
                          "source": "table"})
    its = [{"item_id": r.id, "gold": int(r.answer), "options": list(r.choices)} for r in items.itertuples()]
    return answers_matrix(frame, its)


def signals(responses, verdicts: pd.DataFrame | None = None, full: bool = True) -> dict[str, np.ndarray]:
    """Per signal, one score per item of the responses (higher = more likely broken); ``full``:
    every signal, else the default ranking and the two simple baselines."""
    from curate.validity.item_stats import signed_isotonic_r2
    from curate.validity.item_table import item_table, with_verdicts
    from curate.validity.suspects import vote_weights

    _, table = item_table(pd.DataFrame(), items_of(responses), answers=answers_of(responses))
    table = with_verdicts(table, verdicts)
    table = table.set_index("item_id").reindex(responses.item_ids)
    correct = np.asarray(responses.correct, dtype=float)
    w = vote_weights(responses)
    right = np.where(np.isnan(correct), 0, correct)
    seen = ~np.isnan(correct)
    out = {
        "suspect_score": table["suspect_score"].to_numpy(float),
        "ability-weighted votes against the key": 1 - (w[:, None] * right).sum(0) / np.maximum((w[:, None] * seen).sum(0), 1e-12),
        "1 - accuracy": 1 - np.nanmean(correct, axis=0),
    }
    if full:
        out |= {"IRT difficulty (irt_b)": table["irt_b"].to_numpy(float),
                "negative discrimination": -table["discrimination"].fillna(0).to_numpy(float),
                "infit": table["infit"].to_numpy(float),
                "outfit": table["outfit"].to_numpy(float),
                "signed isotonic R2 (negated)": -np.nan_to_num(signed_isotonic_r2(correct), nan=0.0),
                **{name: table[name].to_numpy(float)
                   for name in ("label_error_score", "several_correct_score", "no_right_answer_score")}}
    return {k: np.nan_to_num(v, nan=np.nanmin(v) if np.isfinite(v).any() else 0.0) for k, v in out.items()}


def items_of(responses) -> list[dict]:
    return [{"item_id": i, "gold": int(g), "options": [""] * int(n)}
            for i, g, n in zip(responses.item_ids, responses.gold, responses.n_options)]


def answers_of(responses) -> pd.DataFrame:
    """The answers the matrix was built from, back as a ``read_answers`` frame."""
    m, i, o = np.nonzero(responses.runs)
    rows = [pd.DataFrame({"model": np.asarray(responses.models)[m], "item_id": responses.item_ids[i],
                          "choice": pd.array(o, dtype="Float64"), "run": "helm", "source": "table"})]
    um, ui = np.nonzero(responses.unparsed)
    rows.append(pd.DataFrame({"model": np.asarray(responses.models)[um], "item_id": responses.item_ids[ui],
                              "choice": pd.array([None] * len(um), dtype="Float64"), "run": "helm", "source": "table"}))
    return pd.concat(rows, ignore_index=True)


def auroc(score: np.ndarray, label: np.ndarray) -> float:
    """Mann-Whitney AUROC: P(a labelled item scores above an unlabelled one), ties half."""
    pos, neg = np.sort(score[label]), np.sort(score[~label])
    if not len(pos) or not len(neg):
        return float("nan")
    below = np.searchsorted(neg, pos, side="left")
    tied = np.searchsorted(neg, pos, side="right") - below
    return float((below.sum() + 0.5 * tied.sum()) / (len(pos) * len(neg)))


def precision_at(score: np.ndarray, label: np.ndarray, k: int) -> float:
    """Precision among the k highest scores, the items tied at the cut counted at their average."""
    cut = np.sort(score)[::-1][k - 1]
    above, tied = score > cut, score == cut
    return float((label[above].sum() + (k - above.sum()) * label[tied].mean()) / k)


def metrics(score: np.ndarray, kinds: np.ndarray) -> dict[str, float]:
    broken = kinds != "ok"
    out = {"AUROC": auroc(score, broken), **{f"P@{k}": precision_at(score, broken, k) for k in AT}}
    for kind, short in KINDS.items():
        mask = (kinds == kind) | ~broken
        out[short] = auroc(score[mask], kinds[mask] == kind)
    return out


def with_intervals(score: np.ndarray, kinds: np.ndarray, resamples: int, seed: int = 0) -> dict[str, tuple]:
    """metric -> (value, low, high), the 95% percentile bootstrap over the items."""
    rng = np.random.default_rng(seed)
    point = metrics(score, kinds)
    draws = [metrics(score[i], kinds[i]) for i in (rng.integers(0, len(score), len(score)) for _ in range(resamples))]
    return {k: (v, *np.nanpercentile([d[k] for d in draws], [2.5, 97.5])) for k, v in point.items()}


def table(found: dict[str, dict], columns) -> list[str]:
    lines = [f"{'signal':<40}" + "".join(f"{c:>20}" for c in columns)]
    for name, m in found.items():
        lines.append(f"{name:<40}" + "".join(f"{m[c][0]:>8.3f} [{m[c][1]:.2f},{m[c][2]:.2f}]" for c in columns))
    return lines


def kind_claims(found: dict[str, dict]) -> list[str]:
    """Which per-kind score beats 1 - accuracy on its own kind (its interval aside: the point)."""
    lines = []
    for score, kind in KIND_SCORES.items():
        own, base = found[score][KINDS[kind]][0], found["1 - accuracy"][KINDS[kind]][0]
        verdict = "claims it" if own > base else "does NOT beat 1 - accuracy: not used to claim it"
        lines.append(f"  {score:<24} on '{KINDS[kind]}': {own:.3f} vs 1 - accuracy {base:.3f}: {verdict}")
    return lines


def verdicts_frame(verdicts: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"source": verdicts["judge"], "kind": "judge", "item_id": verdicts["item"],
                         "verdict": verdicts["verdict"], "answer": None})


def judged_lines(responses, kinds, verdicts: pd.DataFrame, resamples: int) -> list[str]:
    """The default ranking with and without the judges' verdicts, on the items they judged."""
    from curate.validity.judges import pool
    without = signals(responses)["suspect_score"]
    frame = verdicts_frame(verdicts)
    pooled, _, rel = pool(without, responses.item_ids, frame)
    judged = np.isin(responses.item_ids, frame["item_id"].unique())
    rng = np.random.default_rng(1)
    broken = kinds[judged] != "ok"
    a, b = without[judged], pooled[judged]
    diffs = [auroc(b[i], broken[i]) - auroc(a[i], broken[i])
             for i in (rng.integers(0, judged.sum(), judged.sum()) for _ in range(resamples))]
    lo, hi = np.nanpercentile(diffs, [2.5, 97.5])
    lines = [f"judges' verdicts ({frame['source'].nunique()} judges, {judged.sum()} items judged, "
             f"{broken.sum()} labelled errors among them):",
             "  " + ", ".join(f"{r.source} weight {r.weight:.2f} (agreement {r.agreement:.2f})" for r in rel.itertuples()),
             f"  AUROC on the judged items: without {auroc(a, broken):.3f}, with {auroc(b, broken):.3f} "
             f"(difference {auroc(b, broken) - auroc(a, broken):+.3f}, 95% [{lo:+.3f}, {hi:+.3f}])"]
    lines.append(f"  ceiling: a logistic regression fitted on the experts' labels (the ranking's quantile log-odds and "
                 f"each judge's verdicts, five-fold): AUROC {supervised_ceiling(without, responses.item_ids, frame, judged, kinds):.3f}")
    whole = metrics(pooled, kinds)
    lines.append(f"  on all {len(kinds)} items with the verdicts: AUROC {whole['AUROC']:.3f}, "
                 f"P@50 {whole['P@50']:.3f}, P@100 {whole['P@100']:.3f}")
    return lines


def supervised_ceiling(score, item_ids, frame: pd.DataFrame, judged: np.ndarray, kinds: np.ndarray) -> float:
    """What the labels themselves make of the same evidence: five-fold cross-validated logistic
    regression on the judged items (a bound the unsupervised pooling cannot use labels to reach)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_predict
    from curate.validity.judges import per_item, quantile_log_odds

    votes = per_item(frame).pivot(index="item_id", columns="source", values="broken")
    x = pd.Series(quantile_log_odds(score), index=item_ids)[judged]
    features = np.column_stack([x.to_numpy(), votes.reindex(x.index).fillna(0.5).to_numpy()])
    broken = kinds[judged] != "ok"
    p = cross_val_predict(LogisticRegression(max_iter=1000), features, broken, cv=5, method="predict_proba")[:, 1]
    return auroc(p, broken)


def panels(items, answers, kinds_of, draws: int = 5) -> list[str]:
    """suspect_score and the two simple baselines on random panels of 5 and 10 models (mean over draws)."""
    models = sorted(answers["model"].unique())
    rng = np.random.default_rng(2)
    lines = []
    for size in (5, 10):
        found = []
        for _ in range(draws):
            chosen = list(rng.choice(models, size, replace=False))
            r = responses_of(items, answers, chosen)
            kinds = kinds_of(r)
            s = signals(r, full=False)
            found.append({n: metrics(s[n], kinds) for n in ("suspect_score", "ability-weighted votes against the key",
                                                            "1 - accuracy")})
        for name in found[0]:
            mean = {k: np.mean([f[name][k] for f in found]) for k in ("AUROC", "P@50", "P@100")}
            lines.append(f"  {size:>2} models  {name:<40} AUROC {mean['AUROC']:.3f}  P@50 {mean['P@50']:.3f}  "
                         f"P@100 {mean['P@100']:.3f}")
    return lines


def through_cli(items: pd.DataFrame, answers: pd.DataFrame, expected: pd.Series) -> str:
    """init (generic, ids: [id]), import-answers by the benchmark's own ids, export item-stats:
    the export's suspect_score must equal this script's."""
    curate = [sys.executable, "-m", "curate"]
    with tempfile.TemporaryDirectory() as tmp:
        ws, out = Path(tmp) / "ws", Path(tmp) / "stats.csv"
        data = Path(tmp) / "items.jsonl"
        items.drop(columns=["error_type", "correct_answer"]).to_json(data, orient="records", lines=True)
        table = Path(tmp) / "answers.csv"
        answers.to_csv(table, index=False)
        for cmd in (["init", str(ws), "--benchmark", "generic", "--data", str(data), "--columns",
                     "{question: question, choices: choices, answer: answer, answer_format: index, ids: [id], "
                    "source: subject}"],
                    ["import-answers", str(ws), "--format", "table", str(table)],
                    ["export", str(ws), "item-stats", "--out", str(out)]):
            done = subprocess.run([*curate, *cmd], cwd=ROOT, capture_output=True, text=True)
            if done.returncode:
                return f"through the CLI: `curate {cmd[0]}` failed: {done.stderr.strip().splitlines()[-1:]}"
        stats = pd.read_csv(out)
    got = stats.set_index(stats["row_index"].map(lambda r: items["id"].iloc[int(r)]))["suspect_score"]
    diff = float(np.max(np.abs(got.reindex(expected.index).to_numpy() - expected.to_numpy())))
    return (f"through the CLI (init, import-answers by the benchmark's own ids, export item-stats): max |suspect_score "
            f"difference| {diff:.2e} over {len(got)} items")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=300, help="bootstrap resamples (default 300)")
    parser.add_argument("--cli", action="store_true", help="also run the user's commands and compare the export")
    args = parser.parse_args()
    start = time.perf_counter()
    from curate.validity.suspects import ability_spread, choose_basis

    items, answers, verdicts = load()
    labels = items.set_index("id")["error_type"]
    responses = responses_of(items, answers)
    kinds = labels.reindex(responses.item_ids).to_numpy()
    found = {name: with_intervals(score, kinds, args.resamples) for name, score in signals(responses).items()}
    basis, why = choose_basis(responses)
    print(f"MMLU-Redux dev split: {len(kinds)} items, {int((kinds != 'ok').sum())} labelled errors, "
          f"{len(responses.models)} models' answers; values with 95% bootstrap intervals ({args.resamples} resamples)\n")
    print("\n".join(table(found, ["AUROC", "P@50", "P@100", "P@200"])))
    print("\nAUROC per kind (the kind's items against the items labelled ok):")
    print("\n".join(table(found, list(KINDS.values()))))
    print("\nper-kind scores against 1 - accuracy on their own kind:")
    print("\n".join(kind_claims(found)))
    print("\nrandom panels (mean of 5 draws):")
    print("\n".join(panels(items, answers, lambda r: labels.reindex(r.item_ids).to_numpy())))
    if args.cli:
        expected = pd.Series(signals(responses)["suspect_score"], index=responses.item_ids)
        print("\n" + through_cli(items, answers, expected))
    print()
    print("\n".join(judged_lines(responses, kinds, verdicts, args.resamples)))
    print(f"\ndefault ranking: suspect_score ({basis}, ability spread {ability_spread(responses):.2f}): {why}")
    best = {m: max(found[s][m][0] for s in ("ability-weighted votes against the key", "1 - accuracy"))
            for m in ("AUROC", "P@50", "P@100")}
    print("suspect_score vs the best simple baseline: " + ", ".join(
        f"{m} {found['suspect_score'][m][0]:.3f} vs {best[m]:.3f}" for m in best))
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
