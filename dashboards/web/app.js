// The dashboard page: reads the API (or a snapshot's answers) and shows one of four pages: the trends
// with the last jobs (and one job's A/B, parity and co-tenant views), two builds compared, the
// regressions across series, and the fleet's GPUs. The header's host filter keeps every page to one
// host's jobs, runs and GPUs (the API's `host` parameter). The view lives in the URL's #fragment (page,
// host, profile, axis, series, zoom window, job, builds compared), so a reloaded or shared URL shows the
// same view. When a chart has drawn, its container gets data-rendered="1" and data-points="<data
// marks>", which the browser test checks against the SVG it finds.
"use strict";

(() => {
  const JOBS_LIMIT = 50;
  const snapshot = window.QGATE_SNAPSHOT || null;
  const $ = (id) => document.getElementById(id);
  const embedOptions = { renderer: "svg", actions: false };

  // --- The view's state and its permalink ---

  const PAGES = ["trends", "regressions", "compare", "devices"];
  /// What the URL holds: page ("trends", "regressions", "compare", "devices"), the host kept to ("": every
  /// host), the trend's profile, weight type ("": all), axis ("time" or "build"), picked series (null:
  /// all), zoom window ([from, to] in ms, along time), the open job, and the builds compared with whether
  /// contended runs count.
  const state = { page: "trends", host: "", profile: "", type: "", x: "time", series: null, zoom: null, job: 0, a: "", b: "", contended: false };

  function readState() {
    const q = new URLSearchParams(location.hash.replace(/^#/, ""));
    state.page = PAGES.includes(q.get("page")) ? q.get("page") : "trends";
    // A snapshot holds every host's answers only (docs/dashboard.md): there the filter stays off.
    state.host = snapshot ? "" : q.get("host") || "";
    state.profile = q.get("profile") || "";
    state.type = q.get("type") || "";
    state.x = q.get("x") === "build" ? "build" : "time";
    state.series = q.has("series") ? q.getAll("series").filter((s) => s !== "") : null;
    const zoom = (q.get("zoom") || "").split("~").map(Number);
    state.zoom = zoom.length === 2 && zoom.every(Number.isFinite) && zoom[1] > zoom[0] ? zoom : null;
    state.job = Number(q.get("job")) || 0;
    state.a = q.get("a") || "";
    state.b = q.get("b") || "";
    state.contended = q.get("contended") === "1";
  }

  /// The fragment for `s` (the state, or a view to link to): only what the page uses.
  function fragment(s) {
    const q = new URLSearchParams();
    q.set("page", s.page);
    if (s.host) q.set("host", s.host);
    if (s.page === "trends") {
      if (s.profile) q.set("profile", s.profile);
      if (s.type) q.set("type", s.type);
      if (s.x === "build") q.set("x", "build");
      if (s.series) (s.series.length ? s.series : [""]).forEach((name) => q.append("series", name));
      if (s.zoom && s.x !== "build") q.set("zoom", s.zoom.map(Math.round).join("~"));
      if (s.job) q.set("job", String(s.job));
    } else if (s.page === "compare") {
      if (s.a) q.set("a", s.a);
      if (s.b) q.set("b", s.b);
      if (s.contended) q.set("contended", "1");
    }
    return "#" + q.toString();
  }

  let ownHash = null;  // a fragment this script wrote, whose hashchange is not a navigation
  /// Writes the state into the URL: a new history entry for a new page or job, else in place.
  function saveState(newEntry) {
    const hash = fragment(state);
    $("permalink").href = hash;
    if (hash === location.hash) return;
    ownHash = hash;
    if (newEntry) location.hash = hash;
    else location.replace(hash);
  }

  // --- Data ---

  const answers = new Map();
  /// One API answer's data: from the snapshot when the page was opened from disk, else fetched (once per
  /// page load). Every answer is an envelope, {schema_version, context, <key>: data} (docs/dashboard.md);
  /// `key` names the data the route answers with ("jobs", "points", "compare", ...).
  function api(request, key) {
    if (!answers.has(request)) answers.set(request, fetchAnswer(request));
    return answers.get(request).then((body) => {
      if (!body || !(key in body)) throw new Error(`${request}: the answer has no "${key}"`);
      return body[key];
    });
  }

  async function fetchAnswer(request) {
    if (snapshot) {
      if (!(request in snapshot)) throw new Error(`the snapshot has no answer for ${request}`);
      return snapshot[request];
    }
    const res = await fetch(request, { headers: { Accept: "application/json" } });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) {
      const e = new Error(`${request}: ${res.status} ${body.error ? body.error.message : ""}`);
      e.status = res.status;
      e.detail = body.error ? body.error.message : "";
      answers.delete(request);
      throw e;
    }
    return body;
  }

  /// `request` kept to the host filtered on (the API's `host` parameter), as is when the filter is off.
  const onHost = (request) => (state.host ? `${request}${request.includes("?") ? "&" : "?"}host=${encodeURIComponent(state.host)}` : request);
  const trendData = () => Promise.all([api(onHost("/api/trend?include_contended=true"), "points"), api(onHost("/api/changes"), "changes")])
    .then(([points, changes]) => ({ points, series: changes.series || [] }));
  const jobsData = () => api(onHost(`/api/jobs?limit=${JOBS_LIMIT}`), "jobs");
  /// Every GPU of the fleet (`qgate device`): this daemon's live, the others' as they published them.
  const devicesData = () => api(onHost("/api/devices"), "devices");

  function showError(e) {
    const el = $("error");
    el.hidden = false;
    el.textContent = String(e && e.message ? e.message : e);
  }

  /// Embeds a chart; a chart with no data is left empty (its note says why) rather than drawn as
  /// bare axes. The Vega view is kept on the element (`vegaView`) for the zoom and the test.
  async function draw(id, spec, points) {
    const el = $(id);
    el.dataset.rendered = "0";
    if (el.vegaView) el.vegaView.finalize();
    el.vegaView = null;
    if (points === 0) {
      el.replaceChildren();
      el.dataset.points = "0";
      el.dataset.rendered = "1";
      return null;
    }
    const result = await vegaEmbed(el, spec, embedOptions);
    el.vegaView = result.view;
    el.dataset.points = String(points);
    el.dataset.rendered = "1";
    return result.view;
  }

  const short = (s) => (s || "").replace(/^[A-Z_]+?_(?=[A-Z]+$)/, "").replace(/^(JOB_STATE|VERDICT|DISPOSITION|JOB_KIND|COMPARISON)_/, "");
  const when = (ms) => (Number(ms) > 0 ? new Date(Number(ms)).toISOString().replace("T", " ").slice(0, 19) : "");
  const fixed = (v, n) => (v === undefined || v === null ? "" : Number(v).toFixed(n));
  // As the CLI writes them (client/src/format.cpp): a ratio to 3 places, "-" for none.
  const ratioText = (r) => (!Number(r) ? "-" : Number(r).toFixed(3));
  const intervalText = (lo, hi) => (!Number(lo) && !Number(hi) ? "-"
    : !(Number(hi) <= 1000) ? `[${Number(lo).toFixed(3)}, unbounded]` : `[${Number(lo).toFixed(3)}, ${Number(hi).toFixed(3)}]`);
  const plural = (n, word) => `${n} ${word}${n === 1 || word.endsWith("series") ? "" : "s"}`;
  const link = (text, view) => {
    const a = document.createElement("a");
    a.textContent = text;
    a.href = fragment({ page: "trends", host: state.host, type: "", x: "time", series: null, zoom: null, job: 0, ...view });
    return a;
  };
  function row(cells) {
    const tr = document.createElement("tr");
    for (const c of cells) {
      const td = document.createElement("td");
      if (c instanceof Node) td.appendChild(c);
      else if (Array.isArray(c)) c.forEach((n, i) => { if (i) td.append(" "); td.append(n); });
      else td.textContent = c === undefined || c === null ? "" : String(c);
      tr.appendChild(td);
    }
    return tr;
  }
  /// The width a chart may take inside its container, less room for its axis titles.
  const chartWidth = (id, axes) => Math.max(200, $(id).clientWidth - axes);

  // --- Trend ---

  /// Profiles measured by qgate's own jobs first, then imported ones; most points first within each.
  function profiles(points) {
    const counts = new Map();
    const own = new Set();
    for (const p of points) {
      counts.set(p.profile, (counts.get(p.profile) || 0) + 1);
      if (p.job_id > 0) own.add(p.profile);
    }
    return [...counts.entries()]
      .sort((a, b) => own.has(b[0]) - own.has(a[0]) || b[1] - a[1] || a[0].localeCompare(b[0]))
      .map((e) => e[0]);
  }

  /// The series picker: a checkbox per series of the profile, checked when it is drawn.
  function fillSeriesPicker(names) {
    const list = $("series-list");
    list.replaceChildren(...names.map((name) => {
      const label = document.createElement("label");
      const box = document.createElement("input");
      box.type = "checkbox";
      box.value = name;
      box.checked = !state.series || state.series.includes(name);
      box.addEventListener("change", () => {
        const picked = [...list.querySelectorAll("input:checked")].map((b) => b.value);
        state.series = picked.length === names.length ? null : picked;
        saveState(false);
        drawTrend().catch(showError);
      });
      label.append(box, " ", name);
      return label;
    }));
  }

  /// The time axis' window as drawn ("from~to" in ms), or "" when the chart has none.
  function drawnWindow(view) {
    try {
      return view.scale("x").domain().map((d) => Math.round(Number(d))).join("~");
    } catch (e) {
      return "";
    }
  }

  let zoomTimer = 0;
  async function drawTrend() {
    const host = state.host;
    const { points: everything, series: changeSeries } = await trendData();
    if (host !== state.host) return;  // the filter changed meanwhile: its own render draws
    const profile = state.profile;
    const ofProfile = everything.filter((p) => p.profile === profile);
    // The weight-type filter, where the profile has more than one type.
    const types = [...new Set(ofProfile.map((p) => p.weight_type).filter(Boolean))].sort();
    if (state.type && !types.includes(state.type)) state.type = "";
    $("trend-type-label").hidden = types.length < 2;
    const typeSelect = $("trend-type");
    if ([...typeSelect.options].map((o) => o.value).join("|") !== ["", ...types].join("|"))
      typeSelect.replaceChildren(new Option("all types", ""), ...types.map((t) => new Option(t, t)));
    typeSelect.value = state.type;
    const all = ofProfile.filter((p) => !state.type || p.weight_type === state.type);
    const many = QgateCharts.variety(all);
    const names = [...new Set(all.map((p) => QgateCharts.seriesName(p, many)))].sort();
    if ($("series-list").dataset.profile !== `${host}|${profile}|${state.type}` || $("series-list").children.length !== names.length) {
      $("series-list").dataset.profile = `${host}|${profile}|${state.type}`;
      fillSeriesPicker(names);
    }
    for (const box of $("series-list").querySelectorAll("input")) box.checked = !state.series || state.series.includes(box.value);
    const picked = (name) => !state.series || state.series.includes(name) || state.series.includes(`${name} (pass-timed)`);
    const points = all.filter((p) => picked(QgateCharts.seriesName(p, many)));
    const changes = [];
    for (const s of changeSeries)
      if (s.profile === profile && (!state.type || s.weight_type === state.type) && picked(QgateCharts.seriesName(s, many)))
        for (const c of s.changes || []) changes.push({ change: c, series: s });
    const shown = new Set(points.map((p) => QgateCharts.seriesName(p, many))).size;
    $("series-count").textContent = `${shown} of ${names.length} shown`;
    const contended = points.filter((p) => QgateCharts.loadOf(p) === "contended").length;
    $("trend-summary").textContent =
      `${plural(points.length, "point")}, ${contended} with contended runs, ${plural(changes.length, "change point")}`;
    const el = $("trend-chart");
    el.dataset.profile = profile;
    el.dataset.type = state.type;
    el.dataset.along = state.x;
    el.dataset.series = String(shown);
    el.dataset.changes = String(changes.length);
    el.dataset.zoom = state.zoom && state.x === "time" ? state.zoom.map(Math.round).join("~") : "";
    $("trend-reset-zoom").hidden = !(state.zoom && state.x === "time");
    const spec = QgateCharts.trend(points, changes, state.x, { width: chartWidth("trend-chart", 90), zoom: state.x === "time" ? state.zoom : null });
    const view = await draw("trend-chart", spec, points.length);
    el.dataset.xDomain = "";
    if (!view || state.x !== "time") return;
    el.dataset.xDomain = drawnWindow(view);
    // Panning or zooming writes the window into the URL.
    view.addSignalListener("zoom", (name, value) => {
      clearTimeout(zoomTimer);
      zoomTimer = setTimeout(() => {
        const span = value && value.t;
        state.zoom = span && span.length === 2 ? span.map((d) => Math.round(Number(d))) : null;
        el.dataset.zoom = state.zoom ? state.zoom.join("~") : "";
        el.dataset.xDomain = drawnWindow(view);
        $("trend-reset-zoom").hidden = !state.zoom;
        saveState(false);
      }, 150);
    });
  }

  async function renderTrends() {
    const host = state.host;
    const { points } = await trendData();
    if (host !== state.host) return;
    const names = profiles(points);
    const select = $("trend-profile");
    if ([...select.options].map((o) => o.value).join("|") !== names.join("|")) select.replaceChildren(...names.map((p) => new Option(p, p)));
    if (!names.includes(state.profile)) state.profile = names[0] || "";
    select.value = state.profile;
    $("trend-x").value = state.x;
    if (!points.length) {
      // Nothing to draw (on this host): no series, and no chart left from another host.
      $("trend-summary").textContent = host ? `no finished runs on host ${host}` : "no finished runs yet";
      $("series-list").replaceChildren();
      $("series-list").dataset.profile = "";
      $("series-count").textContent = "none";
      const el = $("trend-chart");
      Object.assign(el.dataset, { profile: "", type: "", series: "0", changes: "0", zoom: "", xDomain: "" });
      $("trend-reset-zoom").hidden = true;
      $("trend-type-label").hidden = true;
      await draw("trend-chart", {}, 0);
    } else {
      await drawTrend();
    }
    await renderJobs();
    if (state.job) await openJob(state.job);
  }

  // --- Jobs ---

  function jobRow(job) {
    const v = job.verdict || {};
    const verdict = short(v.verdict);
    const tr = row([
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
      job.host || "-",
      (job.gpus || []).map((g) => `${g.ordinal}: ${g.name}`).join(", "),
      when(job.created_unix_ms),
    ]);
    tr.dataset.jobId = String(job.id);
    tr.dataset.host = job.host || "";
    if (!job.host) tr.children[10].title = "not claimed by a daemon yet";
    if (verdict) tr.children[5].className = `v-${verdict}`;
    if (job.disposition && job.disposition !== "DISPOSITION_OK" && job.disposition !== "DISPOSITION_UNSPECIFIED")
      tr.children[9].className = "d-bad";
    tr.addEventListener("click", () => {
      state.job = job.id;
      saveState(true);
      openJob(job.id).then(() => $("job-section").scrollIntoView({ block: "start" })).catch(showError);
    });
    return tr;
  }

  /// The last jobs, of the host filtered on; listed again only when the filter changes.
  async function renderJobs() {
    const table = $("jobs");
    const host = state.host;
    if (table.dataset.rows !== undefined && table.dataset.host === host) return;
    const jobs = await jobsData();
    if (host !== state.host) return;
    table.querySelector("tbody").replaceChildren(...jobs.map(jobRow));
    table.dataset.host = host;
    table.dataset.rows = String(jobs.length);
    $("jobs-none").hidden = jobs.length > 0;
    $("jobs-none").textContent = host ? `No jobs on host ${host}.` : "No jobs yet.";
  }

  // --- One job ---

  async function openJob(jobId) {
    const section = $("job-section");
    section.dataset.jobId = "";
    for (const tr of $("jobs").querySelectorAll("tbody tr")) tr.classList.toggle("selected", tr.dataset.jobId === String(jobId));
    section.hidden = false;
    const base = `/api/jobs/${jobId}`;
    const listed = (await jobsData()).find((j) => j.id === jobId);
    const [job, ab, parity, cotenant] = await Promise.all([listed || api(base, "job"), api(`${base}/ab`, "ab"),
      api(`${base}/parity`, "parity"), api(`${base}/cotenant`, "cotenant")]);
    const v = job.verdict || {};
    const buildName = job.build ? job.build.metadata.name : "";
    $("job-title").textContent = `Job ${job.id}: ${short(job.spec && job.spec.kind)} of ${buildName || "?"}`;
    const reason = (v.reasons || [])[0] || "";
    $("job-summary").textContent = !v.verdict
      ? `${short(job.state)}${job.error ? ": " + job.error : ""}`
      : v.pairs
        ? `${short(v.verdict)} (${short(v.comparison)}): A = ${ab.arm_a || "A"}, B = ${ab.arm_b || "B"}, ratio ${fixed(v.ratio, 4)} ` +
          `[${fixed(v.ci_low, 4)}, ${fixed(v.ci_high, 4)}] over ${v.pairs} pairs; ${reason}`
        : `${short(v.verdict)}: ${reason}`;
    if (ab.split_gpus) $("job-summary").textContent += " The arms ran at once on two GPUs, swapping them every pair; its looks judge blocks of two pairs.";
    const baseline = job.baseline && job.baseline.metadata ? job.baseline.metadata.name : "";
    $("job-compare").replaceChildren(...(buildName && baseline
      ? ["Across all their jobs: ", link(`compare ${buildName} with ${baseline}`, { page: "compare", a: buildName, b: baseline })]
      : []));
    // The A/B views only for a job with pairs.
    $("ab-views").hidden = ab.pairs.length === 0;

    const reached = ab.looks.filter((l) => l.reached);
    // A job without timed pairs (a parity job, or one that failed before its A/B) has no looks to show.
    const planned = ab.pairs.length ? ab.looks : [];
    $("looks-table").querySelector("tbody").replaceChildren(...planned.map((l) => row([l.look, l.pairs,
      l.reached ? fixed(l.ratio, 4) : "not reached",
      l.reached ? (l.bounded ? `[${fixed(l.ci_low, 4)}, ${Number(l.ci_high) <= 1000 ? fixed(l.ci_high, 4) : "unbounded"}]` : "cannot decide yet") : "",
      l.reached ? short(l.verdict) : "", l.reached ? l.decision : ""])));
    const cells = QgateCharts.parityCells(parity.cases);
    const failed = parity.cases.filter((c) => c.outcome !== "passed").length;
    $("parity-note").textContent = parity.cases.length
      ? `${parity.cases.length} cases in ${cells.length} cells (paths and activation rows folded into each cell, worst shown); ${failed} failed. ` +
        "Green while a cell passes (paler the further under its bound), amber close to the bound, red only past it."
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
      draw("cotenant-chart", QgateCharts.cotenant(cotenant, Math.max(240, $("cotenant-chart").clientWidth - 240)), t.length),
    ]);
    $("cotenant-chart").dataset.reasons = String(reasons);
    section.dataset.jobId = String(job.id);
  }

  // --- Compare ---

  /// The builds with runs, newest first: those of the trend and the jobs (builds and baselines).
  async function comparableBuilds() {
    const [{ points }, jobs] = await Promise.all([trendData(), jobsData()]);
    const latest = new Map();
    const seen = (name, ms) => { if (name) latest.set(name, Math.max(latest.get(name) || 0, Number(ms) || 0)); };
    for (const p of points) seen(p.build_name, p.last_unix_ms || p.started_unix_ms);
    for (const j of jobs) {
      if (j.build) seen(j.build.metadata.name, j.created_unix_ms);
      if (j.baseline && j.baseline.metadata) seen(j.baseline.metadata.name, 0);
    }
    return [...latest.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map((e) => e[0]);
  }

  const compareRequest = (a, b, contended) =>
    `/api/compare?build_a=${encodeURIComponent(a)}&build_b=${encodeURIComponent(b)}${contended ? "&include_contended=true" : ""}`;

  async function renderCompare() {
    const section = $("compare-section");
    section.dataset.compared = "";
    const host = state.host;
    const builds = await comparableBuilds();
    if (host !== state.host) return;
    if (!state.a || !state.b) {
      // The newest job with a baseline, else the two newest builds.
      const gate = (await jobsData()).find((j) => j.build && j.baseline && j.baseline.metadata);
      state.a = state.a || (gate ? gate.build.metadata.name : builds[0] || "");
      state.b = state.b || (gate ? gate.baseline.metadata.name : builds.find((n) => n !== state.a) || "");
      saveState(false);
    }
    for (const [id, value] of [["compare-a", state.a], ["compare-b", state.b]]) {
      const names = builds.includes(value) || !value ? builds : [value, ...builds];
      $(id).replaceChildren(...names.map((n) => new Option(n, n)));
      $(id).value = value;
    }
    $("compare-contended").checked = state.contended;
    const tbody = $("compare-table").querySelector("tbody");
    let answer = null;
    try {
      answer = state.a && state.b ? await api(onHost(compareRequest(state.a, state.b, state.contended)), "compare") : null;
    } catch (e) {
      // Nothing comparable is the daemon's answer, not a fault of the page.
      const why = e.status ? e.detail || e.message : snapshot ? "this snapshot holds no comparison of these two builds " +
        "(it holds each listed job's build against its baseline and each regression's two builds)" : e.message;
      $("compare-summary").textContent = `No comparison: ${why}`;
    }
    if (host !== state.host) return;
    if (!answer) {
      tbody.replaceChildren();
      $("compare-notes").replaceChildren();
      await draw("compare-chart", {}, 0);
      section.dataset.rows = "0";
      section.dataset.compared = `${state.a}|${state.b}`;
      return;
    }
    const side = (b) => `${b.metadata.name} (id ${b.id}, sha256 ${(b.sha256 || "").slice(0, 12)})`;
    const margin = Number(answer.same_margin) || 0.02;
    $("compare-summary").textContent = `A = ${side(answer.a)}; B = ${side(answer.b)}. ${plural(answer.rows.length, "matched series")}; ` +
      `SAME within 1 ± ${(100 * margin).toFixed(3).replace(/\.?0+$/, "")}%${state.contended ? "; contended runs included" : "; quiet runs only"}` +
      `${host ? `; runs on host ${host} only` : ""}.`;
    const verdicts = answer.rows.map((r) => short(r.comparison) === "UNSPECIFIED" ? "" : short(r.comparison));
    tbody.replaceChildren(...answer.rows.map((r, i) => {
      const paired = (r.paired_jobs || []).map((j) => link(`job ${j.job_id}: ${ratioText(j.ratio)} ${intervalText(j.ci_low, j.ci_high)} ` +
        `${Number(j.ratio) ? short(j.comparison) : "no verdict"}`, { job: j.job_id }));
      const tr = row([r.series, ratioText(r.ratio), intervalText(r.ci_low, r.ci_high), verdicts[i], fixed(r.tokens_per_s_a, 1),
        fixed(r.tokens_per_s_b, 1), r.settings || "-", `${r.runs_a} / ${r.runs_b} (${r.a.jobs} / ${r.b.jobs})`,
        paired.length ? paired : "-"]);
      tr.dataset.series = r.series;
      tr.children[0].className = "wrap";
      tr.children[3].className = `c-${verdicts[i]}`;
      return tr;
    }));
    const notes = [...answer.notes, ...answer.rows.flatMap((r) => (r.notes || []).map((n) => `${r.series}: ${n}`))];
    $("compare-notes").replaceChildren(...notes.map((n) => { const li = document.createElement("li"); li.textContent = n; return li; }));
    const chartRows = answer.rows.map((r, i) => ({ ...r, label: r.settings ? `${r.path} ${r.weight_type} · ${r.settings}`.trim() : `${r.profile} ${r.path} ${r.weight_type}`.trim(), verdict: verdicts[i] || "UNKNOWN" }));
    // Two series of one name (other GPUs, tokens) keep their order in the table.
    chartRows.forEach((r, i) => { if (chartRows.findIndex((o) => o.label === r.label) !== i) r.label += ` (${i + 1})`; });
    const narrow = $("compare-chart").clientWidth < 600;
    await draw("compare-chart", QgateCharts.compare(chartRows, margin,
      { width: chartWidth("compare-chart", narrow ? 150 : 300), labelLimit: narrow ? 130 : 280 }), chartRows.length);
    section.dataset.rows = String(answer.rows.length);
    section.dataset.compared = `${state.a}|${state.b}`;
  }

  // --- Regressions ---

  /// `qgate regressions`' rows from the daemon's answer: a slowdown a row, newest first; a dip that a later
  /// change brought back is one row naming the build that fixed it (SeriesChange.fixes_previous).
  function regressionRows(answer) {
    const rows = [];
    for (const s of answer.series || []) {
      const changes = s.changes || [];
      changes.forEach((c, i) => {
        if (Number(c.ratio) >= 1 || c.fixes_previous) return;
        const next = changes[i + 1];
        rows.push({ series: s, change: c, fixedBy: next && next.fixes_previous ? next : null,
          significance: answer.correction ? s.q_value : c.p_value });
      });
    }
    return rows.sort((x, y) => Number(y.change.started_unix_ms) - Number(x.change.started_unix_ms));
  }

  /// The slowdown's slow builds (SeriesChange.slow_builds), "transient" after them when they are too few
  /// for a sustained slowdown (SeriesChange.transient), as `qgate regressions` shows them.
  function slowBuildsText(c) {
    const n = Number(c.slow_builds) || 0;
    return c.transient ? `${n} transient` : String(n);
  }

  async function renderRegressions() {
    const section = $("regressions-section");
    section.dataset.rows = "";
    const host = state.host;
    const [answer, { points }] = await Promise.all([api(onHost("/api/regressions"), "regressions"), trendData()]);
    if (host !== state.host) return;
    const rows = regressionRows(answer);
    $("regressions-significance").textContent = answer.correction ? "q" : "p";
    const transientRows = rows.filter((r) => r.change.transient).length;
    $("regressions-summary").textContent = rows.length
      ? `${plural(rows.length, "slowdown")} in ${plural(answer.series_tested || (answer.series || []).length, "series")} tested` +
        `, ${transientRows} of them transient${host ? `, on host ${host}` : ""}.`
      : host ? `No slowdowns on host ${host}.` : "No slowdowns.";
    $("regressions-note").textContent = "Ratio: the new level / the old (geometric means of per-build medians of uncontended runs); < 1 is slower. " +
      `E-divisive means, permutation p < ${answer.alpha} (${answer.permutations} permutations), at least ${answer.min_segment} builds a level` +
      (answer.correction ? `; across series ${answer.correction} over ${answer.series_tested} series, q being the series' adjusted p.` : ".") +
      " Slow builds: the builds on the slow level slower than halfway to it; transient when fewer than 3, which a short real dip" +
      " and a burst of contention the co-tenant sampler missed both give.";
    $("regressions-table").querySelector("tbody").replaceChildren(...rows.map(({ series: s, change: c, fixedBy, significance }) => {
      // The job that measured the first slow build in this series (0: imported results, no job).
      const job = points.filter((p) => p.profile === s.profile && p.path === s.path && p.build_name === c.build_name &&
        (p.settings || "") === (s.settings || "")).reduce((m, p) => Math.max(m, Number(p.job_id) || 0), 0);
      const name = QgateCharts.seriesName(s, {});
      const t = Number(c.started_unix_ms);
      const open = [
        link("compare", { page: "compare", a: c.build_name, b: c.previous_build_name }),
        link("trend", { page: "trends", profile: s.profile, series: [name], zoom: [t - 12 * 3600e3, t + 12 * 3600e3] }),
        job ? link(`job ${job}`, { page: "trends", profile: s.profile, job }) : "imported, no job",
      ];
      // The series by profile, test (llama-bench's pp512, tg128) or tokens, and its name (type, path,
      // settings); the daemon's whole description in the cell's tooltip.
      const test = QgateCharts.panelOf(s) || (Number(s.tokens) ? `${s.tokens} tokens` : "");
      const tr = row([when(c.started_unix_ms), ratioText(c.ratio), intervalText(c.ci_low, c.ci_high),
        [s.profile, test, name].filter(Boolean).join(" · "), open, c.previous_build_name, c.build_name,
        fixedBy ? `${fixedBy.build_name} (${plural(c.builds_after, "build")} slow)` : "not yet",
        slowBuildsText(c), Number(significance).toPrecision(3)]);
      tr.children[3].title = s.series;
      if (c.transient) {
        tr.children[8].className = "transient";
        tr.children[8].title = "Fewer than 3 slow builds: a short real dip, or a burst of contention the co-tenant sampler missed";
      }
      tr.dataset.transient = c.transient ? "1" : "0";
      tr.dataset.build = c.build_name;
      tr.dataset.previous = c.previous_build_name;
      return tr;
    }));
    section.dataset.rows = String(rows.length);
  }

  // --- Devices ---

  /// How long ago, in the CLI's words ("12s", "3m", "2h", "4d").
  function agoText(ms) {
    const s = Math.max(0, Math.round(Number(ms) / 1000));
    return s < 120 ? `${s}s` : s < 7200 ? `${Math.round(s / 60)}m` : s < 172800 ? `${Math.round(s / 3600)}h` : `${Math.round(s / 86400)}d`;
  }

  /// `qgate device`: this daemon's GPUs read live, the other daemons' as they last published them.
  async function renderDevices() {
    const section = $("devices-section");
    section.dataset.rows = "";
    const host = state.host;
    const devices = await devicesData();
    if (host !== state.host) return;
    const now = Date.now();
    const hosts = new Set(devices.map((d) => d.host));
    $("devices-summary").textContent = devices.length
      ? `${plural(devices.length, "GPU")} on ${plural(hosts.size, "host")}` +
        `${devices.some((d) => Number(d.published_unix_ms)) ? ", some as another daemon published them" : ", all read live"}.`
      : host ? `No GPUs on host ${host}.` : "No GPUs.";
    $("devices-table").querySelector("tbody").replaceChildren(...devices.map((d) => {
      const published = Number(d.published_unix_ms) || 0;
      const running = Number(d.running_job_id) || 0;
      const tr = row([d.host || "-", d.device, d.name || "-", d.uuid || "-", d.backend || "-",
        (d.labels || []).join(", ") || "-", published ? "-" : d.queued_jobs,
        running ? link(`job ${running}`, { job: running }) : "-", (d.now && d.now.state) || "unavailable",
        d.qgate_version || "-", published ? `${when(published)} (${agoText(now - published)} ago)` : "live"]);
      if (d.now && d.now.reason) tr.children[8].title = d.now.reason;
      tr.dataset.host = d.host || "";
      tr.dataset.published = String(published);
      return tr;
    }));
    section.dataset.rows = String(devices.length);
  }

  /// The hosts the filter offers: those of the fleet's GPUs and of the last jobs, and the one filtered on
  /// (a shared URL may name a host this daemon has not seen; it then lists nothing).
  async function fillHosts() {
    const [devices, jobs] = await Promise.all([api("/api/devices", "devices").catch(() => []),
      api(`/api/jobs?limit=${JOBS_LIMIT}`, "jobs").catch(() => [])]);
    const hosts = new Set([...devices.map((d) => d.host), ...jobs.map((j) => j.host)].filter(Boolean));
    if (state.host) hosts.add(state.host);
    const names = [...hosts].sort();
    const select = $("host-filter");
    if ([...select.options].map((o) => o.value).join("|") !== ["", ...names].join("|"))
      select.replaceChildren(new Option("all hosts", ""), ...names.map((h) => new Option(h, h)));
    select.value = state.host;
  }

  // --- Pages ---

  let renders = 0;
  async function render() {
    const mine = ++renders;
    document.body.dataset.page = state.page;
    for (const section of document.querySelectorAll("main > section"))
      section.hidden = section.dataset.page !== state.page || (section.id === "job-section" && !state.job);
    for (const a of $("pages").querySelectorAll("a")) {
      a.classList.toggle("current", a.dataset.page === state.page);
      a.href = fragment({ page: a.dataset.page, host: state.host });  // the pages keep the host filtered on
    }
    $("permalink").href = fragment(state);
    // Not drawn yet for this view (the test waits for these to be set again).
    $("regressions-section").dataset.rows = "";
    $("compare-section").dataset.compared = "";
    $("devices-section").dataset.rows = "";
    await fillHosts();
    if (state.page === "trends") await renderTrends();
    else if (state.page === "compare") await renderCompare();
    else if (state.page === "devices") await renderDevices();
    else await renderRegressions();
    if (mine === renders) document.body.dataset.view = fragment(state);
  }

  function navigate() {
    if (ownHash !== null && location.hash === ownHash) { ownHash = null; return; }
    ownHash = null;
    readState();
    render().catch(showError);
  }

  async function main() {
    $("source").textContent = snapshot ? "snapshot opened from disk" : `live from ${location.host}`;
    if (snapshot) {
      $("host-filter").disabled = true;
      $("host-label").title = "A snapshot holds every host's answers only; filter by host on the live dashboard.";
    }
    $("host-filter").addEventListener("change", () => {
      state.host = $("host-filter").value;
      // Another host has other series and times: draw all of them, unzoomed.
      state.series = null;
      state.zoom = null;
      saveState(true);
      render().catch(showError);
    });
    $("trend-profile").addEventListener("change", () => {
      state.profile = $("trend-profile").value;
      state.type = "";
      state.series = null;
      state.zoom = null;
      saveState(true);
      drawTrend().catch(showError);
    });
    $("trend-type").addEventListener("change", () => {
      state.type = $("trend-type").value;
      state.series = null;
      saveState(false);
      drawTrend().catch(showError);
    });
    $("trend-x").addEventListener("change", () => { state.x = $("trend-x").value; saveState(false); drawTrend().catch(showError); });
    $("trend-reset-zoom").addEventListener("click", () => { state.zoom = null; saveState(false); drawTrend().catch(showError); });
    $("series-all").addEventListener("click", () => { state.series = null; saveState(false); drawTrend().catch(showError); });
    $("series-none").addEventListener("click", () => { state.series = []; saveState(false); drawTrend().catch(showError); });
    const recompare = () => {
      state.a = $("compare-a").value;
      state.b = $("compare-b").value;
      state.contended = $("compare-contended").checked;
      saveState(true);
      renderCompare().catch(showError);
    };
    for (const id of ["compare-a", "compare-b", "compare-contended"]) $(id).addEventListener("change", recompare);
    $("compare-swap").addEventListener("click", () => {
      [$("compare-a").value, $("compare-b").value] = [state.b, state.a];
      recompare();
    });
    window.addEventListener("hashchange", navigate);
    // Charts are drawn to the page's width: draw again when it changes.
    let lastWidth = window.innerWidth, resizeTimer = 0;
    window.addEventListener("resize", () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => {
        if (window.innerWidth === lastWidth) return;
        lastWidth = window.innerWidth;
        render().catch(showError);
      }, 250);
    });
    try {
      const device = await api("/api/device", "device");
      $("device").textContent =
        `host ${device.host || "?"} · backend ${device.backend} · device ${device.name} · qgate ${device.qgate_version}`;
    } catch (e) {
      $("device").textContent = "device unknown";
    }
    readState();
    await render();
    document.body.dataset.ready = "1";
  }

  main().catch((e) => {
    showError(e);
    document.body.dataset.ready = "error";
  });
})();
