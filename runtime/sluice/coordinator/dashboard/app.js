// The Sluice dashboard: polls the coordinator's REST API once a second and draws what it says.
// No framework, no build step. Values are only ever set as text (never as HTML), so nothing a job
// reports (names, errors, paths) can become markup or script.
"use strict";

const TOKEN_KEY = "sluice-rest-token";
const POLL_MS = 1000;
const CHECKPOINT_ROWS = 20;
const $ = (id) => document.getElementById(id);

// --- the REST token: from the URL fragment (which is never sent to a server) or typed in -------------

function takeTokenFromFragment() {
  const match = /(?:^#|&)token=([^&]*)/.exec(window.location.hash);
  if (match) {
    let value = match[1];
    try { value = decodeURIComponent(value); } catch (_) { /* not percent-encoded: take it as it is */ }
    sessionStorage.setItem(TOKEN_KEY, value);
    // Out of the address bar (and so out of history, bookmarks and screenshots).
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }
}

function token() { return sessionStorage.getItem(TOKEN_KEY); }

// Why the token form is showing: "read" (the page itself needs the token, so a poll that succeeds
// answers it) or "action" (an action waits for it: the form stays until the user gives a token, however
// many polls succeed meanwhile, and the action runs once the token is in).
let tokenWantedFor = null;
let pendingAction = null;

function askForToken(why, forWhat, action) {
  tokenWantedFor = forWhat;
  pendingAction = action || null;
  $("auth").hidden = false;
  say(why, "error");
  $("token-input").focus();
}

function tokenGiven() {
  $("auth").hidden = true;
  tokenWantedFor = null;
  const action = pendingAction;
  pendingAction = null;
  return action;
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const saved = token();
  if (saved) headers.Authorization = "Bearer " + saved;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
  });
  let data = null;
  try { data = await response.json(); } catch (_) { /* not JSON */ }
  if (response.status === 401 || response.status === 403) {
    const error = new Error((data && data.error) || "the REST token is missing or wrong");
    error.auth = true;
    throw error;
  }
  if (!response.ok) throw new Error((data && data.error) || `${method} ${path}: ${response.status}`);
  return data;
}

// --- formatting --------------------------------------------------------------------------------------

function say(text, kind) {
  const el = $("message");
  el.textContent = text || "";
  el.dataset.kind = kind || "";
}

function rate(value) {
  if (value === null || value === undefined) return "–";
  if (value >= 1e6) return (value / 1e6).toFixed(2) + "M/s";
  if (value >= 1e4) return (value / 1e3).toFixed(1) + "k/s";
  return Math.round(value).toLocaleString("en") + "/s";
}

function millis(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 10) return ms.toFixed(1) + " ms";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 120000) return (ms / 1000).toFixed(1) + " s";
  const s = Math.round(ms / 1000);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return h ? `${h}h ${m}m` : `${m}m ${s % 60}s`;
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}

function clock(ms) { return ms ? new Date(ms).toLocaleTimeString() : "–"; }

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "text") node.textContent = value;
    else if (key.startsWith("data-")) node.dataset[key.slice(5).replace(/-(.)/g, (_, c) => c.toUpperCase())] = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

// Flink's web UI levels: OK below 10% of the time backpressured, HIGH above 50%.
function pressureLevel(ms) {
  if (ms === null || ms === undefined) return "";
  return ms > 500 ? "high" : ms > 100 ? "low" : "ok";
}

// --- the job -----------------------------------------------------------------------------------------

function drawSummary(job) {
  $("job-name").textContent = job.name;
  const state = $("job-state");
  state.textContent = job.state;
  state.dataset.state = job.state;
  document.title = `${job.name} · ${job.state} · Sluice`;
  $("job-id").textContent = job.jobId;
  $("uptime").textContent = millis(job.uptimeMs);
  $("rate-read").textContent = rate(job.rates.recordsReadPerSecond);
  $("rate-written").textContent = rate(job.rates.recordsWrittenPerSecond);
  $("subtasks").textContent = `${job.subtasks.finished} of ${job.subtasks.total}`;
  $("checkpoint-counts").textContent = `${job.checkpoints.completed} completed, ${job.checkpoints.failed} failed`;
  $("attempt").textContent = `${job.attempt} (${job.restarts} restarts)`;
  const error = $("job-error");
  error.hidden = !job.error;
  error.textContent = job.error || "";
  $("last-savepoint").textContent = job.lastSavepoint || "none";
  const restored = job.restoredFrom;
  $("restored-from").textContent = restored
    ? `${restored.kind} ${restored.checkpointId}: ${restored.path}` +
      (restored.droppedOperators.length ? ` (state dropped for ${restored.droppedOperators.join(", ")})` : "")
    : "nothing (started without state)";
  const running = job.state === "RUNNING";
  for (const id of ["btn-savepoint", "btn-stop", "btn-drain"]) $(id).disabled = !running || busy;
  $("btn-cancel").disabled = busy || ["FINISHED", "FAILED", "CANCELED", "SUSPENDED"].includes(job.state);
}

