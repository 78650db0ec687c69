// Vega-Lite specifications of the dashboard's charts, built from the API's JSON. Pure functions: the
// page (app.js) fetches, picks and embeds. Every chart draws its data marks with a mark type of its
// own in its container, so a test can count them in the SVG.
"use strict";

const QgateCharts = (() => {
  const width = "container";
  // The API writes ids, times and counts as JSON numbers (docs/dashboard.md); a double outside
  // them may still be a string ("NaN", "Infinity"), and a field may be missing.
  const num = (v) => (v === undefined || v === null || v === "" ? null : Number(v));
  const loadOf = (p) => (!p.cotenant_known ? "unknown" : p.contended ? "contended" : "quiet");
  // A pass-timed point is a series of its own: whole passes give other tok/s than GEMMs timed alone.
  const passTimed = (p) => p.timing === "TIMING_MODE_PASS" || p.timing === 2;
  const loadScale = {
    domain: ["quiet", "contended", "unknown"],
    range: ["circle", "triangle-up", "square"],
  };

  /// tok/s trend of one profile: one point per trend point (median, min-max bar), coloured by series
  /// (weight type and path), shaped and filled by load; change points as dashed rules.
  function trend(points, changes, along) {
    // Imported results (no job) carry the tool's own figure: llama-bench's avg_ts is whole-model tok/s.
    const imported = points.length > 0 && points.every((p) => !num(p.job_id));
    const yTitle = imported ? "tok/s (imported: llama-bench avg_ts, whole model)" : "tok/s (prefill of the profile's linear layers)";
    const rows = points.map((p) => ({
      t: num(p.started_unix_ms),
      build: p.build_name,
      series: (p.weight_type ? p.weight_type + " " : "") + p.path + (passTimed(p) ? " (pass-timed)" : ""),
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
    const order = [...new Set(rows.slice().sort((a, b) => a.t - b.t).map((r) => r.build))];
    // Vega-Lite's own time labels read ".500" over a span of seconds; name the format by the span.
    const times = rows.map((r) => r.t);
    const span = times.length ? Math.max(...times) - Math.min(...times) : 0;
    const timeFormat = span < 3600e3 ? "%H:%M:%S" : span < 3 * 86400e3 ? "%b %d %H:%M" : "%Y-%m-%d";
    const x = along === "build"
      ? { field: "build", type: "ordinal", sort: order, title: "build (oldest first)", axis: { labelAngle: -40, labelLimit: 120 } }
      : { field: "t", type: "temporal", title: "time (local)", axis: { format: timeFormat, labelOverlap: true } };
    const rules = changes.map((c) => ({
      t: num(c.started_unix_ms),
      build: c.build_name,
      label: `${c.previous_build_name} -> ${c.build_name}: x${Number(c.ratio).toFixed(3)}`,
      ratio: num(c.ratio),
    }));
    const ruleX = along === "build" ? { field: "build", type: "ordinal", sort: order } : { field: "t", type: "temporal" };
    const layers = [
      {
        data: { values: rows },
        mark: { type: "rule", opacity: 0.45 },
        encoding: { x, y: { field: "low", type: "quantitative" }, y2: { field: "high" }, color: { field: "series", type: "nominal" } },
      },
      {
        data: { values: rows },
        mark: { type: "point", size: 70, strokeWidth: 1.6 },
        encoding: {
          x,
          y: { field: "tokps", type: "quantitative", title: yTitle, scale: { zero: false } },
          color: { field: "series", type: "nominal", title: "series" },
          shape: { field: "load", type: "nominal", title: "runs", scale: loadScale },
          fill: {
            condition: { test: "datum.load === 'quiet'", field: "series", type: "nominal", legend: null },
            value: "transparent",
          },
          tooltip: [
            { field: "build", title: "build" }, { field: "series" }, { field: "tokps", title: "tok/s (median)", format: ".1f" },
            { field: "low", title: "min", format: ".1f" }, { field: "high", title: "max", format: ".1f" },
            { field: "runs" }, { field: "contended_runs", title: "contended runs" }, { field: "load" },
            { field: "job" }, { field: "t", type: "temporal", title: "first run", format: "%Y-%m-%d %H:%M" },
          ],
        },
      },
    ];
    if (rules.length) {
      layers.push({
        data: { values: rules },
        mark: { type: "rule", strokeDash: [6, 4], color: "#c62828", strokeWidth: 1.5 },
        encoding: { x: ruleX, tooltip: [{ field: "label", title: "change" }] },
      });
    }
    return {
      $schema: "https://vega.github.io/schema/vega-lite/v5.json",
      width, height: 280, layer: layers,
      resolve: { scale: { color: "shared" } },
      config: { legend: { orient: "right" } },
    };
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
    const rows = ab.looks.filter((l) => l.reached).map((l) => ({
      look: `look ${l.look} (${l.pairs} pairs)`, ratio: num(l.ratio),
      lo: l.bounded ? num(l.ci_low) : null, hi: l.bounded ? num(l.ci_high) : null,
      verdict: (l.verdict || "").replace("VERDICT_", ""), decision: l.decision,
    }));
    const x = { field: "look", type: "ordinal", title: null, sort: null, axis: { labelAngle: 0 } };
    return {
      $schema: "https://vega.github.io/schema/vega-lite/v5.json", width, height: 200,
      layer: [
        { data: { values: [{ y: 1 }] }, mark: { type: "rule", color: "#888" }, encoding: { y: { field: "y", type: "quantitative" } } },
        { data: { values: rows.filter((r) => r.lo !== null) }, mark: { type: "rule", strokeWidth: 2 },
          encoding: { x, y: { field: "lo", type: "quantitative" }, y2: { field: "hi" }, color: { field: "verdict", type: "nominal", legend: null } } },
        { data: { values: rows }, mark: { type: "square", size: 90 },
          encoding: { x, y: { field: "ratio", type: "quantitative", title: "ratio [repeated 95% interval]", scale: { zero: false } },
            color: { field: "verdict", type: "nominal", scale: { domain: ["PASS", "FAIL", "INCONCLUSIVE"], range: ["#1a7f37", "#c62828", "#9a6700"] } },
            tooltip: [{ field: "look" }, { field: "ratio", format: ".4f" }, { field: "lo", format: ".4f" }, { field: "hi", format: ".4f" },
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

  function parity(cases) {
    const cells = parityCells(cases);
    const shapes = [...new Set(cells.map((c) => c.shape))].sort((a, b) => {
      const pa = a.split("x").map(Number), pb = b.split("x").map(Number);
      return pa[0] - pb[0] || pa[1] - pb[1] || pa[2] - pb[2];
    });
    return {
      $schema: "https://vega.github.io/schema/vega-lite/v5.json",
      width: Math.max(240, 90 * shapes.length), height: { step: 26 },
      data: { values: cells },
      encoding: {
        x: { field: "shape", type: "ordinal", sort: shapes, title: "shape (nt x od x k)", axis: { labelAngle: 0 } },
        y: { field: "type", type: "ordinal", title: "weight type" },
      },
      layer: [
        { mark: { type: "rect", stroke: "#fff", strokeWidth: 1 },
          encoding: {
            color: { field: "frac", type: "quantitative", title: "max|diff| / tolerance",
              scale: { type: "log", domain: [1e-4, 1], clamp: true, scheme: "yelloworangered" } },
            stroke: { condition: { test: "datum.failed > 0", value: "#b00020" }, value: "#ffffff" },
            strokeWidth: { condition: { test: "datum.failed > 0", value: 3 }, value: 1 },
            tooltip: [{ field: "type" }, { field: "shape" }, { field: "diff", title: "max |diff|", format: ".3e" },
              { field: "tol", title: "tolerance", format: ".3e" }, { field: "frac", title: "|diff| / tolerance", format: ".3f" },
              { field: "cases" }, { field: "failed" }] } },
        { mark: { type: "text", fontSize: 10 },
          encoding: { text: { field: "frac", format: ".1e" },
            color: { condition: { test: "datum.frac > 0.1", value: "#fff" }, value: "#222" } } },
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

  return { trend, pairs, looks, parity, parityCells, cotenant, loadOf };
})();
