"use strict";
// The review page of `spotdiff review`: keyboard-first accept / reject / edit / undo / next / previous over
// the items the server lists. Every change is sent at once, one after another in the order the keys were
// pressed, and shown once the server has saved it (so a closed tab loses nothing).

const $ = (id) => document.getElementById(id);
const state = { items: [], current: -1, filter: "all", undo: [], editing: false, textFields: [], progress: null };
let queue = Promise.resolve();

function run(action) {
  queue = queue.then(action).catch((err) => status(String(err.message || err), true));
  return queue;
}

function status(text, error) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

async function api(path, body) {
  const init = { credentials: "same-origin" };
  if (body !== undefined) {
    Object.assign(init, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  }
  const response = await fetch(path, init);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

function matches(item) {
  if (state.filter === "undecided") return item.decision === null;
  if (state.filter === "aside") return item.suggested === "reject";
  if (state.filter === "rejected") return item.decision === "reject";
  return true;
}

// the first undecided item the filter shows, else the first it shows (-1: none)
function firstShown() {
  const shown = state.items.filter(matches);
  const open = shown.find((item) => item.decision === null);
  return (open || shown[0] || { index: -1 }).index;
}

// move to the next (1) or previous (-1) item the filter shows; false at either end
function step(direction) {
  for (let k = state.current + direction; k >= 0 && k < state.items.length; k += direction) {
    if (matches(state.items[k])) {
      state.current = k;
      return true;
    }
  }
  return false;
}

function move(direction) {
  if (!step(direction)) status(direction > 0 ? "this is the last item shown" : "this is the first item shown");
  render();
}

function setFilter(value) {
  state.filter = value;
  $("filter").value = value;
  state.current = firstShown();
  render();
}

async function save(item, decision, texts) {
  const data = await api("api/decide", { id: item.id, decision: decision, texts: texts });
  state.items[item.index] = data.item;
  state.progress = data.progress;
  status(`saved ${item.id}`);
}

async function decide(decision) {
  const item = state.items[state.current];
  if (!item) return;
  state.undo.push({ index: item.index, decision: item.decision, texts: Object.assign({}, item.texts) });
  await save(item, decision, null);
  step(1);
  render();
}

async function undo() {
  const last = state.undo.pop();
  if (!last) {
    status("nothing to undo");
    return;
  }
  await save(state.items[last.index], last.decision, last.texts);
  state.current = last.index;
  render();
}

function startEdit() {
  if (!state.items[state.current]) return;
  state.editing = true;
  render();
  const first = document.querySelector("#texts input");
  if (first) first.focus();
}

async function saveEdit() {
  const item = state.items[state.current];
  const texts = {};
  document.querySelectorAll("#texts input").forEach((input) => (texts[input.dataset.field] = input.value));
  state.undo.push({ index: item.index, decision: item.decision, texts: Object.assign({}, item.texts) });
  await save(item, item.decision, texts);
  state.editing = false;
  render();
}

// the words of `text` that are not in the longest common word sequence with `reference`, marked
function marked(text, reference) {
  const key = (w) => w.toLowerCase().replace(/[^\p{L}\p{N}]/gu, "");
  const a = reference.split(/\s+/).filter(Boolean).map(key);
  const parts = text.split(/(\s+)/);
  const b = parts.filter((p, k) => k % 2 === 0 && p);
  const lcs = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === key(b[j]) ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const common = new Set();
  for (let i = 0, j = 0; i < a.length && j < b.length; ) {
    if (a[i] === key(b[j])) {
      common.add(j);
      i++;
      j++;
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) i++;
    else j++;
  }
  const fragment = document.createDocumentFragment();
  let j = 0;
  parts.forEach((part, k) => {
    if (k % 2 === 1 || !part) {
      fragment.append(part);
      return;
    }
    if (common.has(j++) || text === reference) fragment.append(part);
    else fragment.append(Object.assign(document.createElement("mark"), { textContent: part }));
  });
  return fragment;
}

function textLine(item, field, reference) {
  const line = document.createElement("div");
  line.className = "text";
  const name = Object.assign(document.createElement("span"), { className: "name", textContent: field });
  line.append(name, " ");
  if (state.editing) {
    const input = Object.assign(document.createElement("input"), { type: "text", value: item.texts[field] });
    input.dataset.field = field;
    line.append(input);
    return line;
  }
  const value = document.createElement("span");
  value.append(marked(item.texts[field], reference));
  if (item.texts[field] !== item.original[field]) {
    value.className = "edited";
    value.title = `edited; the sheet says: ${item.original[field]}`;
  }
  line.append(value);
  return line;
}

function figure(src, caption, boxes) {
  const fig = document.createElement("figure");
  const frame = Object.assign(document.createElement("div"), { className: "frame" });
  const img = Object.assign(document.createElement("img"), { src: src, alt: caption });
  frame.append(img);
  fig.append(frame, Object.assign(document.createElement("figcaption"), { textContent: caption }));
  if (boxes) {
    const place = () => {
      for (const b of boxes) {
        const [x0, y0, x1, y1] = b.box;
        const box = Object.assign(document.createElement("div"), { className: b.changed ? "box changed" : "box" });
        box.title = `${b.role}: ${b.category}${b.changed ? " (changes within the set)" : ""}`;
        Object.assign(box.style, {
          left: `${(100 * x0) / img.naturalWidth}%`,
          top: `${(100 * y0) / img.naturalHeight}%`,
          width: `${(100 * (x1 - x0)) / img.naturalWidth}%`,
          height: `${(100 * (y1 - y0)) / img.naturalHeight}%`,
        });
        frame.append(box);
      }
    };
    if (img.complete && img.naturalWidth) place();
    else img.addEventListener("load", place, { once: true });
  }
  return fig;
}

function render() {
  const item = state.items[state.current];
  const p = state.progress;
  $("progress").textContent = p ? `${p.decided} of ${p.total} decided · ${p.accepted} accepted · ${p.rejected} rejected` : "";
  const shown = state.items.filter(matches);
  const at = item ? shown.indexOf(item) + 1 : 0;
  $("position").textContent = `item ${at || "–"} of ${shown.length} shown`;
  $("item").hidden = !item;
  $("empty").hidden = Boolean(item);
  if (!item) return;
  $("item").dataset.id = item.id;
  $("item").className = item.decision || "";
  $("item-id").textContent = item.id;
  $("verdict").textContent = item.verdict || "none";
  $("suggested").textContent = item.suggested || "nothing";
  $("decision").textContent = item.decision || "undecided";
  $("decision").className = item.decision || "";
  $("details").textContent = item.details || "none";
  const fields = state.textFields.filter((f) => f in item.texts);
  const reference = item.texts[fields[0]] || "";
  const paired = item.images.length > 1 && item.images.length === fields.length && !state.editing;
  const images = $("images");
  images.replaceChildren();
  item.images.forEach((image, k) => {
    const src = `files/${image.name.split("/").map(encodeURIComponent).join("/")}`;
    const fig = figure(src, image.field, image.boxes);
    if (paired) fig.querySelector("figcaption").replaceChildren(textLine(item, fields[k], reference));
    images.append(fig);
  });
  if (item.difference) images.append(figure(`difference/${item.index}`, "pixel difference (red: where the images differ)"));
  const texts = $("texts");
  texts.replaceChildren();
  if (!paired) fields.forEach((field) => texts.append(textLine(item, field, reference)));
}

document.addEventListener("keydown", (event) => {
  if (state.editing) {
    if (event.key === "Enter") {
      event.preventDefault();
      run(saveEdit);
    } else if (event.key === "Escape") {
      event.preventDefault();
      state.editing = false;
      render();
    }
    return;
  }
  if (event.ctrlKey || event.metaKey || event.altKey || event.target.tagName === "SELECT") return;
  const actions = {
    a: () => decide("accept"),
    r: () => decide("reject"),
    e: startEdit,
    u: undo,
    j: () => move(1),
    ArrowRight: () => move(1),
    k: () => move(-1),
    ArrowLeft: () => move(-1),
    1: () => setFilter("all"),
    2: () => setFilter("undecided"),
    3: () => setFilter("aside"),
    4: () => setFilter("rejected"),
  };
  const action = actions[event.key];
  if (action) {
    event.preventDefault();
    run(action);
  }
});

$("filter").addEventListener("change", () => {
  $("filter").blur();
  run(() => setFilter($("filter").value));
});
const buttons = { accept: () => decide("accept"), reject: () => decide("reject"), edit: startEdit, undo: undo };
Object.assign(buttons, { previous: () => move(-1), next: () => move(1) });
for (const [id, action] of Object.entries(buttons)) $(id).addEventListener("click", () => run(action));

run(async () => {
  const data = await api("api/items");
  Object.assign(state, { items: data.items, progress: data.progress, textFields: data.text_fields });
  $("title").textContent = `${data.title} · reviewer ${data.reviewer}`;
  document.title = `review: ${data.title}`;
  $("file").textContent = data.file;
  state.current = firstShown();
  render();
  document.body.dataset.ready = "1";
});
