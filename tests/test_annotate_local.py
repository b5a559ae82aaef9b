"""The local backend: smollm2-135m on CPU answering by constrained choice, so every record is
valid. The CI test annotates 2 items; the acceptance run (50 items, both rounds) is marked slow."""
from __future__ import annotations

import time

import pytest

import schemas
from annotate.run import Annotate
from annotate.options import AnnotateOptions
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
        out[round] = Annotate(root, AnnotateOptions(round=round, annotator=ANNOTATOR, quiet=True, limit=n)).run()
        out[round]["seconds"] = time.perf_counter() - start
        assert out[round]["valid"] == n and out[round]["remaining"] == 0
    return out


def test_local_annotator_small(tmp_path):
    root = small_workspace(tmp_path / "ws", 2)
    annotate_both(root, 2)
    frame = check_all_valid(root, 2)
    assert all(r["best"] in range(4) for r in frame.result)
    again = Annotate(root, AnnotateOptions(round=1, annotator=ANNOTATOR, quiet=True)).run()
    assert again["skipped"] == 2 and again["valid"] == 0



def test_the_command_reports_a_local_run_without_an_api_cost_line(tmp_path):
    """A local annotator sends nothing to an API: `curate annotate` says it cost nothing instead
    of "0.0000 USD for 0 replies" after every item was answered."""
    from conftest import run_cli

    root = small_workspace(tmp_path / "ws", 2)
    out = run_cli("annotate", root, "--round", "1", "--annotator", ANNOTATOR, "--quiet").stdout
    assert "valid 2," in out and "replies" not in out, out
    assert "cost: none (a local model; nothing is sent to an API)" in out, out

@pytest.mark.slow
def test_local_annotator_50_items_both_rounds(tmp_path):
    root = small_workspace(tmp_path / "ws", 50)
    out = annotate_both(root, 50)
    check_all_valid(root, 50)
    print(f"local smollm2-135m: round 1 {out[1]['seconds']:.0f} s, round 2 {out[2]['seconds']:.0f} s for 50 items")


def generic_workspace(root, rows):
    import json

    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions

    data = root.parent / f"{root.name}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return Ingest(root, IngestOptions(data=str(data)), get_adapter("generic", question="question", choices=("choices",),
                                                            answer="answer")).run()


def test_item_text_holding_the_question_marker_is_annotated(tmp_path):
    """The local prompt is split at a marker; an item that holds the same text is still one item."""
    root = generic_workspace(tmp_path / "ws", [
        {"question": "Nul \u0000QUESTION\u0000 here?", "choices": ["a", "b", "c", "d"], "answer": 1}])
    s = Annotate(root, AnnotateOptions(round=1, annotator=ANNOTATOR, quiet=True)).run()
    assert (s["valid"], s["remaining"]) == (1, 0)


def test_an_item_longer_than_the_context_is_refused(tmp_path):
    """smollm2-135m reads 8192 tokens: an item past that is refused, naming it, before anything
    is stored (its answers would be meaningless)."""
    from curate.core.errors import CurateError

    long = " ".join(["word"] * 9000)
    root = generic_workspace(tmp_path / "ws", [
        {"question": "Normal question about cats?", "choices": ["yes", "no", "maybe", "never"], "answer": 0},
        {"question": long, "choices": ["a", "b", "c", "d"], "answer": 1}])
    with pytest.raises(CurateError, match=r"item .*/1: annotating it takes \d+ tokens, more than the 8192"):
        Annotate(root, AnnotateOptions(round=1, annotator=ANNOTATOR, quiet=True)).run()
    assert records(root).empty
    assert Annotate(root, AnnotateOptions(round=1, annotator=ANNOTATOR, quiet=True, limit=1)).run()["valid"] == 1


