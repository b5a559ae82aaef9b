"""`curate plant`: a planted copy of a workspace, built whole in a temporary folder, and its key.

The new workspace gets the planted items, the scores that still hold (every score of an item
left alone; a gold move's scores too, since its options are unchanged), and fresh scores of the
changed options from the local models given. The key goes to a file outside the workspace;
nothing inside it (items, raw rows, meta, scores) says which items were planted: the raw rows of
every item are rewritten alike, from the planted item, and the seed stays in the key.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import curate
from curate.core.atomic import temp_folder, write_text
from curate.core.clock import now
from curate.core.errors import CurateError
from curate.items.canonical import canonical_json, sha256_text
from curate.core.lock import claimed, remove_stale
from curate.plant.inject import Planted, check_kinds, plant_items
from curate.plant.options import PlantOptions
from curate.items.store import DB_NAME, Workspace, check_new_workspace, create_workspace
from scoring.store import delete_scores, open_scores

KEY_FORMAT = "benchcurate-plant-key/2"
#: Keys of this format carried no digest of their own: evaluate cannot tell an edited one.
OLD_KEY_FORMATS = ("benchcurate-plant-key/1",)


def default_key_path(target: Path) -> Path:
    """Beside the new workspace, never inside it."""
    target = Path(os.path.abspath(target))
    return target.with_name(target.name + ".plant-key.json")


def items_digest(items: list[dict]) -> str:
    """What the key belongs to: the planted items' content hashes in row order."""
    return sha256_text("\n".join(it["content_hash"] for it in items))


def key_digest(key: dict) -> str:
    """What the key says, sealed: every field but the digest itself (the plants, their counts and
    ``items_digest``, the planted workspace's identity), as canonical JSON. Evaluate recomputes
    it, so a key edited by hand is refused rather than trusted."""
    body = {k: v for k, v in key.items() if k != "key_digest"}
    return sha256_text(canonical_json(body))


def plant_workspace(source, target, **options) -> dict:
    """Copy workspace ``source`` to ``target`` with errors planted; write the key to ``key``
    (default: beside ``target``). Returns a summary. A failure leaves neither. ``options``:
    ``PlantOptions``', by name."""
    o = PlantOptions(**options)
    source, target, rate, seed = Path(source), Path(target), o.rate, o.seed
    key = Path(o.key) if o.key else default_key_path(target)
    check_new_workspace(target)
    _check_key_path(key, target)
    with Workspace.open(source) as ws:
        items, meta = ws.items(), {k: ws.meta(k) for k in _meta_keys(ws)}
    if "planted" in meta:  # the key of a second plant would count the first plants as clean items
        raise CurateError(f"{source}: is a planted copy made by `curate plant` (its key knows only its own plants); "
                          f"plant from the original workspace instead")
    kinds = check_kinds(o.kinds)
    planted_items, planted = plant_items(items, kinds, rate, seed)
    home = Path(os.path.abspath(target)).parent
    home.mkdir(parents=True, exist_ok=True)
    remove_stale(home, rf"\.{re.escape(target.name)}\.(\d+)\.plant\.partial")
    tmp = temp_folder(home, f".{target.name}.{os.getpid()}.plant.", ".partial")
    try:
        with claimed(tmp):
            built = tmp / "workspace"
            meta |= {"planted": {"note": "a planted copy made by `curate plant`; its key is kept outside it",
                                 "created_at": now(), "toolkit_version": curate.__version__}}
            create_workspace(built, meta=meta, items=planted_items, raw_rows=[_raw(it) for it in planted_items])
            labels = _copy_scores(source, built, planted, planted_items)
            rescored = [_rescore(built, model, labels, o) for model in o.models]
            dropped = _unscored(built, labels, planted, drop=o.drop_unscored)
            summary = {"format": KEY_FORMAT, "source": str(source.resolve()), "workspace": str(Path(os.path.abspath(target))),
                       "items_digest": items_digest(planted_items), "items": len(items), "kinds": kinds,
                       "rate": rate, "seed": seed, "counts": {k: sum(p.kind == k for p in planted) for k in kinds},
                       "rescored": rescored, "dropped_labels": sorted(dropped), "dropped_scores": dropped,
                       "created_at": now(), "planted": [_key_row(p) for p in planted]}
            summary["key_digest"] = key_digest(summary)
            write_text(key, json.dumps(summary, indent=1) + "\n")
            try:
                _move_into_place(built, target)
            except BaseException:
                key.unlink(missing_ok=True)
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary | {"key": str(key)}


