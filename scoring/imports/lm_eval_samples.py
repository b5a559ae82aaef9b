"""``--format lm-eval-samples``: per-option log-likelihoods from lm-evaluation-harness 0.4.x runs.

``lm_eval --log_samples --output_path OUT`` writes, per model folder and run (one date id),
``samples_<task>_<date>.jsonl`` (one sample per document: ``doc_id``, ``doc``, ``target``,
``arguments`` ``{gen_args_i: {arg_0: context, arg_1: continuation}}`` and ``resps``
``[[[loglikelihood, is_greedy]], ...]`` as strings) and ``results_<date>.json`` (model name and
args, revision, dtype, ``n-shot`` per task). The same records as parquet (``samples_*.parquet``,
as leaderboards publish their "details") and gzipped jsonl are read alike.

Each sample is matched to a workspace item by content: its first request's context (the text
after its last blank line, so k-shot contexts find their item too) looks up the items whose
requests in some formulation (cloze, letters) have that context; the one whose every (context,
continuation) equals the sample's requests is it (k-shot: the sample's context is the item's
with the shots between the description and the item). Then the sample's ``doc`` must agree with
the item's own ids and raw context fields, and its ``target`` with the item's gold. Anything else
is a CurateError naming the file, doc_id and field, and nothing of the import is stored.

A task `curate export WORKSPACE lm-eval-tasks` wrote says in its config's ``metadata.benchcurate``
(the results file's ``configs``) which prompt mode, formulation and shot count it holds; its samples
are matched by the item id and content hash their ``doc`` carries, and their requests must be the
item's in that mode and formulation (k-shot: with the shots between its description and itself).

Each sample file is one score run; rows go to the exported task's mode, formulation and shot count,
or for any other task to mode ``full``, the matched formulation and the task's shot count, under the
model's label.
"""
from __future__ import annotations

import contextlib
import gzip
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from curate.items import formulations as forms
from curate.items.adapters import from_record
from curate.items.fewshot import Settings, description_of
from curate.items.canonical import MODES
from curate.core.errors import CurateError, InputError
from curate.items.sources import file_sha256
from scoring.models import converted_name
from scoring.store import add_run, check_label, delete_scores, label_lock, open_scores, write_scores

DESCRIPTION = ("lm-evaluation-harness 0.4.x --log_samples output: samples_<task>_<date>.jsonl (or .jsonl.gz, "
               ".parquet) with the results_<date>.json beside them; files or whole --output_path trees")
ORIGIN = "imported:lm-eval-samples"
MODE = "full"  # of samples of a task not exported by benchcurate
#: The key of an exported task's ``metadata`` saying what it holds (``curate.release.lm_eval_ablations``).
EXPORT_KEY = "benchcurate"
SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[0-9.\-]+?)\.(?:jsonl|jsonl\.gz|parquet)$")
#: The normalizations the stored columns give (no token counts: they need the model's tokenizer).
NORMALIZATIONS = ("sum", "char", "byte")


# --- finding the runs --------------------------------------------------------------------------

@dataclass
class Run:
    """One lm-eval run: its results file and the sample files beside it (one per task)."""
    results: Path
    samples: list[Path] = field(default_factory=list)
    _info: dict | None = field(default=None, init=False, repr=False, compare=False)

    def info(self) -> dict:
        """The results file, read once: its model labels the run, its shot counts each task."""
        if self._info is None:
            self._info = _read_results(self.results)
        return self._info


