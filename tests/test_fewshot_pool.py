"""Where a workspace's few-shot split is read when no --fewshot-pool is given
(curate.items.fewshot_pool): from the source its evaluated split came from, a file's sibling, a
benchmark folder, or the Hub dataset at its revision; and the one-line refusal when that source
has no such split. The Hub is a local `datasets` cache here (the Hub itself is unreachable):
offline, `datasets.load_dataset(ID, CONFIG)` reads what it cached of that dataset."""
from __future__ import annotations

import gzip
import json

import pytest

from conftest import SHARED, one_line_error, run_cli
from curate.items.adapters import get_adapter
from curate.items.fewshot_pool import fewshot_plan, resolve_pool
from curate.items.ingest import Ingest
from curate.items.ingest_options import IngestOptions
from curate.items.sources import local_sha256
from curate.items.store import Workspace

MMLU = SHARED / "benchmarks" / "mmlu"
COPA = SHARED / "benchmarks" / "copa" / "validation.jsonl.gz"
REVISION = "c30699e8356da336a370243923dbaf21066bb9fe"  # a commit id, as --revision pins one


def shared_rows(path, n=None):
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    return rows[:n]


def hub_cache(cache, repo_id, config, splits, revision=REVISION):
    """A `datasets` cache holding ``repo_id`` (its ``config``: {split: rows}) at ``revision``, laid
    out as `datasets` keeps a Hub dataset it has loaded (OWNER___NAME/CONFIG/0.0.0/REVISION)."""
    from datasets.packaged_modules.json.json import Json

    owner, name = repo_id.split("/")
    files = {}
    for split, rows in splits.items():
        files[split] = str(cache.parent / f"{name}-{config}-{split}.jsonl")
        with open(files[split], "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(row) + "\n" for row in rows)
    Json(cache_dir=str(cache), dataset_name=name, config_name=config, config_id=config, hash=revision,
         data_files=files).download_and_prepare()
    (cache / name).rename(cache / f"{owner}___{name}")  # built as a local dataset, kept as the Hub's


def file_pool(tmp_path, limit=3):
    """(items, plan, info) of a workspace made from MMLU's test file, 5 shots (its dev file beside)."""
    root = Ingest(tmp_path / "from-file", IngestOptions(data=str(MMLU / "test.jsonl.gz"), split="test",
                                                        limit=limit), get_adapter("mmlu")).run()
    with Workspace.open(root) as ws:
        items = ws.items()
        return items, *fewshot_plan(ws, items, [5], None)


def test_a_benchmark_folder_gives_its_few_shot_split(tmp_path):
    """A workspace made from the MMLU folder (the Hub's layout: dev, validation and test files)
    reads dev from that folder: the same pool, shots and key as one made from the test file."""
    root = Ingest(tmp_path / "from-folder", IngestOptions(data=str(MMLU), split="test",
                                                          limit=3), get_adapter("mmlu")).run()
    with Workspace.open(root) as ws:
        items = ws.items()
        pool, _, where = resolve_pool(ws, None)
        plan, _, info = fewshot_plan(ws, items, [5], None)
    file_items, file_plan, _, file_info = file_pool(tmp_path)
    assert where == str(MMLU.resolve()) and info["fewshot_pool"] == where and info["fewshot_split"] == "dev"
    assert info["fewshot_pool_source"]["files"] == ["dev.jsonl.gz"]
    assert info["fewshot_pool_source"]["sha256"] == local_sha256(MMLU, "dev")  # the folder's digest of its dev files
    assert len(pool) == 285 and items == file_items and plan == file_plan
    assert info["fewshot_key"] == file_info["fewshot_key"]
    assert file_info["fewshot_pool"] == str((MMLU / "dev.jsonl.gz").resolve())  # a file source: its sibling


def test_a_hub_source_reads_its_few_shot_split_from_the_same_dataset_and_revision(tmp_path, monkeypatch):
    import datasets

    cache = tmp_path / "hf" / "datasets"
    cache.mkdir(parents=True)
    hub_cache(cache, "cais/mmlu", "all", {"test": shared_rows(MMLU / "test.jsonl.gz", 3),
                                          "dev": shared_rows(MMLU / "dev.jsonl.gz")})
    run_cli("init", tmp_path / "ws", "--benchmark", "mmlu", "--data", "cais/mmlu", "--config", "all", "--split",
            "test", "--revision", REVISION, env={"HF_DATASETS_CACHE": str(cache)})
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))
    calls, real = [], datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **kw: calls.append((a, kw)) or real(*a, **kw))
    with Workspace.open(tmp_path / "ws") as ws:
        assert ws.meta("source")["kind"] == "hub"
        items = ws.items()
        plan, _, info = fewshot_plan(ws, items, [5], None)
        assert calls == [(("cais/mmlu", "all"), {"split": "dev", "revision": REVISION})]
        source = ws.meta("source")
        ws.set_meta("source", {**source, "resolved_revision": "0" * 40})  # what the Hub said REVISION is
        _, _, where = resolve_pool(ws, None)
    assert calls[-1] == (("cais/mmlu", "all"), {"split": "dev", "revision": "0" * 40})
    assert where == f"cais/mmlu@{'0' * 40}"
    file_items, file_plan, _, file_info = file_pool(tmp_path)
    assert info["fewshot_pool"] == f"cais/mmlu@{REVISION}" and info["fewshot_split"] == "dev"
    assert {k: info["fewshot_pool_source"][k] for k in ("kind", "repo_id", "config", "split", "revision")} == \
        {"kind": "hub", "repo_id": "cais/mmlu", "config": "all", "split": "dev", "revision": REVISION}
    assert items == file_items and plan == file_plan and info["fewshot_key"] == file_info["fewshot_key"]