def _check_key_path(key: Path, target: Path) -> None:
    inside = Path(os.path.abspath(key)).is_relative_to(Path(os.path.abspath(target)))
    if inside:
        raise CurateError(f"--key {key}: is inside the new workspace {target}, where detectors read; put it outside")
    if key.exists():
        raise CurateError(f"--key {key}: already exists; name a new file (a key belongs to one planted workspace)")


def _meta_keys(ws: Workspace) -> list[str]:
    return [r[0] for r in ws.conn.execute("SELECT key FROM meta ORDER BY key")]


def _raw(item: dict) -> dict:
    """Every item's raw row, rewritten alike: the source rows would show the original answers."""
    return {k: item[k] for k in ("item_id", "context_parts", "options", "gold")}


def _key_row(p: Planted) -> dict:
    row = {"item_id": p.item_id, "row_index": p.row_index, "kind": p.kind, "note": p.note, "gold": p.gold,
           "new_gold": p.new_gold, "changed_options": list(p.changed_options)}
    return row | ({"donor": p.donor} if p.donor else {})


def _copy_scores(source: Path, built: Path, planted: list[Planted], items: list[dict]) -> dict:
    """Copy every score run and every score of an item whose options are unchanged; a gold
    move's rows take the item's new content hash (what was scored is the same). Returns the
    source's (label, mode, formulation) -> the changed items it held, for the check after."""
    open_scores(source).close()  # the source's score tables, at this toolkit's version
    changed = {p.item_id for p in planted if p.changed_options}
    new_hash = {it["item_id"]: it["content_hash"] for it in items}
    with open_scores(built) as ws:
        ws.conn.execute("ATTACH DATABASE ? AS src", (str(source / DB_NAME),))
        try:
            held = _held(ws, "src", changed)
            runs = _shared_columns(ws, "score_runs")
            cols = _shared_columns(ws, "scores")
            hashed = ", ".join("coalesce(m.new_hash, s.content_hash)" if c == "content_hash" else f"s.{c}"
                               for c in cols.split(", "))
            old_hash = dict(ws.conn.execute("SELECT item_id, content_hash FROM src.items"))
            with ws.transaction(foreign_keys=False):
                ws.conn.execute(f"INSERT INTO score_runs ({runs}) SELECT {runs} FROM src.score_runs")
                ws.conn.execute("CREATE TEMP TABLE changed (item_id TEXT PRIMARY KEY)")
                ws.conn.executemany("INSERT INTO temp.changed VALUES (?)", ((i,) for i in changed))
                ws.conn.execute("CREATE TEMP TABLE moved (item_id TEXT PRIMARY KEY, old_hash TEXT, new_hash TEXT)")
                ws.conn.executemany("INSERT INTO temp.moved VALUES (?, ?, ?)",
                                    ((p.item_id, old_hash[p.item_id], new_hash[p.item_id])
                                     for p in planted if not p.changed_options))
                # one pass: a gold move's rows scored on the item as it was take its new hash
                ws.conn.execute(f"INSERT INTO scores ({cols}) SELECT {hashed} FROM src.scores s "
                                "LEFT JOIN temp.moved m ON m.item_id = s.item_id AND m.old_hash = s.content_hash "
                                "WHERE s.item_id NOT IN (SELECT item_id FROM temp.changed)")
                ws.conn.execute("DROP TABLE temp.changed")
                ws.conn.execute("DROP TABLE temp.moved")
        finally:
            ws.conn.execute("DETACH DATABASE src")
    return held