def find_runs(paths) -> list[Run]:
    """The runs named by ``paths``: sample files, results files (every sample file of their
    run) or folders (every sample file under them); an error for a path that is none of these."""
    files: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = [f for f in path.rglob("samples_*") if SAMPLES.match(f.name)]
            if not found:
                raise InputError("no lm-eval sample files (samples_<task>_<date>.jsonl) under this folder",
                                 path=str(path))
            files.update(found)
        elif SAMPLES.match(path.name):
            files.add(path)
        elif path.suffix == ".json" and (date := _date_of_results(path)):
            files.update(f for f in path.parent.glob(f"samples_*_{date}.*") if SAMPLES.match(f.name))
        else:
            raise InputError("not an lm-eval samples file (samples_<task>_<date>.jsonl, .jsonl.gz or .parquet), "
                             "results file or folder", path=str(path))
    runs: dict[Path, Run] = {}
    for f in sorted(files):
        results = _results_beside(f)
        runs.setdefault(results, Run(results)).samples.append(f)
    return [runs[k] for k in sorted(runs)]


def _date_of_results(path: Path) -> str | None:
    match = re.search(r"_(\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.json$", path.name)
    return match.group(1) if match else None


def _results_beside(sample: Path) -> Path:
    date = SAMPLES.match(sample.name).group("date")
    found = sorted(p for p in sample.parent.glob(f"*_{date}.json") if not p.name.startswith("samples_"))
    if len(found) != 1:
        what = "no results file" if not found else f"{len(found)} results files"
        raise InputError(f"{what} *_{date}.json beside it (lm-eval writes one per run: it names the model and "
                         f"each task's shot count)", path=str(sample))
    return found[0]