def test_a_source_without_the_few_shot_split_is_refused_naming_how_to_give_one(tmp_path):
    folder = tmp_path / "copa"
    folder.mkdir()
    (folder / "validation.jsonl.gz").symlink_to(COPA)
    run_cli("init", tmp_path / "ws", "--benchmark", "copa", "--data", folder, "--split", "validation", "--limit", "2")
    proc = run_cli("score", tmp_path / "ws", "--model", "smollm2-135m", "--fewshot", "2", "--quiet", check=False)
    one_line_error(proc, "few-shot split 'train'", str(folder.resolve()), "--fewshot-pool FILE",
                   "--fewshot-pool evaluated")

    cache = tmp_path / "hf" / "datasets"
    cache.mkdir(parents=True)
    hub_cache(cache, "aps/super_glue", "copa", {"validation": shared_rows(COPA, 2)})
    env = {"HF_DATASETS_CACHE": str(cache), "DATASETS_VERBOSITY": "error"}  # not its "using the cache" notice
    run_cli("init", tmp_path / "hub", "--benchmark", "copa", "--data", "aps/super_glue", "--config", "copa",
            "--split", "validation", env=env)
    proc = run_cli("score", tmp_path / "hub", "--model", "smollm2-135m", "--fewshot", "2", "--quiet", check=False,
                   env=env)
    one_line_error(proc, "few-shot split 'train'", "aps/super_glue", "--fewshot-pool FILE", "--fewshot-pool evaluated")


@pytest.mark.parametrize("given", ["pool", "evaluated"])
def test_a_pool_given_is_read_as_before(tmp_path, given):
    root = Ingest(tmp_path / "ws", IngestOptions(data=str(MMLU), split="test", limit=2), get_adapter("mmlu")).run()
    pool = str(MMLU / "dev.jsonl.gz") if given == "pool" else "evaluated"
    with Workspace.open(root) as ws:
        docs, _, where = resolve_pool(ws, pool)
        assert where == pool and len(docs) == (285 if given == "pool" else 2)


@pytest.mark.parametrize("layout", ["config subfolder", "save_to_disk"])
def test_other_folder_layouts_give_their_few_shot_split(tmp_path, layout):
    """A Hub clone's configuration subfolder (--config) and a DatasetDict saved with save_to_disk
    give their dev split as the file workspace's dev file does."""
    import datasets

    splits = {"test": shared_rows(MMLU / "test.jsonl.gz", 3), "dev": shared_rows(MMLU / "dev.jsonl.gz")}
    folder, config = tmp_path / "mmlu", None
    if layout == "config subfolder":
        config = "all"
        for name in ("all", "other"):  # two configurations, as in a Hub clone
            (folder / name).mkdir(parents=True)
            for split, rows in splits.items():
                text = "".join(json.dumps(r) + "\n" for r in rows)
                (folder / name / f"{split}-00000-of-00001.jsonl").write_text(text)
    else:
        datasets.DatasetDict({k: datasets.Dataset.from_list(v) for k, v in splits.items()}).save_to_disk(folder)
    root = Ingest(tmp_path / "ws", IngestOptions(data=str(folder), split="test",
                                                 config=config), get_adapter("mmlu")).run()
    with Workspace.open(root) as ws:
        items = ws.items()
        plan, _, info = fewshot_plan(ws, items, [5], None)
    file_items, file_plan, _, file_info = file_pool(tmp_path)
    assert info["fewshot_pool"] == str((folder / "all").resolve() if config else folder.resolve())
    assert items == file_items and plan == file_plan and info["fewshot_key"] == file_info["fewshot_key"]


def test_the_pool_is_read_with_the_encoding_ingest_was_told(tmp_path):
    """A CSV folder whose files need --encoding (UTF-8 but for a Latin-1 line): the few-shot split
    is read with the encoding ingest used, not guessed again (which refuses such a file)."""
    folder = tmp_path / "quiz"
    folder.mkdir()
    for split in ("validation", "train"):
        rows = [f"{split} caf\u00e9 {i}?;x{i};y{i};{i % 2}".encode() for i in range(3)]
        rows.append("na\u00efve?;x;y;0".encode("latin-1"))  # one Latin-1 line: --encoding must say
        (folder / f"{split}.csv").write_bytes(b"q;a;b;label\n" + b"\n".join(rows) + b"\n")
    columns = "{name: quiz, question: q, choices: [a, b], answer: label, answer_format: index}"
    args = ("--benchmark", "generic", "--data", folder, "--split", "validation", "--columns", columns)
    assert run_cli("init", tmp_path / "guessed", *args, check=False).returncode == 2  # the encoding must be named
    run_cli("init", tmp_path / "ws", *args, "--encoding", "latin-1")
    with Workspace.open(tmp_path / "ws") as ws:
        pool, _, where = resolve_pool(ws, None)
    assert where == str(folder.resolve()) and [d["prompts"]["full"] for d in pool] == \
        ["train caf\u00c3\u00a9 0?", "train caf\u00c3\u00a9 1?", "train caf\u00c3\u00a9 2?", "na\u00efve?"]