@pytest.fixture(scope="module")
def three_items(tmp_path_factory):
    """Round 1 of three items, annotated once for the tests below: (workspace, the number of
    requests of each shared-prefix scoring call, the warnings the run raised)."""
    import warnings

    import torch

    import scoring.shared_prefix as shared

    calls, real, threads = [], shared.score_shared, torch.get_num_threads()
    root = small_workspace(tmp_path_factory.mktemp("three") / "ws", 3)
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as caught:
        torch.set_num_threads(1)
        warnings.simplefilter("always")
        patch.setattr(shared, "score_shared", lambda model, requests, **kw: calls.append(len(requests))
                      or real(model, requests, **kw))
        assert Annotate(root, AnnotateOptions(round=1, annotator=ANNOTATOR, quiet=True)).run()["valid"] == 3
    torch.set_num_threads(threads)
    return root, calls, caught


def test_local_annotation_makes_no_deprecation_warnings(three_items):
    """`make demo` printed transformers' `past_key_values` FutureWarning from the annotator's own
    cached forward passes; answers now come from the scoring engine, which calls nothing deprecated."""
    _, _, caught = three_items
    ours = [w for w in caught if issubclass(w.category, (FutureWarning, DeprecationWarning))]
    assert not ours, [str(w.message) for w in ours]


def test_items_and_questions_are_scored_together_through_the_engine(three_items):
    """One forward pass (scoring.shared_prefix over the engine's runners) for every question of
    three items, after the probe and the self-check; the run records the self-check as `curate
    score` does. It answered one item at a time, one forward pass per question, with its own code."""
    import json

    from annotate.store import open_annotations

    root, calls, _ = three_items
    assert calls == [2, 3 * 7]  # the self-check on the first two questions, then the batch
    with open_annotations(root) as ws:
        info = json.loads(ws.conn.execute("SELECT info_json FROM annotation_runs").fetchone()[0])
    checked = info["self_check"]
    assert (checked["items"], checked["runner"], checked["dtype"]) == (2, "llama", "float32")
    assert checked["max_abs_diff"] < 1e-3  # score_shared against the model's own plain forward
    for raw in records(root, round=1, annotator=ANNOTATOR).raw:  # log-probabilities: below 0
        assert all(x < 0 for q in json.loads(raw).values() for x in q["logprobs"])


def test_the_model_reads_the_tokens_it_read_before(three_items):
    """The prompt stays encoded in its three parts (instructions, item, question turn) and each
    answer is one token after the turn's newline, as before the engine scored it: the gap between
    "yes" and "no" is what the model's own forward gives for those tokens (the newline, now counted
    in each answer as the engine encodes a continuation, is the same for both)."""
    import json

    from annotate.local import LocalAnnotator
    from curate.items.store import Workspace
    from scoring import reference
    from scoring.encode import Request

    root = three_items[0]
    raw = json.loads(records(root, round=1, annotator=ANNOTATOR).raw.iloc[0])
    with Workspace.open(root) as ws:
        item = ws.items()[0]
    local = LocalAnnotator("smollm2-135m")
    encode = local.tokenizer.encode
    instructions, item_text, after = local.chat_parts(item, 1)
    keys, asks = local.asks(item, 1)
    question, answers = asks[-1]
    ids = [encode(t, add_special_tokens=False) for t in (instructions, item_text, question + after)]
    conts = [encode(a, add_special_tokens=False) for a in answers]
    yes, no = reference.score(local.model, [Request(sum(ids, []), conts, [0, 1])])[0].cont_sums
    assert raw[keys[-1]]["logprobs"][0] - raw[keys[-1]]["logprobs"][1] == pytest.approx(yes - no, abs=1e-3)


