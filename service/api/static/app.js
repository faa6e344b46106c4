// procsift dashboard: polls the daemon's API and redraws. No external scripts.
"use strict";
const ORDER = ["interactive", "html-serving", "background", "unlabelled"];
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
const num = (v, d = 1) => (v === null || v === undefined ? "–" : Number(v).toFixed(d));

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(`${path}: ${r.status} ${(await r.json().catch(() => ({}))).detail || ""}`);
  return r.json();
}

function parseMetrics(text) {
  const out = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const [k, v] = line.split(" ");
    out[k] = Number(v);
  }
  return out;
}

function drawFigures(m, procs) {
  const figs = [
    ["windows", m.procsift_windows_collected_total], ["processes", m.procsift_processes],
    ["predictions", m.procsift_predictions_total], ["changes applied", m.procsift_changes_applied_total],
    ["restores", m.procsift_restores_total], ["back-offs", m.procsift_backoffs_total],
    ["collector drops", m.procsift_collector_drops_total],
    ["last loop (ms)", num(1000 * (m.procsift_loop_seconds_last || 0))],
  ];
  $("figures").innerHTML = figs.map(([k, v]) => `<div class="fig"><span class="muted">${esc(k)}</span><b>${esc(v)}</b></div>`).join("")
    + (procs.paused ? '<div class="fig"><b>PAUSED</b></div>' : "");
}

function drawGroups(g) {
  $("groups").innerHTML = ORDER.filter((k) => g.groups[k]).map((k) => {
    const x = g.groups[k];
    const cpus = x.cpus.length ? x.cpus.join(",") : "all";
    return `<div class="group ${k}" data-group="${k}"><b>${esc(k)}</b> · ${x.processes} processes<br>` +
      `<span class="muted">CPUs</span> ${esc(cpus)} · <span class="muted">profile</span> ${esc(x.profiles.join(", ") || "none")}</div>`;
  }).join("") + `<div class="muted">policy ${esc(g.policy)}</div>`;
}

function drawProcesses(p) {
  const by = {};
  for (const r of p.processes) (by[r.label || "unlabelled"] ||= []).push(r);
  $("processes").innerHTML = ORDER.filter((k) => by[k]).map((k) => {
    const rows = by[k].sort((a, b) => (b.last_window.run_ms || 0) - (a.last_window.run_ms || 0)).map((r) => {
      const w = r.last_window;
      const top = (w.top_syscalls || []).map(([n, c]) => `${n} ${c}`).join(", ");
      return `<tr class="proc" data-pid="${r.pid}"><td class="num">${r.pid}</td><td>${esc(r.comm)}</td>` +
        `<td class="num">${num(r.probability, 2)}</td><td>${esc(r.profile || "–")}</td>` +
        `<td class="num">${num(w.run_ms)}</td><td class="num">${num(w.runq_ms)}</td><td class="num">${num(w.max_wait_ms)}</td>` +
        `<td class="num">${esc(w.syscalls ?? "–")}</td><td>${esc(top)}</td><td title="${esc(r.rule)}">${esc(String(r.rule).slice(0, 70))}</td></tr>`;
    }).join("");
    return `<h3 class="${k}">${esc(k)} (${by[k].length})</h3><table><thead><tr><th>PID</th><th>command</th><th>p</th>` +
      `<th>profile</th><th>run ms</th><th>runq ms</th><th>max wait ms</th><th>syscalls</th><th>top syscalls</th><th>rule</th></tr></thead><tbody>${rows}</tbody></table>`;
  }).join("");
}

function drawChanges(plan) {
  const rows = plan.label_changes.slice().reverse().slice(0, 20).map((c) =>
    `<tr><td>${new Date(c.t * 1000).toLocaleTimeString()}</td><td class="num">${c.pid}</td><td>${esc(c.comm)}</td>` +
    `<td>${esc(c.from)}</td><td>${esc(c.to)}</td><td class="num">${num(c.probability, 2)}</td></tr>`).join("");
  document.querySelector("#changes tbody").innerHTML = rows || '<tr><td colspan="6" class="muted">none yet</td></tr>';
}

async function refresh() {
  try {
    const [procs, groups, plan, metrics, history] = await Promise.all([
      getJSON("/v1/processes"), getJSON("/v1/groups"), getJSON("/v1/plan"),
      fetch("/metrics", { cache: "no-store" }).then((r) => r.text()).then(parseMetrics), getJSON("/v1/history")]);
    drawHistory(history);
    drawFigures(metrics, procs);
    drawGroups(groups);
    drawProcesses(procs);
    drawChanges(plan);
    $("status").textContent = `window ${procs.windows} · updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    $("status").textContent = String(err.message || err);
  }
}

refresh();
setInterval(refresh, 2000);
