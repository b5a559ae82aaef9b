"""``--format lm-eval-generate``: the answers of a multiple-choice task that lm-evaluation-harness
0.4.x asked by generation (``output_type: generate_until``, such as ``arc_challenge_chat`` or the
``mmlu_generative`` tasks), from its ``--log_samples`` output.

``lm_eval --log_samples`` writes ``samples_<task>_<date>.jsonl`` (or ``.jsonl.gz``, ``.parquet``),
one line per document and filter: ``doc_id``, ``doc`` (the source row), ``target``,
``arguments`` (``gen_args_0``: ``arg_0`` the prompt, ``arg_1`` the generation settings),
``resps`` (the generated text) and ``filtered_resps`` (the answer the task's filter extracted
from it), ``filter`` (its name); and ``results_<date>.json`` beside it, which names the model
(``--model`` names it when there is none, or renames it).

- the item: the one whose native ids and question fields the ``doc`` holds alike, else the one
  whose question and options the prompt shows; the prompt must show every option of it, and a
  ``target`` given as a letter, index or option text must be its gold;
- the answer: the filtered answer as a letter (``B``, ``(B)``, ``B.``; A is the first option, as
  lm-eval's multiple-choice prompts list them in the item's order) or as an option's text; any
  other (``[invalid]``, empty, a letter past the options) is stored as an unreadable answer;
- a file holding several filters' answers (lm-eval logs each document once per filter) is read
  for the one ``--filter`` names;
- its run: ``task=TASK,date=DATE,filter=FILTER`` (and ``,repeat=K`` for tasks that sample
  several answers per document without taking the first).
"""
from __future__ import annotations

import json
from pathlib import Path

from curate.core.errors import CurateError
from scoring.answer_imports._match import (Answers, Items, fail, file_record, files_under, letter_index, norm,
                                           option_of, short)
from scoring.imports.lm_eval_samples import SAMPLES, model_label, read_samples

DESCRIPTION = ("lm-evaluation-harness 0.4.x --log_samples output of a generate_until multiple-choice task: "
               "samples_<task>_<date>.jsonl (.jsonl.gz, .parquet) with its results_<date>.json; files or folders")
SOURCE = "lm-eval"


#: The import settings this format reads besides ``model``.
SETTINGS = ("filter",)


def _sample_files(paths) -> list[Path]:
    return files_under(paths, ("samples_*",), "lm-eval sample files (samples_<task>_<date>.jsonl)")


def inputs(paths) -> list[Path]:
    """The files ``read`` reads: the sample files and the results files beside them."""
    found = []
    for path in _sample_files(paths):
        match = SAMPLES.match(path.name)
        results = sorted(p for p in path.parent.glob(f"*_{match.group('date')}.json")
                         if not p.name.startswith("samples_")) if match else []
        found.extend(f for f in [path, *results] if f not in found)
    return found


def read(paths, items: Items, *, model: str | None = None, filter: str | None = None):
    answers, files = Answers(), []
    for path in _sample_files(paths):
        match = SAMPLES.match(path.name)
        if not match:
            raise CurateError(f"{path}: not an lm-eval samples file (samples_<task>_<date>.jsonl, .jsonl.gz or "
                              f".parquet); nothing was imported")
        task, date = match.group("task"), match.group("date")
        label, results = _label(path, date, model)
        samples = list(read_samples(path))
        if not samples:
            raise CurateError(f"{path}: holds no samples (lm-eval wrote none: the task ran on no documents?); leave "
                              f"it out; nothing was imported")
        file = answers.read_file(path)
        chosen = _filter(path, samples, filter)
        run = f"task={task},date={date},filter={chosen}"
        count = 0
        for sample in samples:
            if sample.get("filter") != chosen:
                continue
            where = f"{path}, doc_id {sample.get('doc_id')}"
            context = _prompt(sample, where)
            item = _item(sample, context, items, answers, label, run, where)
            _check_target(sample, item, where)
            texts = _answers_of(sample, where)
            for k, text in enumerate(texts):
                answers.add(model=label, item=item, choice=answer_option(item, text),
                            run=run if len(texts) == 1 else f"{run},repeat={k}", where=where, field="doc", file=file)
            count += 1
        files.append({**file_record(path), "task": task, "date": date, "filter": chosen, "samples": count,
                      "results": str(results.resolve()) if results else None})
    return answers.frame(), {"files": files}


def answer_option(item: dict, text) -> int | None:
    """The original option a filtered answer names (a letter, or an option's text), or None."""
    if text is None or not str(text).strip():
        return None
    letter = letter_index(text)
    if letter is not None:
        return letter if letter < len(item["options"]) else None
    hits = option_of(item, text)
    return hits[0] if len(hits) == 1 else None