function drawExceptions(job) {
  const rows = (job.exceptions || []).map((e) => el("tr", {},
    el("td", { text: clock(e.time) }), el("td", { text: String(e.attempt) }),
    el("td", { class: "error", text: e.error })));
  $("exceptions").tBodies[0].replaceChildren(...rows);
  $("exceptions").hidden = !rows.length;
  $("no-exceptions").hidden = rows.length > 0;
}

function drawTaskManagers(job) {
  const subtasks = new Map();
  for (const v of job.vertices) {
    for (const s of v.subtasks) {
      if (s.taskManager === null || s.taskManager === undefined) continue;
      if (!subtasks.has(s.taskManager)) subtasks.set(s.taskManager, []);
      subtasks.get(s.taskManager).push(`${v.name}[${s.index}]`);
    }
  }
  const rows = (job.taskManagers || []).map((tm) => el("tr", { "data-index": String(tm.index) },
    el("td", { text: String(tm.index) }), el("td", { text: tm.host }), el("td", { text: String(tm.dataPort) }),
    el("td", { text: String(tm.pid) }), el("td", { text: (subtasks.get(tm.index) || []).join(", ") || "–" })));
  $("taskmanagers").tBodies[0].replaceChildren(...rows);
}

// Event time that looks like wall-clock time (2001 to a year ahead): only then is "now minus the
// watermark" a lag worth showing. Pipelines whose event time is a counter get the watermark alone.
function looksLikeWallClock(ms) {
  return ms > 1e12 && ms < Date.now() + 365 * 24 * 3600 * 1000;
}

function watermark(ms) {
  if (looksLikeWallClock(ms)) return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
  return Math.round(ms).toLocaleString("en");
}

function depths(vertices) {
  const byId = new Map(vertices.map((v) => [v.id, v]));
  const memo = new Map();
  const depth = (v) => {
    if (!memo.has(v.id)) {
      memo.set(v.id, 0);
      memo.set(v.id, v.inputs.length ? 1 + Math.max(...v.inputs.map((i) => depth(byId.get(i.vertex)))) : 0);
    }
    return memo.get(v.id);
  };
  vertices.forEach(depth);
  return memo;
}

function vertexCard(v) {
  const m = v.metrics;
  const subtasks = el("div", { class: "subtasks", "aria-label": "subtasks" });
  for (const s of v.subtasks) {
    subtasks.append(el("span", {
      class: "subtask", "data-state": s.state, "data-index": String(s.index),
      title: `subtask ${s.index}: ${s.state}` + (s.taskManager === null ? "" : ` on TaskManager ${s.taskManager}`),
      text: String(s.index),
    }));
  }
  const level = pressureLevel(m.backPressuredTimeMsPerSecond);
  const figures = el("dl", { class: "figures" },
    el("dt", { text: "in" }), el("dd", { class: "rate-in", text: rate(m.recordsInPerSecond) }),
    el("dt", { text: "out" }), el("dd", { class: "rate-out", text: rate(m.recordsOutPerSecond) }),
    el("dt", { text: "busy" }), el("dd", { text: millis(m.busyTimeMsPerSecond) + "/s" }),
    el("dt", { text: "backpressured" }),
    el("dd", { class: "pressure-level", "data-level": level, text: millis(m.backPressuredTimeMsPerSecond) + "/s" }),
  );
  if (m.inputWatermark !== null && m.inputWatermark !== undefined) {
    figures.append(el("dt", { text: "watermark" }), el("dd", { class: "watermark", text: watermark(m.inputWatermark) }));
    if (looksLikeWallClock(m.inputWatermark) && m.watermarkLagMs !== null && m.watermarkLagMs !== undefined) {
      figures.append(el("dt", { text: "watermark lag" }), el("dd", { class: "watermark-lag", text: millis(m.watermarkLagMs) }));
    }
  }
  if (m.inputQueueUsage !== null && m.inputQueueUsage !== undefined) {
    figures.append(el("dt", { text: "input queues" }), el("dd", { text: Math.round(m.inputQueueUsage * 100) + "%" }));
  }
  // Late and failed records, shown only where they happened (docs/windows-and-time.md, error-handling.md).
  for (const [label, key] of [["late dropped", "lateRecordsDropped"], ["late re-fired", "lateRecordsRefired"],
    ["late to side output", "lateRecordsSideOutput"], ["skipped", "recordsSkipped"], ["dead letters", "deadLetters"]]) {
    if (m[key]) figures.append(el("dt", { text: label }), el("dd", { class: "count", "data-count": key, text: String(m[key]) }));
  }
  const bar = el("div", { class: "bar", title: "busy / backpressured / idle (worst subtask)" });
  for (const [cls, value] of [["busy", m.busyTimeMsPerSecond], ["pressure", m.backPressuredTimeMsPerSecond], ["idle", m.idleTimeMsPerSecond]]) {
    const part = el("span", { class: cls });
    part.style.width = ((value || 0) / 10) + "%";
    bar.append(part);
  }
  const finished = v.finishedSubtasks === v.parallelism ? "all" : v.finishedSubtasks ? "some" : "none";
  return el("div", { class: "vertex", id: `vertex-${v.id}`, "data-vertex": String(v.id), "data-finished": finished },
    el("div", { class: "vertex-name", text: v.name }),
    el("div", { class: "vertex-meta", text: `parallelism ${v.parallelism} · ${v.finishedSubtasks} finished` }),
    subtasks, figures, bar);
}

