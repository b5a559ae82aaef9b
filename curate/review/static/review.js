// curate review: one item at a time, keyboard first. Talks only to its own server's /api/.
"use strict";

const TOKEN = document.querySelector('meta[name="review-token"]').content;
const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);

const state = {
  config: null, reviewer: null, queue: null, items: [], answered: {}, pos: 0,
  item: null, form: null, active: 0, pendingLeave: false, saving: false,
};

async function api(path, body) {
  const opts = {headers: {"X-Review-Token": TOKEN}};
  if (body !== undefined) {
    opts.method = "POST";
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  const data = await res.json();
  if (!res.ok) {
    const err = new Error(data.error || res.statusText);
    err.status = res.status;
    err.data = data;
    throw err;
  }
  return data;
}

function say(text, ok) {
  $("status").textContent = text;
  $("status").className = ok ? "ok" : "";
}

function letters(n) {
  return Array.from({length: n}, (_, i) => String.fromCharCode(65 + i));
}

// --- the verdict form ------------------------------------------------------------------------

function questions() {
  const item = state.item, opts = letters(item.options.length);
  return [
    {key: "labels", round: 1, multi: true, title: "Round 1: quality labels (toggle; 8 = no issue)",
     choices: state.config.labels.map(([value, text]) => ({value, text}))},
    {key: "best", round: 2, title: "Round 2: most plausible option", choices: opts.map((t, i) => ({value: i, text: t}))},
    {key: "equally_good", round: 2, multi: true, title: "Other options as good as the gold one (toggle)",
     choices: opts.map((t, i) => ({value: i, text: t, disabled: i === item.gold}))},
    {key: "all_implausible", round: 2, title: "All options implausible?",
     choices: [{value: true, text: "yes"}, {value: false, text: "no"}]},
    {key: "worst", round: 2, title: "Least plausible option", choices: opts.map((t, i) => ({value: i, text: t}))},
  ];
}

function formFrom(verdicts) {
  const r1 = verdicts["1"], r2 = verdicts["2"];
  return {
    labels: r1 ? [...r1.result.labels] : [],
    best: r2 ? r2.result.best : null,
    equally_good: r2 ? [...r2.result.equally_good] : [],
    all_implausible: r2 ? r2.result.all_implausible : null,
    worst: r2 ? r2.result.worst : null,
    note: (r1 && r1.note) || (r2 && r2.note) || "",
    version: {1: r1 ? r1.version : 0, 2: r2 ? r2.version : 0},
    dirty: {1: false, 2: false},
  };
}

function chosen(q, value) {
  const v = state.form[q.key];
  return q.multi ? v.includes(value) : v === value;
}

function renderForm() {
  const box = $("questions");
  box.textContent = "";
  questions().forEach((q, qi) => {
    const div = document.createElement("div");
    div.className = "q" + (qi === state.active ? " active" : "");
    div.dataset.key = q.key;
    const h = document.createElement("h4");
    h.textContent = q.title;
    div.appendChild(h);
    q.choices.forEach((c, ci) => {
      const span = document.createElement("span");
      span.className = "choice" + (chosen(q, c.value) ? " chosen" : "") + (c.disabled ? " disabled" : "");
      span.textContent = (ci + 1) + " " + c.text;
      span.addEventListener("click", () => { state.active = qi; pick(ci); });
      div.appendChild(span);
    });
    box.appendChild(div);
  });
  $("note").value = state.form.note;
  const v = state.form.version;
  $("saved").textContent = `saved: round 1 ${v[1] ? "v" + v[1] : "-"}, round 2 ${v[2] ? "v" + v[2] : "-"}`;
}

function pick(index) {
  const qs = questions(), q = qs[state.active], c = q.choices[index];
  if (!c || c.disabled) return;
  const f = state.form;
  if (q.key === "labels") {
    const on = f.labels.includes(c.value);
    f.labels = on ? f.labels.filter((x) => x !== c.value)
                  : (c.value === "high_quality" ? ["high_quality"] : f.labels.filter((x) => x !== "high_quality").concat([c.value]));
  } else if (q.multi) {
    f[q.key] = f[q.key].includes(c.value) ? f[q.key].filter((x) => x !== c.value) : f[q.key].concat([c.value]).sort();
  } else {
    f[q.key] = c.value;
    if (q.key === "best" && f.all_implausible === null) f.all_implausible = false;
    if (state.active < qs.length - 1) state.active += 1;   // single answers move on
  }
  f.dirty[q.round] = true;
  state.pendingLeave = false;
  renderForm();
}

function results() {
  const f = state.form, out = {};
  if (f.labels.length) out[1] = {labels: f.labels};
  if (f.best !== null && f.worst !== null) {
    out[2] = {best: f.best, equally_good: f.equally_good, all_implausible: !!f.all_implausible, worst: f.worst};
  }
  return out;
}

async function save() {
  if (state.saving) return false;
  const f = state.form, ready = results();
  const noteChanged = f.note !== $("note").value;
  f.note = $("note").value;
  const rounds = [1, 2].filter((r) => ready[r] && (f.dirty[r] || noteChanged || !f.version[r]));
  if (!Object.keys(ready).length) {
    say("nothing to save: pick labels (round 1) or best and worst options (round 2) first");
    return false;
  }
  state.saving = true;
  try {
    for (const r of rounds) {
      const res = await api("/api/verdict", {reviewer: state.reviewer, item_id: state.item.item_id, round: r,
                                             result: ready[r], note: f.note, version: f.version[r]});
      f.version[r] = res.version;
      f.dirty[r] = false;
      const got = new Set(state.answered[state.item.item_id] || []);
      got.add(r);
      state.answered[state.item.item_id] = [...got].sort();
    }
  } catch (err) {
    say(err.status === 409 ? `not saved: ${err.message}; the item was reloaded, check and save again`
                           : `not saved: ${err.message}`);
    if (err.status === 409) await loadItem();
    return false;
  } finally {
    state.saving = false;
  }
  renderProgress();
  say(`saved ${state.item.item_id} (round ${rounds.join(" and ") || "unchanged"})`, true);
  return true;
}

// --- queue and navigation --------------------------------------------------------------------

function renderProgress() {
  const ids = state.items, n = ids.length;
  const done = ids.filter((i) => (state.answered[i] || []).length).length;
  const r1 = ids.filter((i) => (state.answered[i] || []).includes(1)).length;
  const r2 = ids.filter((i) => (state.answered[i] || []).includes(2)).length;
  const p = $("progress");
  p.dataset.either = done;
  p.dataset.total = n;
  p.textContent = `${done} of ${n} answered (round 1: ${r1}, round 2: ${r2})`;
  $("item-pos").textContent = n ? `(${state.pos + 1} of ${n})` : "";
}

function dirty() {
  const f = state.form;
  return f && (f.dirty[1] || f.dirty[2] || f.note !== $("note").value);
}

async function go(pos) {
  if (pos < 0 || pos >= state.items.length) {
    say(pos < 0 ? "start of the queue" : "end of the queue", true);
    return;
  }
  if (dirty() && !state.pendingLeave) {
    state.pendingLeave = true;
    say("unsaved changes: Enter saves them, j/k again leaves without saving");
    return;
  }
  state.pendingLeave = false;
  state.pos = pos;
  history.replaceState(null, "", `#i=${pos}`);
  await loadItem();
}

async function loadItem() {
  const id = state.items[state.pos];
  const item = await api(`/api/item?id=${encodeURIComponent(id)}&reviewer=${encodeURIComponent(state.reviewer)}` +
                         `&queue=${encodeURIComponent(state.queue)}`);
  state.item = item;
  state.form = formFrom(item.verdicts);
  state.active = 0;
  const art = $("item");
  art.innerHTML = `<h2 id="item-id"></h2>` + item.sections;   // sections are escaped by the server
  art.dataset.loaded = item.item_id;   // the app has this item (the server-rendered first one has none)
  $("item-id").textContent = `${item.item_id}` + (item.source ? ` (${item.source})` : "");
  renderForm();
  renderProgress();
}

async function loadQueue(name) {
  const q = await api(`/api/queue?name=${encodeURIComponent(name)}&reviewer=${encodeURIComponent(state.reviewer)}`);
  state.queue = q.name;
  state.items = q.items;
  state.answered = q.answered;
  const fromHash = /^#i=(\d+)$/.exec(location.hash);
  let pos = fromHash ? Number(fromHash[1]) : state.items.findIndex((i) => !(state.answered[i] || []).length);
  if (pos < 0 || pos >= state.items.length) pos = 0;
  state.pos = pos;
  if (!state.items.length) {
    $("item").innerHTML = '<p class="hint">This queue is empty.</p>';
    renderProgress();
    return;
  }
  await go(pos);
}

function nextUnanswered() {
  const n = state.items.length;
  for (let k = 1; k <= n; k++) {
    const p = (state.pos + k) % n;
    if (!(state.answered[state.items[p]] || []).length) return p;
  }
  return -1;
}

// --- keys ------------------------------------------------------------------------------------

// Keys are handled one after another, in the order pressed: a key pressed while an item loads
// acts on the item that is then on screen, never on the one being left. The page arrives with its
// first item rendered by the server; keys pressed before the app has loaded it wait for that.
let chain = Promise.resolve();
const HANDLED = /^([1-9]|Enter|Tab|ArrowDown|ArrowUp|ArrowLeft|ArrowRight|j|k|u)$/;

document.addEventListener("keydown", (e) => {
  if ((e.ctrlKey && e.key !== "Enter") || e.metaKey || e.altKey) return;
  const focus = document.activeElement;
  if (focus === $("note")) {
    if (e.key === "Escape") $("note").blur();
    else if (e.key === "Enter" && e.ctrlKey) { e.preventDefault(); run(saveAndNext); }
    return;
  }
  if (focus && ["INPUT", "SELECT", "TEXTAREA"].includes(focus.tagName)) return;
  if (e.key === "n") { e.preventDefault(); $("note").focus(); return; }
  if (!HANDLED.test(e.key)) return;
  e.preventDefault();
  const key = e.key, shift = e.shiftKey;
  run(() => onKey(key, shift));
});

function run(task) {
  chain = chain.then(task).catch((err) => say(err.message));
}

async function saveAndNext() {
  if (state.item && await save()) await go(state.pos + 1);
}

async function onKey(key, shift) {
  if (!state.item) return;   // no reviewer name yet, or an empty queue
  const nq = questions().length;
  if (/^[1-9]$/.test(key)) pick(Number(key) - 1);
  else if (key === "ArrowDown" || (key === "Tab" && !shift)) { state.active = (state.active + 1) % nq; renderForm(); }
  else if (key === "ArrowUp" || key === "Tab") { state.active = (state.active + nq - 1) % nq; renderForm(); }
  else if (key === "Enter") await saveAndNext();
  else if (key === "j" || key === "ArrowRight") await go(state.pos + 1);
  else if (key === "k" || key === "ArrowLeft") await go(state.pos - 1);
  else if (key === "u") {
    const p = nextUnanswered();
    if (p < 0) say("every item of this queue is answered", true);
    else await go(p);
  }
}

// --- start -----------------------------------------------------------------------------------

async function start() {
  state.config = await api("/api/config");
  state.reviewer = params.get("reviewer") || state.config.reviewer;
  $("workspace").textContent = `${state.config.workspace} (${state.config.items} items)`;
  if (!state.reviewer) {
    $("who").hidden = false;
    $("who-form").addEventListener("submit", (e) => {
      e.preventDefault();
      params.set("reviewer", $("who-name").value);
      location.search = params.toString();
    });
    $("item").innerHTML = '<p class="hint">Who is reviewing? Enter your name above.</p>';
    return;
  }
  $("reviewer").textContent = `reviewer: human:${state.reviewer}`;
  const select = $("queue"), wanted = params.get("queue") || state.config.queue;
  for (const q of state.config.queues) {
    const o = document.createElement("option");
    o.value = q.name;
    o.textContent = `${q.name} (${q.items}): ${q.about}`;
    select.appendChild(o);
  }
  select.value = wanted;
  select.addEventListener("change", () => {
    params.set("queue", select.value);
    history.replaceState(null, "", "?" + params.toString());
    select.blur();
    loadQueue(select.value).catch((err) => say(err.message));
  });
  await loadQueue(wanted);
}

chain = start().catch((err) => say(err.message));
