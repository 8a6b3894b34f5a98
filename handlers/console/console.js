// The Flashline console's script: the create form (home), the sale's live
// page (polls /admin/sales/{id}/live about once a second and calls the admin
// API's own routes for every action) and nothing else. Every request is
// same-origin (mode "same-origin": the browser refuses any other, and says
// Sec-Fetch-Site: same-origin) with the session cookie and the
// X-Flashline-Console header, which the API asks of a signed-in browser's
// changes.
"use strict";

const HEADERS = { "Content-Type": "application/json", "X-Flashline-Console": "1" };

async function call(method, path, body) {
  const res = await fetch(path, {
    method, mode: "same-origin", credentials: "same-origin", headers: HEADERS,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await res.json(); } catch (e) { /* not JSON */ }
  return { ok: res.ok, status: res.status, data };
}

function errorText(r) {
  const e = r.data && r.data.error;
  return e ? `${e.code}: ${e.message}` : `HTTP ${r.status}`;
}

function $(id) { return document.getElementById(id); }
function text(id, v) { const el = $(id); if (el) el.textContent = v; }

// ---- home: the create form ----

const DATES = ["opensAt", "registrationOpensAt", "registrationClosesAt", "drawAt"];
const INTS = ["initialStock", "perCustomerLimit", "reservationTtlSeconds", "buckets", "challengeBits",
  "perInstrumentLimit", "minAccountAgeSeconds", "purchaseWindowSeconds", "price.amount"];

function createBody(form) {
  const body = {};
  for (const el of form.elements) {
    if (!el.name || el.value === "" && el.type !== "checkbox") continue;
    if (el.type === "checkbox") { if (el.checked) body[el.name] = true; continue; }
    let v = el.value;
    if (INTS.includes(el.name)) v = Number(v);
    else if (DATES.includes(el.name)) v = new Date(v).toISOString();
    // "price.amount": a field of an object of the body.
    const [key, sub] = el.name.split(".");
    if (sub) (body[key] = body[key] || {})[sub] = v;
    else body[key] = v;
  }
  if (body.confirmation === undefined && $("create-submit").dataset.payments !== "true") {
    body.confirmation = "customer"; // the only kind this service can confirm
  }
  return body;
}

function initHome() {
  const form = $("create");
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    for (const el of form.querySelectorAll(".invalid")) el.classList.remove("invalid");
    for (const el of form.querySelectorAll(".field-error")) el.remove();
    const err = $("create-error");
    err.hidden = true;
    const r = await call("POST", "/admin/sales", createBody(form));
    if (r.ok) { location.href = "/admin/sales/" + r.data.saleId; return; }
    err.textContent = errorText(r);
    err.hidden = false;
    // The API names the field it refuses: show its answer by that field too.
    const msg = (r.data && r.data.error && r.data.error.message) || "";
    for (const el of form.elements) {
      if (el.name && new RegExp("\\b" + el.name.replace(".", "\\.") + "\\b").test(msg)) {
        el.classList.add("invalid");
        const p = document.createElement("span");
        p.className = "field-error error";
        p.textContent = msg;
        el.closest("label").appendChild(p);
        break;
      }
    }
  });
}

// ---- the sale's live page ----

const SERIES = ["available", "pending", "confirmed", "expired", "cancelled", "voided"];
const COLOURS = ["#2a7", "#e90", "#27c", "#999", "#c5c", "#c33"];
let chart = null, opensAt = null, lastOK = 0;

// clockTime is the chart's time axis: the browser's clock time of a point
// (seconds since the epoch), HH:MM:SS, not uPlot's default of the seconds'
// fraction (":01.500").
function clockTime(sec) {
  const d = new Date(sec * 1000), two = (n) => String(n).padStart(2, "0");
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

// Ticks on whole seconds only (a point is a second), at least 90 px apart.
const CLOCK_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600];

function drawChart(history) {
  const data = [history.map((p) => p.at / 1000)];
  for (const s of SERIES) data.push(history.map((p) => p[s]));
  const box = $("chart");
  if (!chart) {
    if (typeof uPlot === "undefined") return;
    chart = new uPlot({
      width: Math.max(320, box.clientWidth), height: 220,
      series: [{}].concat(SERIES.map((s, i) => ({ label: s, stroke: COLOURS[i], width: 2 }))),
      axes: [{ space: 90, incrs: CLOCK_STEPS, values: (u, splits) => splits.map(clockTime) }, { size: 50 }],
    }, data, box);
    addEventListener("resize", () => chart.setSize({ width: Math.max(320, box.clientWidth), height: 220 }));
  } else {
    chart.setData(data);
  }
}

function countdown() {
  if (!opensAt) { text("countdown", ""); return; }
  const s = Math.round((opensAt - Date.now()) / 1000);
  text("countdown", s > 0 ? `in ${Math.floor(s / 60)}m ${s % 60}s` : "");
}