def _read_results(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable results file: {exc}", path=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
        raise InputError("not an lm-eval results file (no 'config' object)", path=str(path), field="config")
    return data


#: A Hugging Face Hub cache folder: .../models--ORG--NAME/snapshots/COMMIT (the Hub id's "/" as "--").
HUB_SNAPSHOT = re.compile(r"(?:^|/)models--(?P<repo>[^/]+)/snapshots/[0-9a-f]{40}/?$")


def model_label(results: dict, path: Path) -> str:
    """The model's name as the results file gives it (``model_name``, else ``pretrained=`` of its
    model args). lm-eval gives a model run from a local folder as the folder's path, so a path is
    named by a name a reader knows: a Hub cache snapshot by its Hub id, a folder ``curate score``
    converted from a GGUF file by the name it converted it under (``smollm2-135m``), any other
    folder by its last component."""
    name = results.get("model_name") or _model_args(results).get("pretrained")
    if not name:
        raise InputError("names no model (no model_name, no pretrained= in config.model_args); give --label",
                         path=str(path), field="model_name")
    name = _checked(str(name), path)
    if not name.startswith(("/", "./", "../", "~")):
        return name  # a Hub id
    if hub := HUB_SNAPSHOT.search(name):
        return hub.group("repo").replace("--", "/")
    return converted_name(name) or Path(name).name


def _checked(name: str, path: Path) -> str:
    """A model name from a results file, as every stored model name is checked (``curate.core.names``)."""
    from curate.core.names import model_name, shown

    try:
        return model_name(name)
    except ValueError as exc:
        raise InputError(f"{shown(name)} {exc}; give --label", path=str(path), field="model_name") from None


def _model_args(results: dict) -> dict:
    args = results["config"].get("model_args") or {}
    if isinstance(args, str):  # "pretrained=x,dtype=y" in older versions
        args = dict(part.split("=", 1) for part in args.split(",") if "=" in part)
    return args


def shots(results: dict, task: str, path: Path) -> int:
    value = (results.get("n-shot") or {}).get(task)
    if value is None:
        value = ((results.get("configs") or {}).get(task) or {}).get("num_fewshot")
    if value is None:
        raise InputError(f"gives no shot count for task {task!r}", path=str(path), field=f"n-shot.{task}")
    return int(value)


@dataclass(frozen=True)
class Ablation:
    """What an exported task holds: one prompt mode, formulation and shot count."""
    mode: str
    formulation: str
    fewshot: int


def ablation_of(results: dict, task: str, results_path: Path, sample: Path) -> Ablation | None:
    """The mode, formulation and shot count of ``task`` when `curate export ... lm-eval-tasks`
    wrote it (its config's ``metadata.benchcurate``), else None. Metadata that names no known
    mode, formulation or shot count, or another task, is refused: its samples would be stored
    in the wrong place."""
    config = (results.get("configs") or {}).get(task)
    meta = ((config.get("metadata") if isinstance(config, dict) else None) or {})
    what = meta.get(EXPORT_KEY) if isinstance(meta, dict) else None
    if what is None:
        return None
    field_name = f"configs.{task}.metadata.{EXPORT_KEY}"

    def fail(key: str, message: str):
        raise CurateError(f"{results_path}: samples {sample.name}, field '{field_name}{key}': {message}; "
                          f"nothing was imported")
    if not isinstance(what, dict):
        fail("", "is not an object (mode, formulation, fewshot)")
    mode, formulation, k = what.get("mode"), what.get("formulation"), what.get("fewshot")
    if mode not in MODES:
        fail(".mode", f"{mode!r} is not a prompt mode ({', '.join(MODES)})")
    try:
        forms.parse(formulation if isinstance(formulation, str) else repr(formulation))
    except CurateError:
        fail(".formulation", f"{formulation!r} is not a formulation (cloze, letters, letters+rK)")
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        fail(".fewshot", f"{k!r} is not a shot count")
    if what.get("task") != task:
        fail(".task", f"says task {what.get('task')!r}, but these are the samples of task {task!r}: another task "
                      f"of that name ran")
    if shots(results, task, results_path) != 0:
        raise CurateError(f"{results_path}: samples {sample.name}, field 'n-shot.{task}': lm-eval added "
                          f"{shots(results, task, results_path)} shots of its own to an exported task, whose contexts "
                          f"hold their {k} shots already; run it without --num_fewshot; nothing was imported")
    return Ablation(mode, formulation, k)


def run_record(results: dict, results_path: Path, sample: Path, task: str, fewshot: int,
               ablation: Ablation | None = None) -> dict:
    """What a sample file's run keeps: where its numbers came from."""
    config, args = results["config"], _model_args(results)
    return {"results": str(results_path.resolve()), "file": sample.name, "sha256": _sha256(sample), "task": task,
            "mode": ablation.mode if ablation else MODE, "exported_task": ablation is not None, "fewshot": fewshot,
            "model_name": results.get("model_name"), "model_args": args,
            "revision": config.get("model_revision") or args.get("revision"), "model_sha": config.get("model_sha"),
            "dtype": args.get("dtype") or config.get("model_dtype"), "lm_eval_version": results.get("lm_eval_version"),
            "date": results.get("date")}


def _sha256(path: Path) -> str:
    return file_sha256(path).removeprefix("sha256:")


# --- reading samples ---------------------------------------------------------------------------

def read_samples(path: Path):
    """The file's samples as dicts, in file order."""
    try:
        if path.name.endswith(".parquet"):
            import pyarrow.parquet as pq
            yield from pq.read_table(path).to_pylist()
            return
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except ValueError as exc:
                        raise InputError(f"not JSON: {exc}", path=str(path), row=line_no) from None
    except (OSError, EOFError) as exc:
        raise InputError(f"unreadable: {exc}", path=str(path)) from None


#: is_greedy as lm-eval writes it (str of a Python bool), or a JSON boolean read back.
GREEDY = {"True": True, "False": False}


def requests_of(sample: dict, where) -> tuple[list[tuple[str, str]], list[float], list[bool]]:
    """(requests as (context, continuation), log-likelihoods, greedy flags) of a sample."""
    args, resps = sample.get("arguments"), sample.get("resps")
    if not isinstance(args, dict) or not args:
        where.fail("arguments", "has no requests (an object gen_args_0, gen_args_1, ...)")
    requests = []
    for i in range(len(args)):
        arg = args.get(f"gen_args_{i}")
        if not isinstance(arg, dict) or not isinstance(arg.get("arg_0"), str) or not isinstance(arg.get("arg_1"), str):
            where.fail(f"arguments.gen_args_{i}", "is not a log-likelihood request (context, continuation); "
                       "only multiple-choice log-likelihood tasks can be imported")
        requests.append((arg["arg_0"], arg["arg_1"]))
    if not isinstance(resps, list) or len(resps) != len(requests):
        where.fail("resps", f"holds {len(resps) if isinstance(resps, list) else 'no'} responses for "
                   f"{len(requests)} requests")
    lls, greedy = [], []
    for i, resp in enumerate(resps):
        try:
            ll, is_greedy = resp[0]
            lls.append(float(ll))
        except (TypeError, ValueError, IndexError):
            where.fail(f"resps.{i}", f"is not [[loglikelihood, is_greedy]]: {str(resp)[:60]}")
        flag = GREEDY.get(str(is_greedy))  # lm-eval writes the flag as "True"/"False"; JSON may hold true/false
        if flag is None:
            where.fail(f"resps.{i}", f"is_greedy {str(is_greedy)[:20]!r} is neither True nor False")
        greedy.append(flag)
        if not (math.isfinite(lls[-1]) and lls[-1] <= 0):
            where.fail(f"resps.{i}", f"{lls[-1]} is not a log-likelihood (finite, <= 0)")
    return requests, lls, greedy


@dataclass
class Where:
    """The sample being read, for errors naming file, doc_id and field."""
    path: Path
    doc_id: object = None

    def fail(self, field_name: str, message: str):
        raise CurateError(f"{self.path}, doc_id {self.doc_id}, field '{field_name}': {message}; nothing was imported")


# --- matching samples to items -----------------------------------------------------------------

def _tail(context: str) -> str:
    """The text after the context's last blank line: the item itself when shots or a description
    come before it."""
    cut = context.rfind("\n\n")
    return context if cut < 0 else context[cut + 2:]


class Index:
    """The workspace's items by id, and by the tail of their requests' first full-mode context in
    each formulation (for samples of tasks not exported by benchcurate)."""

    def __init__(self, items: list[dict], fewshot: Settings | None = None):
        self.items, self.fewshot = items, fewshot or Settings()
        self.by_id = {item["item_id"]: i for i, item in enumerate(items)}
        self.by_tail: dict[str, list[tuple[int, str, list[tuple[str, str]]]]] = {}
        for i, item in enumerate(items):
            for formulation in forms.FORMULATIONS:
                s = forms.scored(item, MODE, formulation)
                requests = [(c, s.delimiter + t) for c, t in zip(s.contexts, s.continuations)]
                self.by_tail.setdefault(_tail(requests[0][0]), []).append((i, formulation, requests))

    def match(self, requests: list[tuple[str, str]], fewshot: int, where: Where) -> list[tuple[int, str]]:
        """(item index, formulation) of each item whose requests are ``requests`` (several only
        for items identical in what is scored)."""
        candidates = [c for c in self.by_tail.get(_tail(requests[0][0]), ())
                      if _same_contexts(c[2], requests, fewshot)]
        if not candidates:
            where.fail("arguments.gen_args_0.arg_0", f"matches no workspace item (no item's {MODE}-mode context in "
                       f"any formulation is {_short(requests[0][0])})")
        exact = [c for c in candidates if [t for _, t in c[2]] == [t for _, t in requests]]
        if not exact:
            i, formulation, mine = candidates[0]
            if len(mine) != len(requests):
                where.fail("arguments", f"has {len(requests)} requests but item {self.items[i]['item_id']} (same "
                           f"context) has {len(mine)} options")
            j = next(j for j, (a, b) in enumerate(zip(mine, requests)) if a[1] != b[1])
            where.fail(f"arguments.gen_args_{j}.arg_1", f"{_short(requests[j][1])} differs from option {j} of item "
                       f"{self.items[i]['item_id']} ({formulation}: {_short(mine[j][1])}); its options differ")
        return [(i, f) for i, f, _ in exact]


def _same_contexts(mine: list[tuple[str, str]], theirs: list[tuple[str, str]], fewshot: int) -> bool:
    """Whether each of the sample's contexts is the item's, with shots between the item's
    description (what comes before its tail) and its tail when ``fewshot``."""
    if len(mine) != len(theirs):
        return len(mine) > 0 and _context_fits(mine[0][0], theirs[0][0], fewshot)
    return all(_context_fits(a[0], b[0], fewshot) for a, b in zip(mine, theirs))


def _context_fits(item_context: str, sample_context: str, fewshot: int) -> bool:
    if not fewshot:
        return item_context == sample_context
    tail = _tail(item_context)
    head = item_context[:len(item_context) - len(tail)]
    return (len(sample_context) > len(item_context) and sample_context.startswith(head)
            and sample_context.endswith("\n\n" + tail))


def match_exported(sample: dict, requests: list[tuple[str, str]], index: Index, ablation: Ablation,
                   where: Where) -> int:
    """The index of the item an exported task's sample names (its doc's ``item_id``), checked:
    the item's content hash, gold, and its requests in the task's mode and formulation."""
    doc = sample.get("doc")
    if not isinstance(doc, dict):
        where.fail("doc", "is not an object")
    i = index.by_id.get(doc.get("item_id"))
    if i is None:
        where.fail("doc.item_id", f"{_short(doc.get('item_id'))} names no item of this workspace (samples of a task "
                   f"exported from another workspace?)")
    item = index.items[i]
    if doc.get("content_hash") != item["content_hash"]:
        where.fail("doc.content_hash", f"item {item['item_id']} has changed since the task was exported (its content "
                   f"hash is {item['content_hash'][:19]}...): export the tasks again")
    if doc.get("gold") != item["gold"]:
        where.fail("doc.gold", f"gold {_short(doc.get('gold'))} but item {item['item_id']} has gold {item['gold']}")
    if forms.parse(ablation.formulation)[1] >= len(item["options"]):
        where.fail("doc.item_id", f"item {item['item_id']} has too few options for {ablation.formulation}")
    s = forms.scored(item, ablation.mode, ablation.formulation)
    mine = [(c, s.delimiter + t) for c, t in zip(s.contexts, s.continuations)]
    if len(mine) != len(requests):
        where.fail("arguments", f"has {len(requests)} requests but item {item['item_id']} has {len(mine)} options")
    for j, (a, b) in enumerate(zip(mine, requests)):
        if a[1] != b[1]:
            where.fail(f"arguments.gen_args_{j}.arg_1", f"{_short(b[1])} is not option {j} of item {item['item_id']} "
                       f"({ablation.mode}, {ablation.formulation}: {_short(a[1])})")
        if not _shots_fit(a[0], b[0], ablation, description_of(item, ablation.formulation, index.fewshot)):
            where.fail(f"arguments.gen_args_{j}.arg_0", f"{_short(b[0])} is not the {ablation.fewshot}-shot context "
                       f"of item {item['item_id']} in mode {ablation.mode}, {ablation.formulation}")
    return i


def _shots_fit(item_context: str, sample_context: str, ablation: Ablation, description: str) -> bool:
    """Whether the sample's context is the item's with ``ablation.fewshot`` shots after the
    benchmark's description, as ``curate.items.fewshot.with_shots`` places them."""
    if not ablation.fewshot:
        return sample_context == item_context
    rest = item_context[len(description):] if item_context.startswith(description) else item_context
    return (sample_context.startswith(description) and sample_context.endswith(rest)
            and len(sample_context) > len(description) + len(rest))


def check_doc(sample: dict, item: dict, where: Where) -> None:
    """The sample's doc and target must be the matched item's: its ids and raw context fields
    where the doc has them, and its gold where the target is an index."""
    doc = sample.get("doc")
    if not isinstance(doc, dict):
        where.fail("doc", "is not an object")
    for key, value in {**item["native_ids"], **item["context_parts"]}.items():
        if key in doc and _plain(doc[key]) != _plain(value):
            where.fail(f"doc.{key}", f"{_short(doc[key])} is not that of item {item['item_id']} ({_short(value)}), "
                       f"which the sample's requests match")
    target = str(sample.get("target", ""))
    if target.isdigit() and int(target) != item["gold"]:
        where.fail("target", f"gold {target} but item {item['item_id']} has gold {item['gold']}")


def _plain(value):
    """A doc field as compared with the item's: text up to whitespace (adapters strip questions)."""
    return " ".join(value.split()) if isinstance(value, str) else value


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 70 else text[:67] + "...'"


# --- one run's rows ----------------------------------------------------------------------------

@dataclass
class Matched:
    """One sample file's scores: per (formulation, fewshot) the matched items and their values."""
    label: str
    path: Path
    record: dict
    parts: dict = field(default_factory=dict)  # (mode, formulation, fewshot) -> {item index: (lls, greedy)}
    samples: int = 0


def match_run(run: Run, index: Index, label: str | None, progress) -> list[Matched]:
    """Each of the run's sample files matched to the workspace's items."""
    results = run.info()
    label = label or model_label(results, run.results)
    out = []
    for path in run.samples:
        task = SAMPLES.match(path.name).group("task")
        ablation = ablation_of(results, task, run.results, path)
        k = ablation.fewshot if ablation else shots(results, task, run.results)
        record = run_record(results, run.results, path, task, k, ablation)
        out.append(match_file(path, index, Matched(label, path, record), k, progress, ablation))
    return out


def match_file(path: Path, index: Index, out: Matched, k: int, progress, ablation: Ablation | None = None) -> Matched:
    owner: dict[tuple, object] = {}  # (formulation, item index) -> doc_id
    for sample in read_samples(path):
        where = Where(path, sample.get("doc_id") if isinstance(sample, dict) else None)
        if not isinstance(sample, dict):
            where.fail("doc_id", "a sample is not an object")
        requests, lls, greedy = requests_of(sample, where)
        if ablation:
            choices = [(match_exported(sample, requests, index, ablation, where), ablation.formulation)]
        else:
            choices = index.match(requests, k, where)
        free = [c for c in choices if (c[1], c[0]) not in owner]
        if not free:
            i, f = choices[0]
            where.fail("doc_id", f"matches item {index.items[i]['item_id']}, which doc_id {owner[(f, i)]} "
                       f"matches already")
        i, formulation = free[0]
        if not ablation:
            check_doc(sample, index.items[i], where)
        owner[(formulation, i)] = where.doc_id
        out.parts.setdefault((ablation.mode if ablation else MODE, formulation, k), {})[i] = (lls, greedy)
        out.samples += 1
        progress(samples=1)
    if not out.samples:  # stored as a run of nothing, it would be lost without a word
        raise CurateError(f"{path}: holds no samples (lm-eval wrote none: the task ran on no documents?); leave it "
                          f"out; nothing was imported")
    progress(files=1)
    return out


def run_id(matched: Matched) -> str:
    """The run of one sample file. An exported task's names its task too: two tasks may hold the
    same requests (MMLU's zero and choice-only letters contexts are equal after k shots, the
    description heading both), hence byte-equal sample files, each its own run."""
    task = f"{matched.record['task']}:" if matched.record["exported_task"] else ""
    return f"lm-eval-samples:{matched.label}:{task}{matched.record['sha256'][:12]}"


def rows_of(matched: Matched, index: Index, rid: str):
    """The score rows of one sample file."""
    for (mode, formulation, k), values in sorted(matched.parts.items()):
        for i, (lls, greedy) in sorted(values.items()):
            item = index.items[i]
            conts = forms.scored(item, mode, formulation).continuations
            for j, text in enumerate(conts):
                yield {"model": matched.label, "mode": mode, "formulation": formulation, "fewshot": k,
                       "item_id": item["item_id"], "option_index": j, "logprob_sum": lls[j], "n_chars": len(text),
                       "n_bytes": len(text.encode("utf-8")), "is_greedy": int(greedy[j]),
                       "content_hash": item["content_hash"], "run_id": rid}


# --- the import --------------------------------------------------------------------------------

def import_scores(workspace, paths, *, label=None, replace=False, progress=True) -> list[dict]:
    """Import every run under ``paths`` in one transaction (all or nothing), run by run so memory
    stays that of one run; one summary dict per (model, mode, formulation, shots) stored."""
    from tqdm import tqdm

    runs = find_runs(paths)  # nothing to import: fail before the workspace is opened
    if label is not None:
        from curate.core.names import model_name
        try:
            label = model_name(label)
        except ValueError as exc:
            raise CurateError(f"--label {label[:60]!r} {exc}") from None
    labels = {run.results: label or model_label(run.info(), run.results) for run in runs}
    ws = open_scores(workspace)
    try:
        adapter = from_record(ws.meta("adapter"), ws.meta("benchmark"))
        index = Index(ws.items(), getattr(adapter, "fewshot", None))
        with contextlib.ExitStack() as held:
            for name in sorted(set(labels.values())):
                held.enter_context(label_lock(ws.root, name, command="score or import-scores"))
            bar = held.enter_context(tqdm(total=sum(len(r.samples) for r in runs), unit="file",
                                          desc="lm-eval samples", disable=not progress))
            count = [0]

            def tick(samples=0, files=0):
                count[0] += samples
                if files or count[0] % 1000 == 0:
                    bar.set_postfix(samples=count[0], refresh=False)
                    bar.update(files)
            with ws.transaction(foreign_keys=False):  # every row names a workspace item and its run
                for name in sorted(set(labels.values())):
                    check_label(ws, name, (ORIGIN,), replace=replace)
                written: dict[str, Path] = {}
                parts = [part for run in runs for m in match_run(run, index, labels[run.results], tick)
                         for part in _store(ws, m, index, written, replace=replace)]
    finally:
        ws.close()
    return summarize(parts)


def summarize(parts: list[dict]) -> list[dict]:
    """One summary dict per (model, mode, formulation, shots): how many files and items."""
    grouped: dict[tuple, list[dict]] = {}
    for part in parts:
        grouped.setdefault((part["model"], part["mode"], part["formulation"], part["fewshot"]), []).append(part)
    return [{"model": model, "mode": mode, "formulation": f, "fewshot": k, "files": len(group),
             "items": sum(p["items"] for p in group),
             "detail": f"{f}, {k}-shot, {sum(p['items'] for p in group)} items from {len(group)} "
                       f"file{'s' * (len(group) > 1)}"}
            for (model, mode, f, k), group in sorted(grouped.items())]


def _store(ws, m: Matched, index: Index, written: dict, *, replace: bool) -> list[dict]:
    """Write one sample file's rows as one run (inside the import's transaction)."""
    rid = run_id(m)
    add_run(ws, run_id=rid, model=m.label, origin=ORIGIN, info=m.record, dtype=m.record["dtype"])
    for (mode, formulation, k), values in m.parts.items():
        _check_other_runs(ws, m, (mode, formulation, k), [index.items[i]["item_id"] for i in values], rid, written,
                          replace=replace)
    write_scores(ws, list(rows_of(m, index, rid)))
    written[rid] = m.path
    return [{"model": m.label, "mode": mode, "formulation": f, "fewshot": k, "items": len(v), "file": str(m.path)}
            for (mode, f, k), v in m.parts.items()]


def _check_other_runs(ws, m: Matched, part: tuple[str, str, int], item_ids: list[str], rid: str, written: dict, *,
                      replace: bool):
    """Refuse to overwrite the label's stored scores of these items in ``part`` (mode, formulation,
    shot count) from another file (a changed file, another run) without ``replace`` (with it,
    delete them first), and two files of this import holding the same items in any case (one
    would be kept silently)."""
    mode, formulation, k = part
    ws.conn.execute("CREATE TEMP TABLE IF NOT EXISTS import_items (item_id TEXT PRIMARY KEY)")
    ws.conn.execute("DELETE FROM import_items")
    ws.conn.executemany("INSERT INTO import_items VALUES (?)", ((i,) for i in item_ids))
    where = ("model = ? AND mode = ? AND formulation = ? AND fewshot = ? AND run_id != ? "
             "AND item_id IN (SELECT item_id FROM import_items)")
    params = (m.label, mode, formulation, k, rid)
    held = ws.conn.execute(f"SELECT run_id, item_id FROM scores WHERE {where} LIMIT 1", params).fetchone()
    if held and held[0] in written:
        raise CurateError(f"{written[held[0]]} and {m.path} both hold model {m.label!r}'s scores of item {held[1]} "
                          f"({mode}, {formulation}, {k}-shot); import one of them (or each under its own --label); "
                          f"nothing was imported")
    if held and not replace:
        raise CurateError(f"model {m.label!r} ({mode}, {formulation}, {k}-shot) already holds scores of these items "
                          f"from other files (run {held[0]}); {m.path.name} would replace them: use --replace "
                          f"to do so; nothing was imported")
    if held:
        delete_scores(ws, where, params)


def imported(workspace, paths) -> bool:
    """Whether every run under ``paths`` is stored already from these very files."""
    runs = find_runs(paths)
    ws = open_scores(workspace)
    try:
        stored = {json.loads(r[0]).get("sha256") for r in
                  ws.conn.execute("SELECT info_json FROM score_runs WHERE origin = ? AND run_id IN "
                                  "(SELECT DISTINCT run_id FROM scores)", (ORIGIN,))}
        return all(_sha256(f) in stored for run in runs for f in run.samples)
    finally:
        ws.close()


def supplies(paths, default_formulation: str) -> dict:
    """(model, mode, formulation) -> normalizations each run will store: an exported task's own,
    else mode full and (known only once samples are matched) the benchmark's default formulation."""
    out = {}
    for run in find_runs(paths):
        results, model = run.info(), model_label(run.info(), run.results)
        for path in run.samples:
            a = ablation_of(results, SAMPLES.match(path.name).group("task"), run.results, path)
            out[(model, a.mode if a else MODE, a.formulation if a else default_formulation)] = NORMALIZATIONS
    return out


def shot_counts(paths) -> dict[str, set[int]]:
    """Model -> the shot counts its runs will be stored at: each task's ``num_fewshot``, as the
    results file beside its samples records it."""
    out: dict[str, set[int]] = {}
    for run in find_runs(paths):
        results = run.info()
        for sample in run.samples:
            task = SAMPLES.match(sample.name).group("task")
            out.setdefault(model_label(results, run.results), set()).add(shots(results, task, run.results))
    return out


def misfits(paths, items: int, exact: bool) -> list[str]:
    """Sample files that cannot fit a workspace of ``items`` items (or at most that many), read
    without importing: every sample must match an item of its own, so a file may hold no more
    samples than there are items."""
    out = []
    for run in find_runs(paths):
        for path in run.samples:
            n = _count_samples(path)
            if n is not None and n > items:
                out.append(f"{path.name} holds {n} samples, each of which must match an item of its own")
    return out


def _count_samples(path: Path) -> int | None:
    """How many samples a file holds (parquet: from its metadata; JSON lines: its non-blank
    lines), or None when it cannot be read (the import then names the problem)."""
    try:
        if path.name.endswith(".parquet"):
            import pyarrow.parquet as pq
            return pq.ParquetFile(path).metadata.num_rows
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as fh:
            return sum(1 for line in fh if line.strip())
    except (OSError, EOFError, ValueError):
        return None