function drawGraph(job) {
  const columns = $("columns");
  const depth = depths(job.vertices);
  const count = Math.max(0, ...depth.values()) + 1;
  const cols = Array.from({ length: count }, () => el("div", { class: "column" }));
  for (const v of job.vertices) cols[depth.get(v.id)].append(vertexCard(v));
  columns.replaceChildren(...cols);
  drawEdges(job);
}

function drawEdges(job) {
  const svg = $("edges");
  const box = $("graph").getBoundingClientRect();
  svg.setAttribute("width", String($("graph").scrollWidth));
  svg.setAttribute("height", String($("graph").scrollHeight));
  const ns = "http://www.w3.org/2000/svg";
  const parts = [];
  for (const v of job.vertices) {
    const to = $(`vertex-${v.id}`).getBoundingClientRect();
    for (const input of v.inputs) {
      const from = $(`vertex-${input.vertex}`).getBoundingClientRect();
      const x1 = from.right - box.left, y1 = from.top + from.height / 2 - box.top;
      const x2 = to.left - box.left, y2 = to.top + to.height / 2 - box.top;
      const mid = (x1 + x2) / 2;
      const path = document.createElementNS(ns, "path");
      path.setAttribute("d", `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`);
      const label = document.createElementNS(ns, "text");
      label.setAttribute("x", String(x1 + 6));
      label.setAttribute("y", String(y1 - 5));
      // An input that ended while the operator runs on (a bounded dimension or rules input).
      label.textContent = input.finished ? `${input.partitioning} · finished` : input.partitioning;
      if (input.finished) path.classList.add("finished");
      parts.push(path, label);
    }
  }
  svg.replaceChildren(...parts);
}

function drawCheckpoints(data) {
  const rows = [];
  for (const p of data.inProgress || []) {
    rows.push(el("tr", { "data-status": "IN_PROGRESS" },
      el("td", { text: String(p.id) }), el("td", { text: p.kind }), el("td", { text: `in progress (waiting for ${p.waitingFor})` }),
      el("td", { text: clock(p.triggerTime) }), el("td", { text: millis(Date.now() - p.triggerTime) }),
      el("td", { text: "–" }), el("td", { text: "–" }), el("td", { text: "–" }), el("td", { text: "–" }),
      el("td", { text: "–" })));
  }
  for (const c of (data.history || []).slice(0, CHECKPOINT_ROWS)) {
    const duration = c.durationMs !== undefined && c.durationMs !== null ? c.durationMs
      : (c.completionTime ? c.completionTime - c.triggerTime : null);
    const fully = c.fullyFinishedOperators || [];
    rows.push(el("tr", { "data-status": c.status, "data-id": String(c.id) },
      el("td", { text: String(c.id) }), el("td", { text: c.kind }),
      el("td", { text: c.status, title: c.error || "" }),
      el("td", { text: clock(c.triggerTime) }), el("td", { text: millis(duration) }),
      el("td", { text: millis(c.syncMs) }), el("td", { text: bytes(c.bytesWritten) }),
      el("td", { text: bytes(c.stateSize) }),
      el("td", { class: "finished-subtasks", text: c.finishedSubtasks === undefined ? "–" : String(c.finishedSubtasks) }),
      el("td", { class: "fully-finished", text: fully.length ? fully.join(", ") : (c.status === "COMPLETED" ? "none" : "–") })));
  }
  $("checkpoints").tBodies[0].replaceChildren(...rows);
  const savepoints = (data.history || []).filter((c) => c.kind === "savepoint").map((c) =>
    el("tr", { "data-status": c.status },
      el("td", { text: String(c.id) }), el("td", { text: c.status, title: c.error || "" }),
      el("td", { text: clock(c.completionTime) }), el("td", {}, el("code", { text: c.path || "" }))));
  $("savepoints").tBodies[0].replaceChildren(...savepoints);
}