function list(id, items, line) {
  const ul = $(id);
  ul.replaceChildren(...items.map((it) => { const li = document.createElement("li"); li.textContent = line(it); return li; }));
}

function render(v) {
  const s = v.sale;
  text("title", s.title);
  const st = $("state");
  st.textContent = s.state;
  st.className = "state state-" + s.state;
  opensAt = s.opensAt ? Date.parse(s.opensAt) : null;
  // A sale past its opening says so: "opens at" is for one still to open.
  text("opens-label", s.state === "scheduled" ? "opens at" : "opened at");
  text("opens-at", s.opensAt || "not set");
  for (const k of SERIES) text("n-" + k, s[k]);
  text("r-reserved", v.rates.reserved.toFixed(1));
  text("r-batch", v.rates.batchSize ? v.rates.batchSize.toFixed(1) : "–");
  text("r-p99", v.rates.reserveP99Ms == null ? "–" : "≤ " + v.rates.reserveP99Ms + " ms");
  list("r-refused", Object.entries(v.rates.refused), ([k, n]) => `${k} ${n.toFixed(1)}/s`);
  text("r-instances", Math.max(1, v.instances.length));
  list("r-per-instance", v.instances, (i) => `${i.instance}${i.this ? " (this page's)" : ""}: ${i.reserved.toFixed(1)}/s reserved` +
    Object.entries(i.refused).map(([k, n]) => `, ${k} ${n.toFixed(1)}/s`).join("") +
    (i.reserveP99Ms == null ? "" : `, p99 ≤ ${i.reserveP99Ms} ms`));
  if (v.room) {
    $("crowd-box").hidden = false;
    text("c-preopen", v.room.preopen + (v.room.preopenFrozen ? "" : " so far"));
    text("c-waiting", v.room.waiting);
    text("c-positions", v.room.positions);
    text("c-admitted", v.room.admittedThrough);
    text("c-pace", v.room.admittedPerSecond.toFixed(1));
    $("c-held").hidden = !v.room.held;
    text("c-message", v.room.message ? "message: " + v.room.message : "");
  }
  if (v.queue) {
    const q = v.queue, secs = (x) => (x == null ? "–" : x.toFixed(1) + " s");
    text("q-wait", [q.waitP50Seconds, q.waitP90Seconds, q.waitP99Seconds].map(secs).join(" / "));
    text("q-reserve", secs(q.toReserveP50Seconds));
    text("q-arrivals", q.arrivals);
    text("q-minute", q.arrivalsLastMinute);
    text("q-admitted", q.admitted);
    text("q-unreserved", q.admittedNotReserved);
    text("q-queued", q.queued);
    text("q-active", q.active);
    text("q-left", q.left);
  }
  if (s.gate.kind === "redis") {
    $("gate-box").hidden = false;
    text("g-counter", s.gate.counter ?? "–");
    text("g-drift", s.gate.drift ?? "–");
    text("g-ok", s.gate.ok ? "ok" : "NOT OK");
    // A sale with variants: each variant's own counter and drift, in the
    // rows the page has for its variants.
    for (const gv of s.gate.variants || []) {
      const row = document.querySelector(`#g-variants tr[data-sku="${CSS.escape(gv.sku)}"]`);
      if (!row) continue;
      row.querySelector(".g-v-counter").textContent = gv.counter;
      row.querySelector(".g-v-drift").textContent = gv.drift;
      row.className = gv.drift === 0 ? "" : "warn";
    }
  }
  text("invariant", s.invariant.ok ? "ok" : "BROKEN: " + (s.invariant.detail || ""));
  $("invariant").className = s.invariant.ok ? "" : "error";
  list("incidents", v.incidents, (i) => `#${i.incidentId} ${i.at} ${i.kind}: ${i.detail} (flashline incident show ${i.incidentId})`);
  if (s.lottery) {
    $("lottery-box").hidden = false;
    const r = s.lottery.registrations;
    text("lottery", `registrations ${r.total} · won ${r.won} · lost ${r.lost} · waitlisted ${r.waitlisted} · expired ${r.expired} · draw ${s.lottery.drawnAt || "at " + s.lottery.drawAt}`);
  }
  list("actions", v.actions, (a) => `${a.at} ${a.operator}: ${a.action}${a.detail ? " (" + a.detail + ")" : ""}${a.affected ? ", " + a.affected + " affected" : ""}`);
  drawChart(v.history);
}

async function poll(saleId) {
  try {
    const r = await call("GET", `/admin/sales/${saleId}/live`);
    if (r.ok) { render(r.data); lastOK = Date.now(); }
    else if (r.status === 401) { location.href = "/admin/login"; return; }
  } catch (e) { /* shown as stale below */ }
  $("stale").hidden = Date.now() - lastOK < 5000;
  setTimeout(() => poll(saleId), 1000);
}

