"""The shot count as a score axis (issue 29): migration scores-004-fewshot, read and write by
shot count, and readers that never pool 0-shot with k-shot rows."""
from __future__ import annotations

import pandas as pd
import pytest

from conftest import SHARED
from store_helpers import scored_before

BENCHMARKS = SHARED / "benchmarks"


@pytest.fixture
def copa_ws(tmp_path):
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    return Ingest(tmp_path / "ws", IngestOptions(data=str(BENCHMARKS / "copa" / "validation.jsonl.gz"),
                                                 limit=2), get_adapter("copa")).run()


def _rows(fewshot, values, **extra):
    return [{"model": "m", "mode": "full", "formulation": "cloze", "item_id": f"copa/validation/{i}",
             "option_index": j, "logprob_sum": values[i][j], "content_hash": "h", "run_id": "r", **extra}
            | ({} if fewshot is None else {"fewshot": fewshot}) for i in range(2) for j in range(2)]


def test_migration_keeps_old_rows_as_zero_shot(copa_ws):
    """A workspace scored before the axis: every row becomes 0-shot and a 5-shot row of the same
    option is then a different row."""
    from scoring.store import open_scores, read_scores, write_scores
    scored_before(copa_ws, 3, formulation="letters")
    with open_scores(copa_ws) as new:
        frame = read_scores(new)
        assert list(frame["fewshot"]) == [0] * 4 and list(frame["logprob_sum"]) == [0, -1, -1, -2]
        with new.transaction():
            write_scores(new, [r | {"formulation": "letters"} for r in _rows(5, [[-7, -8], [-9, -10]])])
        assert len(read_scores(new)) == 8
        assert list(read_scores(new, fewshots=[5])["logprob_sum"]) == [-7, -8, -9, -10]
        assert list(read_scores(new, fewshots=[0])["logprob_sum"]) == [0, -1, -1, -2]
        pk = [r[1] for r in new.conn.execute("PRAGMA table_info(scores)") if r[5]]
        assert pk == ["model", "mode", "formulation", "fewshot", "item_id", "option_index"]


def test_write_defaults_to_zero_shot_and_shots_do_not_overwrite(copa_ws):
    from scoring.store import add_run, label_runs, open_scores, read_scores, write_scores
    with open_scores(copa_ws) as ws, ws.transaction():
        add_run(ws, run_id="r", model="m", origin="scored", info={})
        write_scores(ws, _rows(None, [[-1, -2], [-3, -4]]))
        write_scores(ws, _rows(1, [[-5, -6], [-7, -8]]))
        write_scores(ws, _rows(5, [[-9, -10], [-11, -12]]))
    with open_scores(copa_ws) as ws:
        frame = read_scores(ws)
        runs = label_runs(ws, "m")
    assert frame.groupby("fewshot")["logprob_sum"].sum().to_dict() == {0: -10, 1: -26, 5: -42}
    assert sorted(runs["fewshot"]) == [0, 1, 5] and set(runs["items"]) == {2}


def test_readers_never_pool_shot_counts(copa_ws):
    """0-shot and 5-shot predictions disagree here; a reader given both refuses, the report's
    sections read one shot count, and the filter's inputs read the shot count asked for."""
    from curate.analyses.report import one_shot_count
    from curate.core.errors import CurateError
    from curate.filter.inputs import Inputs
    from scoring.normalize import predictions
    from scoring.store import add_run, open_scores, read_scores, write_scores
    with open_scores(copa_ws) as ws, ws.transaction():
        add_run(ws, run_id="r", model="m", origin="scored", info={})
        write_scores(ws, _rows(0, [[-1, -2], [-1, -2]]))
        write_scores(ws, _rows(5, [[-2, -1], [-2, -1]]))
    with open_scores(copa_ws) as ws:
        frame = read_scores(ws)
        with pytest.raises(CurateError, match="several shot counts"):
            predictions(frame, "sum")
        assert set(predictions(one_shot_count(frame), "sum")["pred"]) == {0}
        inputs = Inputs(ws)
        assert set(inputs.predictions_in("m", "full", "sum", ["cloze"])["pred"]) == {0}
        assert set(inputs.predictions_in("m", "full", "sum", ["cloze"], fewshot=5)["pred"]) == {1}
        assert inputs.used["score_runs"]["r"]["fewshots"] == [5]


def test_score_sources_keep_shot_counts_apart(copa_ws):
    from scoring.store import add_run, open_scores, read_runs, read_scores, require_one_source, score_sources
    with open_scores(copa_ws) as ws, ws.transaction():
        add_run(ws, run_id="r", model="m", origin="scored", info={}, engine=1)
        add_run(ws, run_id="s", model="m", origin="scored", info={}, engine=2)
    from scoring.store import write_scores
    with open_scores(copa_ws) as ws, ws.transaction():
        write_scores(ws, _rows(0, [[-1, -2], [-1, -2]]))
        write_scores(ws, [r | {"run_id": "s"} for r in _rows(5, [[-1, -2], [-1, -2]])])
    with open_scores(copa_ws) as ws:
        sources = score_sources(read_scores(ws), read_runs(ws))
    assert list(sources["fewshot"]) == [0, 5]
    # Engine versions differ across shot counts, not within one: nothing mixes.
    assert isinstance(require_one_source(sources), pd.DataFrame)


def test_the_audit_config_takes_shot_counts_and_a_pool(tmp_path):
    """scoring.fewshot and scoring.fewshot_pool (a path beside the config, or 'evaluated')."""
    import yaml

    from curate import demo
    from curate.audit.config import load_config
    from curate.core.errors import InputError

    data = yaml.safe_load(demo.config_path().read_text())
    for pool, expected in (("dev.jsonl", str((tmp_path / "dev.jsonl").resolve())), ("evaluated", "evaluated")):
        data["scoring"].update(fewshot="0,5", fewshot_pool=pool)
        (tmp_path / "audit.yaml").write_text(yaml.safe_dump(data))
        config = load_config(tmp_path / "audit.yaml", cwd=tmp_path, check_files=False)
        [scoring] = config.options("score")
        assert (scoring.fewshot, scoring.fewshot_pool) == ([0, 5], expected)  # "0,5" as the score stage takes it
    data["scoring"]["fewshot"] = "five"
    (tmp_path / "audit.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="scoring.fewshot"):
        load_config(tmp_path / "audit.yaml", cwd=tmp_path, check_files=False)