def test_a_run_killed_between_batches_resumes(tmp_path, monkeypatch):
    """Items are stored batch by batch: a run that dies in its second batch keeps the first
    batch's items, and the next run asks only for the rest."""
    import annotate.local as local
    import scoring.shared_prefix as shared

    # One item per batch: each counts as filling a batch alone. (A budget of 1 token would also
    # do that, but the budget bounds the forward too: every row would then run a token at a time.)
    monkeypatch.setattr(local, "fed_alone", lambda requests: local.BATCH_TOKENS)
    monkeypatch.setattr(local.LocalAnnotator, "check", lambda *a: {})  # the checks are tested above
    real, calls = shared.score_shared, []

    def dies_in_the_second_batch(model, requests, **kw):
        calls.append(len(requests))
        if len(calls) == 2:  # the first batch, then this
            raise RuntimeError("killed")
        return real(model, requests, **kw)

    monkeypatch.setattr(shared, "score_shared", dies_in_the_second_batch)
    root = small_workspace(tmp_path / "ws", 2)
    with pytest.raises(RuntimeError, match="killed"):
        Annotate(root, AnnotateOptions(round=1, annotator=ANNOTATOR, quiet=True)).run()
    assert len(records(root, round=1, annotator=ANNOTATOR)) == 1
    monkeypatch.setattr(shared, "score_shared", real)
    again = Annotate(root, AnnotateOptions(round=1, annotator=ANNOTATOR, quiet=True)).run()
    assert (again["skipped"], again["valid"], again["remaining"]) == (1, 1, 0)


class Vocabulary:
    """What a tiny random model needs of a tokenizer: its size and special ids."""
    bos_token_id, eos_token_id, pad_token_id = 0, 1, 1

    def __len__(self):
        return 500


@pytest.mark.parametrize("name", ["llama", "qwen2", "gpt2", "mamba"])
def test_shared_prefix_scoring_equals_the_engines(name):
    """Requests sharing prefixes of different depths (an instruction, items, questions), with empty
    and one-token continuations: the numbers score_requests gives, on the llama and packed runners
    (qwen2 with a sliding window shorter than the rows, gpt2's absolute positions) and through
    score_requests itself on a runner that cannot share (mamba: sequences) or past max_tokens."""
    import random

    from scoring.encode import Request
    from scoring.forward import runner_for, score_requests
    from scoring.shared_prefix import score_shared
    from test_scoring_architectures import tiny

    model = tiny(name, Vocabulary())
    rng = random.Random(0)

    def ids(n):
        return [rng.randrange(2, 500) for _ in range(n)]

    instructions, requests = ids(12), []
    for item in range(3):
        shown = instructions + ids(5 + item)
        for question in range(3):
            requests.append(Request(shown + ids(2 + question), [ids(1), ids(3), []], [0, 1, 2]))
    requests += [Request(instructions[:4], [ids(5)], [0]), Request(shown, [ids(2), ids(1)], [0, 1])]
    engine = score_requests(model, requests, pad_id=1)
    assert runner_for(model) == {"llama": "llama", "mamba": "sequences"}.get(name, "packed")
    # max_tokens below the tree's size: the engine's own way, long rows in pieces
    for ours in (score_shared(model, requests, pad_id=1), score_shared(model, requests, pad_id=1, max_tokens=16)):
        for a, b in zip(ours, engine):
            assert a.cont_sums == pytest.approx(b.cont_sums, abs=1e-4) and a.cont_greedy == b.cont_greedy


def test_a_self_check_failure_stops_the_run_before_it_is_recorded(tmp_path, monkeypatch):
    """The self-check compares what the run stores with (score_shared) to the model's own plain
    forward on the first questions: numbers off by more than float32's tolerance stop the run,
    naming the item and question, before a run or a record is stored."""
    import scoring.shared_prefix as shared
    from annotate.store import open_annotations
    from curate.core.errors import CurateError
    from scoring.encode import Result

    real = shared.score_shared
    monkeypatch.setattr(shared, "score_shared", lambda *a, **kw: [
        Result(r.prefix_sum, [x + 0.01 for x in r.cont_sums], r.cont_greedy) for r in real(*a, **kw)])
    root = small_workspace(tmp_path / "ws", 1)
    with pytest.raises(CurateError, match=r"self-check failed: .* llama runner, item hellaswag/validation/0, "
                                          r"question ungrammatical_\w+ request 0, continuation \d: .* here, .* by "
                                          r"the model's own forward .*; nothing was stored"):
        Annotate(root, AnnotateOptions(round=1, annotator=ANNOTATOR, quiet=True)).run()
    with open_annotations(root) as ws:
        assert ws.conn.execute("SELECT count(*) FROM annotation_runs").fetchone()[0] == 0
    assert records(root).empty