// What each action asks and calls: the admin API's own route and body.
function actions(saleId) {
  const sale = `/admin/sales/${saleId}`;
  const ids = () => $("in-ids").value.split(/\s+/).filter(Boolean);
  return {
    open: { ask: "Open the sale now?", path: sale + "/open" },
    pause: { ask: "Pause the sale? Buyers are refused until it resumes.", path: sale + "/pause" },
    resume: { ask: "Resume the sale?", path: sale + "/resume" },
    close: { ask: "Close the sale? It cannot be reopened.", path: sale + "/close" },
    hold: { ask: "Hold the queue? Nobody more is admitted.", path: sale + "/queue/hold", fields: ["reason"], body: (op) => ({ operator: op, reason: $("in-reason").value }) },
    release: { ask: "Release the queue?", path: sale + "/queue/release" },
    broadcast: { ask: "Show this message to everyone waiting (empty clears it):", path: sale + "/queue/message", fields: ["message"], body: (op) => ({ operator: op, message: $("in-message").value }) },
    extend: { ask: "Extend every pending hold by:", path: sale + "/extend", fields: ["seconds"], body: (op) => ({ operator: op, seconds: Number($("in-seconds").value) }) },
    void: { ask: "Void these confirmed orders (their units come back):", path: "/admin/reservations/void", fields: ["ids", "reason"], body: (op) => ({ operator: op, reason: $("in-reason").value, reservationIds: ids() }) },
    rebuild: { ask: "Rebuild the gate's counter from the database? (the sale must be paused)", path: sale + "/gate/rebuild", body: () => undefined },
    repair: { ask: "Show the repair plan? (nothing is written)", path: sale + "/repair", body: (op) => ({ operator: op, apply: false }) },
    "repair-apply": { ask: "Write the repair? (the sale must be paused; it stays paused)", path: sale + "/repair", body: (op) => ({ operator: op, apply: true }) },
    "verify-draw": { ask: "Check the revealed draw seed against the commitment published before the open?", run: () => verifyDraw(saleId) },
  };
}

async function verifyDraw(saleId) {
  const r = await call("GET", `/sales/${saleId}/policy`);
  if (!r.ok) return errorText(r);
  const p = r.data;
  if (!p.drawSeed) return `commitment ${p.drawCommitment}\nseed not revealed yet: ask again after the open.`;
  const bytes = new Uint8Array(p.drawSeed.match(/../g).map((h) => parseInt(h, 16)));
  const sum = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)), (b) => b.toString(16).padStart(2, "0")).join("");
  const ok = sum === p.drawCommitment;
  return `commitment ${p.drawCommitment}\nseed       ${p.drawSeed}\nSHA-256    ${sum}\n${ok ? "ok: the seed is the one committed to" : "MISMATCH"}\n` +
    `Every admission against the draw: flashline sale verify-draw ${saleId}`;
}

function initSale() {
  const saleId = document.body.dataset.sale;
  const op = $("operator");
  op.value = localStorage.getItem("flashline.operator") || "";
  op.addEventListener("change", () => localStorage.setItem("flashline.operator", op.value.trim()));
  const table = actions(saleId);
  let pending = null;
  const box = $("confirm");
  for (const b of document.querySelectorAll("button[data-action]")) {
    b.addEventListener("click", () => {
      const a = table[b.dataset.action];
      const operator = op.value.trim();
      if (!operator && !a.run) { text("result", "Name the operator first: it is recorded with the action."); op.focus(); return; }
      pending = a;
      text("confirm-text", a.ask + (a.run ? "" : ` (as ${operator})`));
      for (const f of ["message", "seconds", "ids", "reason"]) $("f-" + f).hidden = !(a.fields || []).includes(f);
      box.hidden = false;
      $("confirm-yes").focus();
    });
  }
  $("confirm-no").addEventListener("click", () => { box.hidden = true; pending = null; });
  $("confirm-yes").addEventListener("click", async () => {
    const a = pending;
    box.hidden = true;
    pending = null;
    if (!a) return;
    if (a.run) { text("result", await a.run()); return; }
    const operator = op.value.trim();
    const body = a.body ? a.body(operator) : { operator };
    const r = await call("POST", a.path, body);
    text("result", r.ok ? "done: " + JSON.stringify(r.data) : "refused: " + errorText(r));
    $("result").className = r.ok ? "" : "error";
  });
  setInterval(countdown, 500);
  poll(saleId);
}

document.addEventListener("DOMContentLoaded", () => {
  if ($("create")) initHome();
  if (document.body.dataset.sale) initSale();
});