def _label(path: Path, date: str, model: str | None) -> tuple[str, Path | None]:
    """The model's name (``--model``, else the results file's) and the results file read."""
    found = sorted(p for p in path.parent.glob(f"*_{date}.json") if not p.name.startswith("samples_"))
    if model:
        return model, found[0] if len(found) == 1 else None
    if len(found) != 1:
        raise CurateError(f"{path}: {'no results file' if not found else f'{len(found)} results files'} "
                          f"*_{date}.json beside it to name the model; give --model; nothing was imported")
    try:
        results = json.loads(found[0].read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CurateError(f"{found[0]}: unreadable results file ({exc}); nothing was imported") from None
    if not isinstance(results, dict) or not isinstance(results.get("config"), dict):
        raise CurateError(f"{found[0]}, field 'config': not an lm-eval results file; nothing was imported")
    return model_label(results, found[0]), found[0]


def _filter(path: Path, samples: list, wanted: str | None) -> str:
    """The filter whose answers are read: the file's only one, or ``--filter``."""
    for n, sample in enumerate(samples):
        if not isinstance(sample, dict):
            raise CurateError(f"{path}, sample {n}: not an object; nothing was imported")
    filters = sorted({str(s.get("filter")) for s in samples})
    if wanted is not None:
        if wanted not in filters:
            raise CurateError(f"{path}, field 'filter': holds no answers of filter {wanted!r} (it holds "
                              f"{', '.join(filters)}); nothing was imported")
        return wanted
    if len(filters) > 1:
        raise CurateError(f"{path}, field 'filter': holds the answers of filters {', '.join(filters)} (lm-eval logs "
                          f"each document once per filter); choose one with --filter; nothing was imported")
    return filters[0]


def _prompt(sample: dict, where: str) -> str:
    args = sample.get("arguments")
    first = args.get("gen_args_0") if isinstance(args, dict) else None
    if not isinstance(first, dict) or not isinstance(first.get("arg_0"), str):
        fail(where, "arguments.gen_args_0.arg_0", "holds no prompt")
    if not isinstance(first.get("arg_1"), dict):
        fail(where, "arguments.gen_args_0.arg_1", "is not generation settings: not a generate_until sample (import "
                                                  "log-likelihood samples with curate import-scores)")
    return first["arg_0"]


def _item(sample: dict, context: str, items: Items, answers: Answers, label: str, run: str, where: str) -> dict:
    doc = sample.get("doc")
    if not isinstance(doc, dict):
        fail(where, "doc", "is not an object (the document lm-eval asked about)")
    found = items.by_document(doc) or items.in_text(context)
    if not found:
        fail(where, "doc", f"matches no workspace item (no item's ids or question fields are those of this document, "
                           f"and no item's question and options are all in its prompt: {short(context)})")
    flat = norm(context)
    shown = [it for it in found if all(norm(o) in flat for o in it["options"])]
    if not shown:
        item = found[0]
        missing = next(o for o in item["options"] if norm(o) not in flat)
        fail(where, "arguments.gen_args_0.arg_0", f"does not show option {short(missing)} of item {item['item_id']}, "
                                                  f"which the document matches: its options differ")
    free = [it for it in shown if not answers.claimed(label, it, run)]
    return (free or shown)[0]  # items alike in every field: each sample takes the next one


def _check_target(sample: dict, item: dict, where: str) -> None:
    """A target naming an option (a letter, an index, an option's text) must name the gold."""
    target = sample.get("target")
    text = str(target).strip() if target is not None else ""
    named = letter_index(text) if letter_index(text) is not None else (
        int(text) if text.isdigit() else (option_of(item, text) or [None])[0])
    if named is not None and named != item["gold"]:
        fail(where, "target", f"{short(text)} names option {named}, but item {item['item_id']}'s gold is option "
                              f"{item['gold']} ({short(item['options'][item['gold']])})")


def _answers_of(sample: dict, where: str) -> list:
    """The filtered answer (several when a task keeps every sampled repeat)."""
    filtered = sample.get("filtered_resps")
    if not isinstance(filtered, list) or len(filtered) != 1:
        fail(where, "filtered_resps", f"is not one filtered answer (a generate_until sample has one request): "
                                      f"{short(filtered)}")
    value = filtered[0]
    values = value if isinstance(value, list) else [value]
    if not values or not all(v is None or isinstance(v, str) for v in values):
        fail(where, "filtered_resps", f"is not a text answer: {short(value)}")
    return values