def _held(ws: Workspace, db: str, item_ids: set[str]) -> dict:
    """(label, mode, formulation) -> which of ``item_ids`` it holds scores of, in database ``db``
    (every pair the database holds is a key)."""
    out: dict = {tuple(r): set() for r in ws.conn.execute(f"SELECT DISTINCT model, mode, formulation FROM {db}.scores")}
    for label, mode, formulation, item_id in ws.conn.execute(
            f"SELECT DISTINCT model, mode, formulation, item_id FROM {db}.scores "
            "WHERE item_id IN (SELECT value FROM json_each(?))", (json.dumps(sorted(item_ids)),)):
        out[label, mode, formulation].add(item_id)
    return out


def _shared_columns(ws: Workspace, table: str) -> str:
    """The columns of ``table`` both databases have (a source made before a later migration
    has fewer; those take their defaults)."""
    mine = [r[1] for r in ws.conn.execute(f"PRAGMA main.table_info({table})")]
    theirs = {r[1] for r in ws.conn.execute(f"PRAGMA src.table_info({table})")}
    return ", ".join(c for c in mine if c in theirs)


def _rescore(built: Path, model: str, labels: dict, options) -> dict:
    """Score ``model`` on the planted workspace under its own name: what its copied scores
    cover is reused, so only the changed items are computed. It scores the (mode, formulation)
    pairs its label holds, else those any label holds, else full mode."""
    from scoring.run import Score

    own = {(m, f) for label, m, f in labels if label == model}
    pairs = sorted(own or {(m, f) for _, m, f in labels} or {("full", None)}, key=lambda p: (p[0], p[1] or ""))
    by_formulation: dict = {}
    for mode, formulation in pairs:
        by_formulation.setdefault(formulation, []).append(mode)
    computed = 0
    for formulation, modes in by_formulation.items():
        summary = Score.with_options(built, model=model, modes=modes, label=model,
                                     formulations=[formulation] if formulation else None, dtype=options.dtype,
                                     device=options.device, batch_tokens=options.batch_tokens,
                                     self_check=options.self_check, quiet=options.quiet).run()
        computed += summary["computed"]
    return {"model": model, "pairs": [list(p) for p in pairs], "computed_units": computed}


def _unscored(built: Path, labels: dict, planted: list[Planted], *, drop: bool) -> dict[str, int]:
    """The labels that held scores of a changed item which no model re-scored: refused, or
    (``drop``) deleted whole, so no detector reads a model with holes exactly where the plants are.
    Returns label -> the score rows deleted. Dropping every label is refused: a planted workspace
    without scores would leave evaluate no score detector to measure."""
    changed = {p.item_id for p in planted if p.changed_options}
    with open_scores(built) as ws:
        now_held, missing = _held(ws, "main", changed), {}
        for (label, mode, formulation), ids in labels.items():
            lost = ids - now_held.get((label, mode, formulation), set())
            if lost:
                missing[label] = max(missing.get(label, 0), len(lost))
        if missing and not drop:
            label, n = next(iter(sorted(missing.items())))
            raise CurateError(f"model {label!r}: its scores of {n} planted item(s) whose options changed cannot be "
                              f"copied and were not re-scored; give --model {label} (a local model) to re-score "
                              f"them, plant only --kinds gold_move, or --drop-unscored to leave "
                              f"{', '.join(sorted(missing))} out of the planted workspace")
        if not missing:
            return {}
        held = {r[0] for r in ws.conn.execute("SELECT DISTINCT model FROM scores")}
        if held <= set(missing):
            raise CurateError(f"--drop-unscored would leave out every model ({', '.join(sorted(missing))}): the planted "
                              f"workspace would hold no scores for the score detectors; give --model (a local model) "
                              f"to re-score the changed items, or plant only --kinds gold_move")
        dropped = {}
        with ws.transaction():
            for label in sorted(missing):
                dropped[label] = delete_scores(ws, "model = ?", (label,))
    return dropped


def _move_into_place(built: Path, target: Path) -> None:
    """One rename onto nothing or an empty folder; another process's workspace is never replaced."""
    try:
        os.replace(built, target)
    except OSError as exc:
        raise CurateError(f"{target}: was created by another process while this one was planting; nothing was "
                          f"written by this one") from None
