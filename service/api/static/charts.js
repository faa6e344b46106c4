// procsift dashboard charts: hand-written SVG line charts and label timelines. No external scripts.
"use strict";
const COLORS = { interactive: "#2f80ed", "html-serving": "#27ae60", background: "#9b51e0", unlabelled: "#bdbdbd",
  "psi cpu": "#eb5757", "psi io": "#f2994a", changes: "#1d2330" };
const SVGNS = "http://www.w3.org/2000/svg";

const fmt = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toPrecision(2));

function el(name, attrs, text) {
  const e = document.createElementNS(SVGNS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// series: {name: [[t, value], ...]}; t in unix seconds. Draws into the <svg> with id `id`.
function lineChart(id, title, series, unit, t0, t1) {
  const svg = document.getElementById(id);
  const W = 460, H = 170, L = 44, R = 8, T = 22, B = 22;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.replaceChildren();
  svg.appendChild(el("text", { x: L, y: 14, class: "ctitle" }, title));
  let ymax = 0;
  for (const pts of Object.values(series)) for (const [, v] of pts) if (v > ymax) ymax = v;
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  const x = (t) => L + ((t - t0) / Math.max(t1 - t0, 1)) * (W - L - R);
  const y = (v) => H - B - (v / ymax) * (H - T - B);
  for (const f of [0, 0.5, 1]) {
    svg.appendChild(el("line", { x1: L, x2: W - R, y1: y(f * ymax), y2: y(f * ymax), class: "grid" }));
    svg.appendChild(el("text", { x: L - 4, y: y(f * ymax) + 4, class: "axis", "text-anchor": "end" },
      fmt(f * ymax) + (f ? unit : "")));
  }
  svg.appendChild(el("text", { x: L, y: H - 6, class: "axis" }, new Date(t0 * 1000).toLocaleTimeString()));
  svg.appendChild(el("text", { x: W - R, y: H - 6, class: "axis", "text-anchor": "end" }, new Date(t1 * 1000).toLocaleTimeString()));
  let lx = L + 6.2 * title.length + 12;  // legend after the title
  for (const [name, pts] of Object.entries(series)) {
    if (!pts.length) continue;
    const d = pts.map(([t, v], i) => `${i ? "L" : "M"}${x(t).toFixed(1)},${y(v).toFixed(1)}`).join("");
    svg.appendChild(el("path", { d, class: "line", stroke: COLORS[name] || "#555", "data-series": name }));
    svg.appendChild(el("text", { x: lx, y: 14, class: "legend", fill: COLORS[name] || "#555" }, name));
    lx += 8 + 7 * name.length;
  }
}

// One row per process: coloured segments for the label it held, from each change to the next.
function timelines(id, rows, t0, t1) {
  const svg = document.getElementById(id);
  const W = 940, L = 170, R = 8, RH = 16;
  const H = 24 + RH * rows.length;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.replaceChildren();
  svg.appendChild(el("text", { x: 0, y: 14, class: "ctitle" }, "label timeline per process (last 10 min)"));
  const x = (t) => L + ((t - t0) / Math.max(t1 - t0, 1)) * (W - L - R);
  rows.forEach((r, i) => {
    const yy = 22 + i * RH;
    svg.appendChild(el("text", { x: 0, y: yy + 11, class: "axis" }, `${r.pid} ${r.comm}`.slice(0, 26)));
    r.changes.forEach(([t, label], j) => {
      const end = j + 1 < r.changes.length ? r.changes[j + 1][0] : r.last_t;
      const w = Math.max(x(end) - x(t), 2);
      svg.appendChild(el("rect", { x: x(t).toFixed(1), y: yy, width: w.toFixed(1), height: RH - 4,
        fill: COLORS[label || "unlabelled"], class: "seg", "data-pid": r.pid }, undefined));
    });
  });
}

function drawHistory(h) {
  const pts = h.points;
  if (!pts.length) return;
  const t1 = pts[pts.length - 1].t, t0 = Math.min(pts[0].t, t1 - 60);
  const per = (field) => {
    const out = {};
    for (const p of pts) for (const [k, v] of Object.entries(p[field])) (out[k] ||= []).push([p.t, v]);
    return out;
  };
  lineChart("c-procs", "processes per label", per("processes"), "", t0, t1);
  lineChart("c-cpu", "CPU share (CPUs)", per("cpu_share"), "", t0, t1);
  lineChart("c-runq", "run-queue delay (ms/window)", per("runq_ms"), " ms", t0, t1);
  lineChart("c-psi", "PSI avg10 %, changes", {
    "psi cpu": pts.filter((p) => p.psi_cpu !== null).map((p) => [p.t, p.psi_cpu]),
    "psi io": pts.filter((p) => p.psi_io !== null).map((p) => [p.t, p.psi_io]),
    changes: pts.map((p) => [p.t, p.changes]) }, "", t0, t1);
  const rows = h.timelines.slice().sort((a, b) => (b.changes.length - a.changes.length) || (a.pid - b.pid)).slice(0, 24);
  timelines("c-timeline", rows, t0, t1);
}
