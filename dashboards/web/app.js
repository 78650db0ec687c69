// The dashboard page: reads the API (or a snapshot's answers), fills the jobs table, draws the
// trend, and opens one job's A/B, parity and co-tenant views when its row is clicked. When a chart
// has drawn, its container gets data-rendered="1" and data-points="<data marks>", which the browser
// test checks against the SVG it finds.
"use strict";

(() => {
  const JOBS_LIMIT = 50;
  const snapshot = window.QGATE_SNAPSHOT || null;
  const $ = (id) => document.getElementById(id);
  const embedOptions = { renderer: "svg", actions: false };
  let trendPoints = [];
  let changeSeries = [];

  /// One API answer's data: from the snapshot when the page was opened from disk, else fetched. Every
  /// answer is an envelope, {schema_version, context, <key>: data} (docs/dashboard.md); `key` names
  /// the data the route answers with ("jobs", "points", "ab", ...).
  async function api(request, key) {
    let body;
    if (snapshot) {
      if (!(request in snapshot)) throw new Error(`the snapshot has no answer for ${request}`);
      body = snapshot[request];
    } else {
      const res = await fetch(request, { headers: { Accept: "application/json" } });
      body = await res.json().catch(() => ({}));
      if (!res.ok) throw new Error(`${request}: ${res.status} ${body.error ? body.error.message : ""}`);
    }
    if (!body || !(key in body)) throw new Error(`${request}: the answer has no "${key}"`);
    return body[key];
  }

  function showError(e) {
    const el = $("error");
    el.hidden = false;
    el.textContent = String(e && e.message ? e.message : e);
  }

  /// Embeds a chart; a chart with no data is left empty (its note says why) rather than drawn as
  /// bare axes.
  async function draw(id, spec, points) {
    const el = $(id);
    el.dataset.rendered = "0";
    if (points === 0) {
      el.replaceChildren();
      el.dataset.points = "0";
      el.dataset.rendered = "1";
      return;
    }
    await vegaEmbed(el, spec, embedOptions);
    el.dataset.points = String(points);
    el.dataset.rendered = "1";
  }

  const short = (s) => (s || "").replace(/^[A-Z_]+?_(?=[A-Z]+$)/, "").replace(/^(JOB_STATE|VERDICT|DISPOSITION|JOB_KIND)_/, "");
  const when = (ms) => (Number(ms) > 0 ? new Date(Number(ms)).toISOString().replace("T", " ").slice(0, 19) : "");
  const fixed = (v, n) => (v === undefined || v === null ? "" : Number(v).toFixed(n));

  // --- Trend ---

  /// Profiles measured by qgate's own jobs first, then imported ones; most points first within each.
  function profiles() {
    const counts = new Map();
    const own = new Set();
    for (const p of trendPoints) {
      counts.set(p.profile, (counts.get(p.profile) || 0) + 1);
      if (p.job_id > 0) own.add(p.profile);
    }
    return [...counts.entries()]
      .sort((a, b) => own.has(b[0]) - own.has(a[0]) || b[1] - a[1] || a[0].localeCompare(b[0]))
      .map((e) => e[0]);
  }

  async function drawTrend() {
    const profile = $("trend-profile").value;
    const along = $("trend-x").value;
    const points = trendPoints.filter((p) => p.profile === profile);
    const changes = [];
    for (const s of changeSeries) if (s.profile === profile) for (const c of s.changes) changes.push(c);
    const contended = points.filter((p) => p.contended).length;
    const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
    $("trend-summary").textContent =
      `${plural(points.length, "point")}, ${contended} with contended runs, ${plural(changes.length, "change point")}`;
    const el = $("trend-chart");
    el.dataset.profile = profile;
    el.dataset.changes = String(changes.length);
    await draw("trend-chart", QgateCharts.trend(points, changes, along), points.length);
  }

  async function loadTrend() {
    const [points, changes] = await Promise.all([api("/api/trend?include_contended=true", "points"), api("/api/changes", "changes")]);
    trendPoints = points;
    changeSeries = changes.series || [];
    const select = $("trend-profile");
    select.replaceChildren(...profiles().map((p) => new Option(p, p)));
    if (!trendPoints.length) {
      $("trend-summary").textContent = "no finished runs yet";
      $("trend-chart").dataset.rendered = "1";
      $("trend-chart").dataset.points = "0";
      return;
    }
    await drawTrend();
  }

  // --- Jobs ---

  function jobRow(job) {
    const v = job.verdict || {};
    const tr = document.createElement("tr");
    tr.dataset.jobId = String(job.id);
    const verdict = short(v.verdict);
    const cells = [
      job.id,
      short(job.spec && job.spec.kind),
      job.build ? job.build.metadata.name : "",
      job.baseline && job.baseline.metadata ? job.baseline.metadata.name : (v.arm_b ? v.arm_b.label : ""),
      short(job.state),
      verdict,
      v.pairs ? `${fixed(v.ratio, 4)} [${fixed(v.ci_low, 4)}, ${fixed(v.ci_high, 4)}]` : "",
      v.pairs ? `${v.pairs}${v.contended_pairs ? ` (${v.contended_pairs} contended)` : ""}` : "",
      v.parity_passed || v.parity_failed ? `${v.parity_passed} passed, ${v.parity_failed} failed` : "",
      short(job.disposition) + (job.disposition_detail ? `: ${job.disposition_detail}` : ""),
      (job.gpus || []).map((g) => `${g.ordinal}: ${g.name}`).join(", "),
      when(job.created_unix_ms),
    ];
    cells.forEach((text, i) => {
      const td = document.createElement("td");
      td.textContent = text;
      if (i === 5 && verdict) td.className = `v-${verdict}`;
      if (i === 9 && job.disposition && job.disposition !== "DISPOSITION_OK" && job.disposition !== "DISPOSITION_UNSPECIFIED")
        td.className = "d-bad";
      tr.appendChild(td);
    });
    tr.addEventListener("click", () => openJob(job).catch(showError));
    return tr;
  }

  async function loadJobs() {
    const jobs = await api(`/api/jobs?limit=${JOBS_LIMIT}`, "jobs");
    $("jobs").querySelector("tbody").replaceChildren(...jobs.map(jobRow));
    $("jobs").dataset.rows = String(jobs.length);
    return jobs;
  }

  // --- One job ---

  async function openJob(job) {
    const section = $("job-section");
    section.dataset.jobId = "";
    for (const tr of $("jobs").querySelectorAll("tbody tr")) tr.classList.toggle("selected", tr.dataset.jobId === String(job.id));
    section.hidden = false;
    const base = `/api/jobs/${job.id}`;
    const [ab, parity, cotenant] = await Promise.all([api(`${base}/ab`, "ab"), api(`${base}/parity`, "parity"), api(`${base}/cotenant`, "cotenant")]);
    const v = job.verdict || {};
    $("job-title").textContent = `Job ${job.id}: ${short(job.spec && job.spec.kind)} of ${job.build ? job.build.metadata.name : "?"}`;
    const reason = (v.reasons || [])[0] || "";
    $("job-summary").textContent = !v.verdict
      ? `${short(job.state)}${job.error ? ": " + job.error : ""}`
      : v.pairs
        ? `${short(v.verdict)} (${short(v.comparison)}): A = ${ab.arm_a || "A"}, B = ${ab.arm_b || "B"}, ratio ${fixed(v.ratio, 4)} ` +
          `[${fixed(v.ci_low, 4)}, ${fixed(v.ci_high, 4)}] over ${v.pairs} pairs; ${reason}`
        : `${short(v.verdict)}: ${reason}`;
    if (ab.split_gpus) $("job-summary").textContent += " The arms ran at once on two GPUs, swapping them every pair; its looks judge blocks of two pairs.";
    // The A/B views only for a job with pairs.
    $("ab-views").hidden = ab.pairs.length === 0;

    const reached = ab.looks.filter((l) => l.reached);
    // A job without timed pairs (a parity job, or one that failed before its A/B) has no looks to show.
    const planned = ab.pairs.length ? ab.looks : [];
    $("looks-table").querySelector("tbody").replaceChildren(...planned.map((l) => {
      const tr = document.createElement("tr");
      const cells = [l.look, l.pairs, l.reached ? fixed(l.ratio, 4) : "not reached",
        l.reached ? (l.bounded ? `[${fixed(l.ci_low, 4)}, ${fixed(l.ci_high, 4)}]` : "cannot decide yet") : "",
        l.reached ? short(l.verdict) : "", l.reached ? l.decision : ""];
      for (const c of cells) {
        const td = document.createElement("td");
        td.textContent = String(c);
        tr.appendChild(td);
      }
      return tr;
    }));
    const cells = QgateCharts.parityCells(parity.cases);
    const failed = parity.cases.filter((c) => c.outcome !== "passed").length;
    $("parity-note").textContent = parity.cases.length
      ? `${parity.cases.length} cases in ${cells.length} cells (paths and activation rows folded into each cell, worst shown); ${failed} failed.`
      : "This job ran no parity cases.";
    const t = cotenant.readings;
    const unsampled = cotenant.runs.filter((r) => !r.available).length;
    $("cotenant-note").textContent = t.length
      ? `${t.length} readings over ${cotenant.runs.length} runs; ${cotenant.runs.filter((r) => r.contended).length} runs contended.`
      : cotenant.runs.length
        ? `No readings: ${unsampled} of ${cotenant.runs.length} runs were not sampled (no NVML, or the CPU backend).`
        : "This job had no timed runs, so no co-tenant readings.";
    const reasons = t.reduce((n, r) => n + r.throttle_reasons.length, 0);
    await Promise.all([
      draw("pairs-chart", QgateCharts.pairs(ab), ab.pairs.length),
      draw("looks-chart", QgateCharts.looks(ab), reached.length),
      draw("parity-chart", QgateCharts.parity(parity.cases), cells.length),
      // A fixed width: "container" widths in a vconcat overflow by the axis titles.
      draw("cotenant-chart", QgateCharts.cotenant(cotenant, Math.max(320, $("cotenant-chart").clientWidth - 240)), t.length),
    ]);
    $("cotenant-chart").dataset.reasons = String(reasons);
    section.dataset.jobId = String(job.id);
    section.scrollIntoView({ block: "start" });
  }

  async function main() {
    $("source").textContent = snapshot ? "snapshot opened from disk" : `live from ${location.host}`;
    $("trend-profile").addEventListener("change", () => drawTrend().catch(showError));
    $("trend-x").addEventListener("change", () => drawTrend().catch(showError));
    try {
      const device = await api("/api/device", "device");
      $("device").textContent =
        `host ${device.host || "?"} · backend ${device.backend} · device ${device.name} · qgate ${device.qgate_version}`;
    } catch (e) {
      $("device").textContent = "device unknown";
    }
    await Promise.all([loadTrend(), loadJobs()]);
    document.body.dataset.ready = "1";
  }

  main().catch((e) => {
    showError(e);
    document.body.dataset.ready = "error";
  });
})();
