// The dashboard page: it renders the state that `curator ui` pushes as
// server-sent events (/api/stream), and polls /api/state where those fail.
"use strict";

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return e;
}

const badge = (text, cls) => el("span", { class: "badge " + (cls || text) }, text || "–");

// fmtTime is a time with its date, in the browser's zone: 2026-12-02 22:20:15.
function fmtTime(t) {
  const d = new Date(t);
  if (isNaN(d)) return "";
  const p = (n) => String(n).padStart(2, "0");
  return d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + " " +
    p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds());
}
const short = (s, n) => (s && s.length > n ? s.slice(0, n) : s || "");

function nameOf(state, id) {
  if (!id) return "(none)";
  const n = (state.cluster && state.cluster.names && state.cluster.names[id]) ||
    (state.nodes.find((x) => x.id === id) || {}).name;
  return n && n !== id ? n + " (" + short(id, 12) + ")" : id;
}

function renderHealth(state) {
  const c = state.cluster;
  $("#cluster-id").textContent = c ? "cluster " + c.cluster_id : "";
  if (!c) return;
  const leader = $("#leader");
  leader.textContent = nameOf(state, c.leader);
  leader.dataset.nodeId = c.leader || "";
  $("#etcd-leader").textContent = nameOf(state, c.etcd_leader);
  $("#voters").textContent = c.voters.length + ": " + c.voters.map((v) => nameOf(state, v)).join(", ");
  $("#learners").textContent = c.learners.length ? c.learners.map((v) => nameOf(state, v)).join(", ") : "none";
  const majority = Math.floor(c.voters.length / 2) + 1;
  $("#quorum").replaceChildren(badge(c.quorum_healthy ? "healthy" : "AT RISK", c.quorum_healthy ? "yes" : "no"),
    " majority " + majority + " of " + c.voters.length);
  $("#version").textContent = c.version || "–";
  $("#warnings").replaceChildren(...c.warnings.map((w) => el("li", {}, w)));
}

function renderNodes(state) {
  // Nodes that left the cluster a moment ago stay, greyed, at the end.
  const nodes = state.nodes.filter((n) => !n.removed).concat(state.nodes.filter((n) => n.removed));
  const rows = nodes.map((n) => {
    const roles = n.roles.join(", ") || "–";
    const ms = n.manager_status ? badge(n.manager_status, n.manager_status === "leader" ? "leader" : "") : "";
    const attrs = { class: n.status + (n.removed ? " removed" : ""), "data-node-id": n.id, "data-name": n.name, "data-status": n.status };
    if (n.removed) attrs["data-removed"] = n.removed;
    return el("tr", attrs,
      el("td", {}, n.name, n.removed ? el("span", { class: "muted" }, " removed " + fmtTime(n.removed)) : ""),
      el("td", { class: "mono", title: n.id }, short(n.id, 12)),
      el("td", { class: "mono" }, n.address),
      // A node that left is no longer ready (or down): it is gone.
      el("td", { class: "status" }, n.removed ? badge("removed", "removed") : badge(n.status || "unknown", n.status || "unknown")),
      el("td", {}, roles),
      el("td", {}, ms),
      el("td", {}, n.availability),
      el("td", {}, n.group || "–"),
      el("td", { class: "mono", title: n.config_sha }, short(n.config_sha, 12) || "–"),
      el("td", {}, n.version || ""));
  });
  $("#nodes tbody").replaceChildren(...rows);
  const current = state.nodes.filter((n) => !n.removed);
  const ready = current.filter((n) => n.status === "ready").length;
  $("#node-counts").textContent = ready + " of " + current.length + " ready";
}

function renderGroups(state) {
  const rows = state.groups.map((g) => {
    // A rollout's progress as the leader counts it, the count `rollout
    // status` shows too.
    const current = g.rollout_updated;
    let rollout = g.destroying ? badge("destroying", "down") : "–";
    if (!g.destroying && g.rollout_state) {
      const total = g.rollout_total || g.size;
      const pct = total ? Math.min(100, Math.round((100 * current) / total)) : 100;
      const bar = el("span", { class: "bar" }, el("span", {}));
      bar.firstChild.style.width = pct + "%";
      rollout = el("span", { "data-rollout": g.rollout_state }, bar, g.rollout_state + " " + current + "/" + total);
    }
    return el("tr", { "data-group": g.name },
      el("td", {}, g.name),
      el("td", {}, g.roles.join(", ")),
      el("td", {}, g.ready + "/" + g.size),
      el("td", {}, g.machines),
      el("td", { class: "mono", title: g.config_sha }, short(g.config_sha, 12)),
      el("td", {}, rollout));
  });
  if (!rows.length) rows.push(el("tr", {}, el("td", { colSpan: 6, class: "muted" }, "No groups.")));
  $("#groups tbody").replaceChildren(...rows);
}

function renderEvents(state) {
  const rows = state.events.slice().reverse().map((e) =>
    el("tr", {},
      el("td", { class: "mono time" }, e.time ? fmtTime(e.time) : ""),
      el("td", { title: e.actor || "" }, e.actor ? e.loop + " · " + e.actor : e.loop),
      el("td", {}, e.action),
      el("td", { class: "mono", title: e.node_id }, e.node_id ? nameOf(state, e.node_id) : ""),
      el("td", { class: "reason" }, e.reason)));
  if (!rows.length) rows.push(el("tr", {}, el("td", { colSpan: 5, class: "muted" }, "No events yet.")));
  $("#events tbody").replaceChildren(...rows);
}

function renderOperator(state) {
  const o = state.operator;
  $("#operator").textContent = o ? o.name + " (" + o.role + "): " + o.may : "";
}

function render(state) {
  renderOperator(state);
  renderHealth(state);
  renderNodes(state);
  renderGroups(state);
  renderEvents(state);
  // With no manager answering, one message says since when, the tables
  // keep the last state, greyed, and the badge is not live.
  const down = state.down_since;
  document.body.classList.toggle("stale", !!down);
  const msgs = down
    ? [el("div", { class: "outage", title: state.down || "" }, "No manager answers since " + fmtTime(down) + ": showing the last state the dashboard had.")]
    : Object.values(state.errors || {}).map((m) => el("div", {}, m));
  $("#errors").replaceChildren(...msgs);
  document.body.dataset.updated = state.updated;
  clusterDown = !!down;
  showLive();
}

let connected = false, clusterDown = false;
function live(ok) {
  connected = ok;
  showLive();
}

function showLive() {
  const b = $("#live");
  const ok = connected && !clusterDown;
  b.textContent = ok ? "live" : connected ? "no manager" : "reconnecting…";
  b.className = "badge " + (ok ? "live" : "lost");
}

let polling = null;
function poll() {
  fetch("api/state").then((r) => r.json()).then((s) => { render(s); }).catch(() => live(false));
}

function connect() {
  if (!window.EventSource) {
    polling = setInterval(poll, 1000);
    poll();
    return;
  }
  const es = new EventSource("api/stream");
  es.addEventListener("state", (m) => { live(true); render(JSON.parse(m.data)); });
  es.onerror = () => live(false); // EventSource reconnects by itself.
}

connect();
