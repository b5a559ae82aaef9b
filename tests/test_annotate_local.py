"""The local backend: smollm2-135m on CPU answering by constrained choice, so every record is
valid. The CI test annotates 2 items; the acceptance run (50 items, both rounds) is marked slow."""
from __future__ import annotations

import time

import pytest

import schemas
from annotate.run import annotate_workspace
from annotate_helpers import records, small_workspace

ANNOTATOR = "local:smollm2-135m"


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The test machine's cores are shared by several jobs; one thread avoids OpenMP spin-waits
    that made a 3-item run ~30x slower there."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def check_all_valid(root, n):
    for round in (1, 2):
        frame = records(root, round=round, annotator=ANNOTATOR)
        assert len(frame) == n and frame.request_key.is_unique and set(frame.status) == {"valid"}
        for r in frame.to_dict("records"):
            record = {k: r[k] for k in ("annotator", "round", "item_id", "status", "result", "raw",
                                        "prompt_version", "model_snapshot", "request_key", "content_hash")}
            assert schemas.errors("annotation", record) == []
        assert frame.model_snapshot.str.startswith("smollm2-135m@sha256:").all()
    return frame


def annotate_both(root, n):
    out = {}
    for round in (1, 2):
        start = time.perf_counter()
        out[round] = annotate_workspace(root, round, ANNOTATOR, limit=n, show_progress=False)
        out[round]["seconds"] = time.perf_counter() - start
        assert out[round]["valid"] == n and out[round]["remaining"] == 0
    return out


def test_local_annotator_small(tmp_path):
    root = small_workspace(tmp_path / "ws", 2)
    annotate_both(root, 2)
    frame = check_all_valid(root, 2)
    assert all(r["best"] in range(4) for r in frame.result)
    again = annotate_workspace(root, 1, ANNOTATOR, show_progress=False)
    assert again["skipped"] == 2 and again["valid"] == 0


@pytest.mark.slow
def test_local_annotator_50_items_both_rounds(tmp_path):
    root = small_workspace(tmp_path / "ws", 50)
    out = annotate_both(root, 50)
    check_all_valid(root, 50)
    print(f"local smollm2-135m: round 1 {out[1]['seconds']:.0f} s, round 2 {out[2]['seconds']:.0f} s for 50 items")


def generic_workspace(root, rows):
    import json

    from curate.adapters import get_adapter
    from curate.ingest import ingest

    data = root.parent / f"{root.name}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return ingest(root, data=str(data), adapter=get_adapter("generic", question="question", choices=("choices",),
                                                            answer="answer"))


def test_item_text_holding_the_question_marker_is_annotated(tmp_path):
    """The local prompt is split at a marker; an item that holds the same text is still one item."""
    root = generic_workspace(tmp_path / "ws", [
        {"question": "Nul \u0000QUESTION\u0000 here?", "choices": ["a", "b", "c", "d"], "answer": 1}])
    s = annotate_workspace(root, 1, ANNOTATOR, show_progress=False)
    assert (s["valid"], s["remaining"]) == (1, 0)


def test_an_item_longer_than_the_context_is_refused(tmp_path):
    """smollm2-135m reads 8192 tokens: an item past that is refused, naming it, before anything
    is stored (its answers would be meaningless)."""
    from curate.errors import CurateError

    long = " ".join(["word"] * 9000)
    root = generic_workspace(tmp_path / "ws", [
        {"question": "Normal question about cats?", "choices": ["yes", "no", "maybe", "never"], "answer": 0},
        {"question": long, "choices": ["a", "b", "c", "d"], "answer": 1}])
    with pytest.raises(CurateError, match=r"item .*/1: annotating it takes \d+ tokens, more than the 8192"):
        annotate_workspace(root, 1, ANNOTATOR, show_progress=False)
    assert records(root).empty
    assert annotate_workspace(root, 1, ANNOTATOR, limit=1, show_progress=False)["valid"] == 1
