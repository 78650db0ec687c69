// Vega-Lite specifications of the dashboard's charts, built from the API's JSON. Pure functions: the
// page (app.js) fetches, picks and embeds; statistics (verdicts, intervals, change points) are the
// daemon's, never computed here. Every chart draws its data marks with a mark type of its
// own in its container, so a test can count them in the SVG.
"use strict";

const QgateCharts = (() => {
  const width = "container";
  const schema = "https://vega.github.io/schema/vega-lite/v5.json";
  // The API writes ids, times and counts as JSON numbers (docs/dashboard.md); a double outside
  // them may still be a string ("NaN", "Infinity"), and a field may be missing.
  const num = (v) => (v === undefined || v === null || v === "" ? null : Number(v));
  // A point is as loaded as its worst runs (docs/trends.md: a point is contended when any of its runs
  // was): contended over unknown over quiet.
  const loadOf = (p) => (p.contended || num(p.contended_runs) > 0 ? "contended" : !p.cotenant_known ? "unknown" : "quiet");
  // A pass-timed point is a series of its own: whole passes give other tok/s than GEMMs timed alone.
  const passTimed = (p) => p.timing === "TIMING_MODE_PASS" || p.timing === 2;
  const loadScale = {
    domain: ["quiet", "contended", "unknown"],
    range: ["circle", "triangle-up", "square"],
  };
  const benchPaths = new Set(["pp", "tg", "pp+tg"]);

  /// Where a profile's tok/s come from: qgate's own jobs, or a tool's imported figures.
  function sourceOf(points) {
    if (points.some((p) => num(p.job_id) > 0)) return "qgate";
    if (points.length && points.every((p) => benchPaths.has(p.path))) return "llama-bench";
    if (points.length && points.every((p) => /^mul_mat-m\d+-k\d+/.test(p.profile))) return "test-backend-ops";
    return "imported";
  }
  // Short enough for a panel's height; the page's note says more.
  const yTitles = {
    qgate: "tok/s (prefill of linear layers)",
    "llama-bench": "tok/s (imported: llama-bench avg_ts)",
    "test-backend-ops": "tok/s (imported: test-backend-ops n / time)",
    imported: "tok/s (imported)",
  };


  /// llama-bench's tests (pp512, tg128) are panels of their own: prompt processing and generation run
  /// at tok/s an order of magnitude apart. Other points share one panel ("").
  const panelOf = (s) => (benchPaths.has(s.path) ? `${s.path}${num(s.tokens) || ""}` : "");
  const panelTitle = (panel) => {
    const m = /^(pp\+tg|pp|tg)(\d*)$/.exec(panel);
    if (!m) return panel;
    const what = { pp: "prompt processing", tg: "generation", "pp+tg": "prompt and generation" }[m[1]];
    return `${panel}: ${what}${m[2] ? ` of ${m[2]} tokens` : ""} (own tok/s scale)`;
  };

  /// A series' name as the trend's legend, picker and tooltip show it: the weight type, the path where it
  /// says more than the type or the panel, the settings (llama-bench's n_batch, flash_attn, ...), and the
  /// GPU or host where a profile has more than one. `s` is a trend point or a change series.
  function seriesName(s, many = {}) {
    const parts = [];
    if (s.weight_type) parts.push(s.weight_type);
    if (s.path && s.path !== s.weight_type && !panelOf(s)) parts.push(s.path);
    let name = parts.join(" ");
    if (passTimed(s)) name += " (pass-timed)";
    if (s.settings) name = name ? `${name} · ${s.settings}` : s.settings;
    if (!name) name = s.path || "all";
    if (many.gpu && s.gpu_name) name += ` on ${s.gpu_name}`;
    if (many.host && s.host) name += ` @ ${s.host}`;
    return name;
  }
  /// Which of the GPU and host vary among `points` (so the series' names say them).
  const variety = (points) => ({
    gpu: new Set(points.map((p) => p.gpu_name)).size > 1,
    host: new Set(points.map((p) => p.host)).size > 1,
  });

  /// The time window shown: the zoom when there is one, else every point with room at both ends, so
  /// no mark sits on the axis' edge.
  function timeDomain(times, zoom) {
    if (zoom && zoom.length === 2 && zoom[1] > zoom[0]) return zoom;
    if (!times.length) return undefined;
    const lo = Math.min(...times), hi = Math.max(...times);
    const pad = hi > lo ? (hi - lo) * 0.04 : 60e3;
    return [lo - pad, hi + pad];
  }

  /// tok/s trend of one profile: one point per trend point (median, min-max bar), coloured by series,
  /// shaped and filled by load; change points as dashed rules. llama-bench's pp and tg tests are panels
  /// with their own y scales. Along time the x axis zooms and pans (drag, wheel); its window is the
  /// `zoom` signal of the first panel. `changes` are {change, series} (a SeriesChange and its ChangeSeries).
  function trend(points, changes, along, opts = {}) {
    const many = variety(points);
    const yTitle = yTitles[sourceOf(points)];
    const rows = points.map((p) => ({
      t: num(p.started_unix_ms),
      build: p.build_name,
      series: seriesName(p, many),
      settings: p.settings || "",
      panel: panelOf(p),
      tokps: num(p.tokens_per_s),
      low: num(p.tokens_per_s_low),
      high: num(p.tokens_per_s_high),
      runs: p.runs,
      contended_runs: p.contended_runs,
      load: loadOf(p),
      job: num(p.job_id),
      backend: p.backend,
      gpu: p.gpu_name,
    }));
    // What a screen reader (and the browser test) reads for each point: its load first.
    for (const r of rows) r.describe = `load ${r.load}; series ${r.series}; build ${r.build}; tok/s ${r.tokps}`;
    const order = [...new Set(rows.slice().sort((a, b) => a.t - b.t).map((r) => r.build))];
    const seriesOrder = [...new Set(rows.map((r) => r.series))].sort();
    const panels = [...new Set(rows.map((r) => r.panel))].sort();
    const domain = along === "build" ? undefined : timeDomain(rows.map((r) => r.t), opts.zoom);
    // Vega-Lite's own time labels read ".500" over a span of seconds; name the format by the span.
    const span = domain ? domain[1] - domain[0] : 0;
    const timeFormat = span < 3600e3 ? "%H:%M:%S" : span < 3 * 86400e3 ? "%b %d %H:%M" : "%Y-%m-%d";
    const x = along === "build"
      ? { field: "build", type: "ordinal", sort: order, title: "build (oldest first)", axis: { labelAngle: -40, labelLimit: 120 } }
      : { field: "t", type: "temporal", title: "time (local)", scale: { domain, nice: false },
        axis: { format: timeFormat, labelOverlap: true, tickCount: Math.max(2, Math.floor((opts.width || 600) / 110)) } };
    const rules = changes.map(({ change: c, series: s }) => ({
      t: num(c.started_unix_ms),
      build: c.build_name,
      panel: panelOf(s),
      series: seriesName(s, many),
      label: `${c.previous_build_name} -> ${c.build_name}: x${Number(c.ratio).toFixed(3)}`,
      ratio: num(c.ratio),
    }));
    const ruleX = along === "build" ? { field: "build", type: "ordinal", sort: order } : { field: "t", type: "temporal" };
    const plotWidth = opts.width || width;
    const longest = Math.max(4, ...seriesOrder.map((n) => n.length));
    const legendColumns = Math.max(1, Math.floor(((opts.width || 600) + 60) / Math.min(250, 40 + 7 * longest)));
    const color = {
      field: "series", type: "nominal", title: "series", sort: seriesOrder,
      scale: { domain: seriesOrder, scheme: seriesOrder.length > 10 ? "category20" : "tableau10" },
      // Every series named, however many: the legend wraps in columns below the chart.
      legend: { orient: "bottom", direction: "vertical", columns: legendColumns, symbolLimit: 0, labelLimit: 240 },
    };
    const panel = (name, i) => {
      const layers = [
        {
          name: `ranges_${i}`,
          data: { values: rows.filter((r) => r.panel === name) },
          mark: { type: "rule", opacity: 0.45, clip: true },
          encoding: { x, y: { field: "low", type: "quantitative" }, y2: { field: "high" }, color },
        },
        {
          name: `points_${i}`,
          data: { values: rows.filter((r) => r.panel === name) },
          mark: { type: "point", size: 70, strokeWidth: 1.6, clip: true },
          encoding: {
            x,
            y: { field: "tokps", type: "quantitative", title: yTitle, scale: { zero: false, padding: 8 } },
            color,
            shape: { field: "load", type: "nominal", title: "runs", scale: loadScale, legend: { orient: "bottom" } },
            fill: {
              condition: { test: "datum.load === 'quiet'", field: "series", type: "nominal", legend: null },
              value: "transparent",
            },
            description: { field: "describe" },
            tooltip: [
              { field: "build", title: "build" }, { field: "series" }, { field: "settings" },
              { field: "tokps", title: "tok/s (median)", format: ".1f" },
              { field: "low", title: "min", format: ".1f" }, { field: "high", title: "max", format: ".1f" },
              { field: "runs" }, { field: "contended_runs", title: "contended runs" }, { field: "load" },
              { field: "job" }, { field: "t", type: "temporal", title: "first run", format: "%Y-%m-%d %H:%M" },
            ],
          },
        },
      ];
      const panelRules = rules.filter((r) => r.panel === name);
      if (panelRules.length) {
        layers.push({
          name: `changes_${i}`,
          data: { values: panelRules },
          mark: { type: "rule", strokeDash: [6, 4], color: "#c62828", strokeWidth: 1.5, clip: true },
          encoding: { x: ruleX, tooltip: [{ field: "series" }, { field: "label", title: "change" }] },
        });
      }
      const view = { width: plotWidth, height: panels.length > 1 ? 220 : 280, layer: layers };
      if (name) view.title = { text: panelTitle(name), anchor: "start", fontSize: 12, fontWeight: "normal" };
      // Along time the first panel's x scale zooms and pans; the panels share it.
      if (along !== "build" && i === 0) layers[1].params = [{ name: "zoom", select: { type: "interval", encodings: ["x"] }, bind: "scales" }];
      return view;
    };
    const views = panels.map(panel);
    const top = { $schema: schema, config: { legend: { orient: "bottom" } }, usermeta: { panels, series: seriesOrder } };
    if (views.length === 1) return { ...top, ...views[0] };
    return { ...top, vconcat: views, resolve: { scale: { x: "shared", y: "independent", color: "shared" } } };
  }

  /// One point per pair (A / B), the verdict's interval as a band, 1 and the threshold as rules.
  function pairs(ab) {
    const rows = ab.pairs.map((p) => ({
      index: p.index, ratio: num(p.ratio), a: num(p.tokens_per_s_a), b: num(p.tokens_per_s_b),
      load: p.contended ? "contended" : "quiet",
    }));
    const v = ab.verdict || {};
    const band = num(v.ci_low) > 0 && num(v.ci_high) > 0 ? [{ lo: num(v.ci_low), hi: num(v.ci_high), ratio: num(v.ratio) }] : [];
    const threshold = 1 - num(ab.slowdown_threshold || 0.02);
    const layers = [];
    if (band.length) {
      layers.push({ data: { values: band }, mark: { type: "rect", color: "#4c78a8", opacity: 0.15 },
        encoding: { y: { field: "lo", type: "quantitative" }, y2: { field: "hi" } } });
      layers.push({ data: { values: band }, mark: { type: "rule", color: "#4c78a8" }, encoding: { y: { field: "ratio", type: "quantitative" } } });
    }
    layers.push({ data: { values: [{ y: 1 }] }, mark: { type: "rule", color: "#888" }, encoding: { y: { field: "y", type: "quantitative" } } });
    layers.push({ data: { values: [{ y: threshold }] }, mark: { type: "rule", color: "#c62828", strokeDash: [4, 4] },
      encoding: { y: { field: "y", type: "quantitative" } } });
    layers.push({
      data: { values: rows },
      mark: { type: "point", filled: true, size: 60 },
      encoding: {
        x: { field: "index", type: "quantitative", title: "pair", scale: { domain: [-0.5, Math.max(rows.length, 1) - 0.5], nice: false },
          axis: { values: rows.map((r) => r.index), format: "d", labelOverlap: true } },
        y: { field: "ratio", type: "quantitative", title: "tok/s A / tok/s B", scale: { zero: false } },
        shape: { field: "load", type: "nominal", title: "pair's runs", scale: { domain: ["quiet", "contended"], range: ["circle", "triangle-up"] } },
        // Same title as the shape's, so the two merge into one legend of coloured shapes.
        color: { field: "load", type: "nominal", title: "pair's runs", scale: { domain: ["quiet", "contended"], range: ["#4c78a8", "#e45756"] } },
        tooltip: [{ field: "index", title: "pair" }, { field: "ratio", format: ".4f" },
          { field: "a", title: "A tok/s", format: ".1f" }, { field: "b", title: "B tok/s", format: ".1f" }, { field: "load" }],
      },
    });
    return { $schema: "https://vega.github.io/schema/vega-lite/v5.json", width, height: 240, layer: layers };
  }

  /// The sequential looks the job reached: the ratio with its repeated interval at each.
  function looks(ab) {
    const rows = ab.looks.filter((l) => l.reached).sort((a, b) => a.look - b.look).map((l) => ({
      look: `look ${l.look} (${l.pairs} pairs)`, ratio: num(l.ratio),
      lo: l.bounded ? num(l.ci_low) : null, hi: l.bounded ? num(l.ci_high) : null,
      verdict: (l.verdict || "").replace("VERDICT_", ""), decision: l.decision,
    }));
    // One explicit order for every layer: with `sort: null` each layer keeps its own order, and their
    // union put an unbounded first look last.
    // An early look's interval can end past any sensible ratio (the CLI calls it unbounded past 1000):
    // the axis spans the ratios and the bounded ends, and a longer interval runs off its top.
    const unbounded = 1000;
    for (const r of rows) if (r.hi !== null && !(r.hi <= unbounded)) { r.unbounded = true; r.hiShown = null; } else r.hiShown = r.hi;
    const ends = rows.flatMap((r) => [r.ratio, r.lo, r.hiShown, 1]).filter((v) => v !== null && Number.isFinite(v));
    const top = Math.max(...ends), bottom = Math.min(...ends), room = (top - bottom) * 0.15 || 0.05;
    const yDomain = [Math.max(0, bottom - room), top + room];
    for (const r of rows) if (r.unbounded) r.hiShown = yDomain[1];
    const order = rows.map((r) => r.look);
    const x = { field: "look", type: "ordinal", title: null, sort: order, scale: { domain: order }, axis: { labelAngle: 0, labelLimit: 90 } };
    return {
      $schema: "https://vega.github.io/schema/vega-lite/v5.json", width, height: 200,
      layer: [
        { data: { values: [{ y: 1 }] }, mark: { type: "rule", color: "#888" }, encoding: { y: { field: "y", type: "quantitative" } } },
        { data: { values: rows.filter((r) => r.lo !== null) }, mark: { type: "rule", strokeWidth: 2, clip: true },
          encoding: { x, y: { field: "lo", type: "quantitative" }, y2: { field: "hiShown" }, color: { field: "verdict", type: "nominal", legend: null } } },
        { data: { values: rows }, mark: { type: "square", size: 90 },
          encoding: { x, y: { field: "ratio", type: "quantitative", title: "ratio [repeated 95% interval]", scale: { domain: yDomain, nice: false } },
            color: { field: "verdict", type: "nominal", scale: { domain: ["PASS", "FAIL", "INCONCLUSIVE"], range: ["#1a7f37", "#c62828", "#9a6700"] } },
            tooltip: [{ field: "look" }, { field: "ratio", format: ".4f" }, { field: "lo", format: ".4f" }, { field: "hi", format: ".4g" },
              { field: "verdict" }, { field: "decision" }] } },
      ],
    };
  }

  /// The parity matrix: one cell per weight type and shape, coloured by the worst case's
  /// max |diff| / tolerance over its paths and activation rows; a failed cell is outlined.
  function parityCells(cases) {
    const cells = new Map();
    for (const c of cases) {
      const shape = `${c.nt}x${c.od}x${c.k}`;
      const key = `${c.weight_type}|${shape}`;
      const diff = num(c.max_abs_diff);
      const tol = num(c.tolerance);
      const frac = num(c.worst_tolerance_fraction) ?? (diff !== null && tol ? diff / tol : null);
      const cell = cells.get(key) || { type: c.weight_type, shape, cases: 0, failed: 0, frac: null, diff: null, tol: null };
      cell.cases += 1;
      if (c.outcome !== "passed") cell.failed += 1;
      if (frac !== null && (cell.frac === null || frac > cell.frac)) { cell.frac = frac; cell.diff = diff; cell.tol = tol; }
      cells.set(key, cell);
    }
    return [...cells.values()].map((c) => ({ ...c, status: c.failed ? "failed" : "passed" }));
  }

  /// The parity matrix's colours by max |diff| / bound: pale to full green while a cell passes far
  /// under its bound, amber close to it, red only past it (a failing cell). Piecewise on a log scale.
  const parityColor = {
    type: "log", clamp: true,
    domain: [1e-4, 1e-2, 0.5, 1, 1.0001, 100],
    range: ["#eef7e6", "#b9dd9b", "#5aa845", "#e0a21b", "#e53935", "#7f0000"],
  };
  const parityFloor = 1e-4;  // a cell with no difference at all takes the palest colour

  function parity(cases, opts = {}) {
    const cells = parityCells(cases).map((c) => ({ ...c, shade: c.frac === null ? null : Math.max(c.frac, parityFloor) }));
    const shapes = [...new Set(cells.map((c) => c.shape))].sort((a, b) => {
      const pa = a.split("x").map(Number), pb = b.split("x").map(Number);
      return pa[0] - pb[0] || pa[1] - pb[1] || pa[2] - pb[2];
    });
    return {
      $schema: schema,
      width: Math.max(240, 90 * shapes.length), height: { step: 26 },
      data: { values: cells },
      encoding: {
        x: { field: "shape", type: "ordinal", sort: shapes, title: "shape (nt x od x k)", axis: { labelAngle: 0 } },
        y: { field: "type", type: "ordinal", title: "weight type" },
      },
      layer: [
        { mark: { type: "rect", stroke: "#fff", strokeWidth: 1 },
          encoding: {
            color: { field: "shade", type: "quantitative", title: ["max|diff| / bound", "(red: above 1, failing)"],
              scale: parityColor, legend: { values: [1e-4, 1e-2, 0.5, 1, 10, 100], format: ".0e", gradientLength: opts.legendLength || 160 } },
            stroke: { condition: { test: "datum.failed > 0", value: "#b00020" }, value: "#ffffff" },
            strokeWidth: { condition: { test: "datum.failed > 0", value: 3 }, value: 1 },
            tooltip: [{ field: "type" }, { field: "shape" }, { field: "status" }, { field: "diff", title: "max |diff|", format: ".3e" },
              { field: "tol", title: "bound (tolerance)", format: ".3e" }, { field: "frac", title: "|diff| / bound", format: ".3f" },
              { field: "cases" }, { field: "failed" }] } },
        { mark: { type: "text", fontSize: 10 },
          encoding: { text: { field: "frac", format: ".1e" },
            color: { condition: { test: "datum.frac > 1", value: "#fff" }, value: "#1d2330" } } },
      ],
    };
  }

  /// The co-tenant timeline: foreign SM %, SM clock, and throttle reasons per reading, one row each,
  /// on a shared time axis.
  function cotenant(timeline, panelWidth) {
    const t0 = timeline.readings.length ? Math.min(...timeline.readings.map((r) => num(r.t_unix_ms))) : 0;
    const readings = timeline.readings.map((r) => ({
      t: (num(r.t_unix_ms) - t0) / 1000, at: num(r.t_unix_ms), sm: num(r.foreign_sm_percent), clock: num(r.sm_clock_mhz), util: num(r.device_util_percent),
      arm: r.arm, pair: r.pair_index, processes: r.foreign_processes || "",
    }));
    const reasons = [];
    for (const r of timeline.readings)
      for (const why of r.throttle_reasons) reasons.push({ t: (num(r.t_unix_ms) - t0) / 1000, reason: why });
    const start = t0 ? new Date(t0).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "";
    const x = { field: "t", type: "quantitative", title: `seconds since the job's first reading (${start})`,
      scale: { zero: true, nice: false } };
    const tip = [{ field: "at", type: "temporal", format: "%H:%M:%S.%L", title: "time" }, { field: "t", title: "s", format: ".1f" },
      { field: "arm" }, { field: "pair" },
      { field: "sm", title: "foreign SM %" }, { field: "clock", title: "SM clock MHz" }, { field: "processes" }];
    return {
      $schema: "https://vega.github.io/schema/vega-lite/v5.json",
      vconcat: [
        { width: panelWidth, height: 110, data: { values: readings.filter((r) => r.sm !== null) },
          mark: { type: "point", filled: true, size: 22, color: "#e45756" },
          encoding: { x, y: { field: "sm", type: "quantitative", title: "foreign SM %", scale: { domain: [0, 100] } }, tooltip: tip } },
        { width: panelWidth, height: 110, data: { values: readings.filter((r) => r.clock !== null) },
          mark: { type: "square", size: 18, color: "#4c78a8" },
          encoding: { x, y: { field: "clock", type: "quantitative", title: "SM clock MHz", scale: { zero: false } }, tooltip: tip } },
        { width: panelWidth, height: { step: 18 }, data: { values: reasons },
          mark: { type: "tick", thickness: 2, color: "#9a6700" },
          encoding: { x, y: { field: "reason", type: "nominal", title: "throttle reasons" },
            tooltip: [{ field: "t", title: "s", format: ".1f" }, { field: "reason" }] } },
      ],
      resolve: { scale: { x: "shared" } },
    };
  }

  /// Two builds compared per series: A / B with the Welch interval, coloured by the daemon's verdict;
  /// 1 as a rule and the SAME band (1 +- margin) behind.
  function compare(rows, margin, opts = {}) {
    const data = rows.map((r) => ({
      series: r.label, ratio: num(r.ratio), lo: num(r.ci_low) || null, hi: num(r.ci_high) || null,
      verdict: r.verdict, a: num(r.tokens_per_s_a), b: num(r.tokens_per_s_b),
    }));
    const order = data.map((d) => d.series);
    const y = { field: "series", type: "nominal", sort: order, title: null, axis: { labelLimit: opts.labelLimit || 260 } };
    const xScale = { zero: false, padding: 10 };
    return {
      $schema: schema, width: opts.width || width, height: { step: 28 },
      layer: [
        { data: { values: [{ lo: 1 - margin, hi: 1 + margin }] }, mark: { type: "rect", color: "#1a7f37", opacity: 0.08 },
          encoding: { x: { field: "lo", type: "quantitative", scale: xScale }, x2: { field: "hi" } } },
        { data: { values: [{ x: 1 }] }, mark: { type: "rule", color: "#888" }, encoding: { x: { field: "x", type: "quantitative" } } },
        { name: "intervals", data: { values: data.filter((d) => d.lo !== null) }, mark: { type: "rule", strokeWidth: 2 },
          encoding: { y, x: { field: "lo", type: "quantitative" }, x2: { field: "hi" }, color: { field: "verdict", type: "nominal", legend: null } } },
        { name: "ratios", data: { values: data }, mark: { type: "point", filled: true, size: 80 },
          encoding: { y, x: { field: "ratio", type: "quantitative", title: "tok/s A / tok/s B (geometric means)", scale: xScale,
            axis: { tickCount: Math.max(3, Math.floor((opts.width || 500) / 80)), labelOverlap: true } },
            color: { field: "verdict", type: "nominal", title: "verdict",
              scale: { domain: ["SAME", "DIFFERENT", "UNKNOWN"], range: ["#1a7f37", "#c62828", "#9a6700"] }, legend: { orient: "bottom" } },
            tooltip: [{ field: "series" }, { field: "ratio", format: ".3f" }, { field: "lo", title: "95% low", format: ".3f" },
              { field: "hi", title: "95% high", format: ".3f" }, { field: "a", title: "A tok/s", format: ".1f" },
              { field: "b", title: "B tok/s", format: ".1f" }, { field: "verdict" }] } },
      ],
    };
  }

  return { trend, pairs, looks, parity, parityCells, cotenant, compare, loadOf, seriesName, variety, panelOf, sourceOf };
})();