let polling = false;
let unreachable = 0;
let stoppedWith = null;

async function refresh() {
  if (polling) return;
  polling = true;
  try {
    const [job, checkpoints] = await Promise.all([api("GET", "/v1/job"), api("GET", "/v1/checkpoints")]);
    if (tokenWantedFor === "read") tokenGiven();
    unreachable = 0;
    drawSummary(job);
    drawGraph(job);
    drawCheckpoints(checkpoints);
    drawExceptions(job);
    drawTaskManagers(job);
  } catch (error) {
    if (error.auth && tokenWantedFor !== "action") askForToken("Reading this job needs its REST token: " + error.message, "read");
    else if (stoppedWith && ++unreachable > 2) say(`Stopped with savepoint ${stoppedWith}; the coordinator has exited.`, "ok");
    else if (++unreachable > 2) say("The coordinator does not answer (the job may have ended): " + error.message, "error");
  } finally {
    polling = false;
  }
}

// --- actions -----------------------------------------------------------------------------------------

let busy = false;

async function savepoint(stop, confirmed) {
  const what = stop === false ? "Take a savepoint" : stop === "terminate"
    ? "Stop the job with drain (fire all windows) and a savepoint" : "Stop the job with a savepoint (resumable)";
  if (stop !== false && !confirmed && !window.confirm(what + "?")) return;
  if (!token()) {
    askForToken("Savepoints and stops need this job's REST token: paste it below.", "action", () => savepoint(stop, true));
    return;
  }
  busy = true;
  say(what + "…", "");
  try {
    const { triggerId } = await api("POST", "/v1/savepoints", { stop });
    let entry;
    do {
      await new Promise((resolve) => setTimeout(resolve, 200));
      entry = await api("GET", `/v1/savepoints/${encodeURIComponent(triggerId)}`);
    } while (entry.status === "IN_PROGRESS");
    if (entry.status === "COMPLETED") {
      say((stop === false ? "Savepoint completed: " : "Stopped with savepoint ") + entry.path, "ok");
      $("last-savepoint").textContent = entry.path;
      if (stop !== false) stoppedWith = entry.path;
    } else {
      say("The savepoint failed: " + entry.error, "error");
    }
  } catch (error) {
    if (error.auth) {
      sessionStorage.removeItem(TOKEN_KEY);
      askForToken("The REST token was refused: " + error.message, "action", () => savepoint(stop, true));
    } else say(error.message, "error");
  } finally {
    busy = false;
    refresh();
  }
}

async function cancel(confirmed) {
  if (!confirmed && !window.confirm("Cancel the job? It ends now, without a savepoint.")) return;
  if (!token()) {
    askForToken("Canceling needs this job's REST token: paste it below.", "action", () => cancel(true));
    return;
  }
  busy = true;
  say("Canceling the job…", "");
  try {
    await api("POST", "/v1/job/cancel");
    say("The job is being canceled.", "ok");
  } catch (error) {
    if (error.auth) {
      sessionStorage.removeItem(TOKEN_KEY);
      askForToken("The REST token was refused: " + error.message, "action", () => cancel(true));
    } else say(error.message, "error");
  } finally {
    busy = false;
    refresh();
  }
}

function start() {
  takeTokenFromFragment();
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token-input").value.trim();
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    $("token-input").value = "";
    say("", "");
    const action = tokenGiven();
    if (action) action(); else refresh();
  });
  $("btn-savepoint").addEventListener("click", () => savepoint(false));
  $("btn-stop").addEventListener("click", () => savepoint("suspend"));
  $("btn-drain").addEventListener("click", () => savepoint("terminate"));
  $("btn-cancel").addEventListener("click", () => cancel());
  window.addEventListener("hashchange", () => { takeTokenFromFragment(); refresh(); });
  refresh();
  setInterval(refresh, POLL_MS);
}

document.addEventListener("DOMContentLoaded", start);
