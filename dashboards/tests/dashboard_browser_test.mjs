// Drives Debian's Chromium (headless, through puppeteer-core; npm never downloads a browser here)
// over the dashboard at URL and checks what it drew against what the qgate CLI says about the same
// daemon: a row per job, a trend point per trend point of each profile (quiet ones filled, contended
// ones drawn contended, the rest hollow), a dashed rule per change point, a legend entry per series,
// the axis naming the tool, pp and tg in panels of their own; a permalink with a series and a zoom
// window reloaded; then clicks the gate and checks its A/B view (a point per pair, a square per reached
// look, the looks in order), its parity matrix (a cell per type and shape, passing cells not red) and its
// co-tenant timeline; the regressions page against `qgate regressions` (with each slowdown's slow builds and
// transient label), the compare page against
// `qgate compare`; the hosts: a Host column with the host that ran each job (this machine's, as the
// daemon records it), the devices page against `qgate device`, and the host filter (a host that ran
// nothing empties the jobs, trend, regressions, compare and devices; this machine's brings back what
// `qgate --host` has); and at phone width (390 px) that no page is wider than the window. Screenshots go
// to ARTIFACTS, at desktop width and as phone-*.png. With QGATE_SNAPSHOT=1 the URL is a snapshot opened
// from disk (which holds every host's answers only: its host filter is off).
// Usage: node dashboard_browser_test.mjs URL ARTIFACTS
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";

const [url, artifacts] = process.argv.slice(2);
const require = createRequire(path.resolve(process.env.QGATE_DASHBOARD_NPM_DIR, "package.json"));
const puppeteer = require("puppeteer-core");
const cli = process.env.QGATE_CLI;
const snapshot = process.env.QGATE_SNAPSHOT === "1";
mkdirSync(artifacts, { recursive: true });

let failures = 0;
function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures += 1;
}
function equal(actual, expected, what) {
  check(actual === expected, `${what}: ${actual}${actual === expected ? "" : ` (expected ${expected})`}`);
}
const qgate = (...args) => JSON.parse(execFileSync(cli, ["--json", ...args], { encoding: "utf8" }));
/// `qgate compare A B`, or null when the CLI refuses it (exit 3: nothing comparable).
const qgateCompare = (a, b) => {
  try {
    return qgate("compare", a, b).compare;
  } catch (e) {
    if (e.status === 3) return null;
    throw e;
  }
};
// As the CLI writes them (client/src/format.cpp).
const ratioText = (r) => (!Number(r) ? "-" : Number(r).toFixed(3));
const intervalText = (lo, hi) => (!Number(lo) && !Number(hi) ? "-"
  : !(Number(hi) <= 1000) ? `[${Number(lo).toFixed(3)}, unbounded]` : `[${Number(lo).toFixed(3)}, ${Number(hi).toFixed(3)}]`);
/// An "rgb(r, g, b)" or "#rrggbb" colour is red when red dominates: what a failing cell may be, and a
/// passing one may not.
function isRed(color) {
  let rgb = /rgba?\((\d+),\s*(\d+),\s*(\d+)/.exec(color || "");
  if (!rgb && /^#[0-9a-f]{6}$/i.test(color || "")) rgb = [0, ...[1, 3, 5].map((i) => parseInt(color.slice(i, i + 2), 16))];
  if (!rgb) return false;
  const [r, g, b] = rgb.slice(1).map(Number);
  return r > 110 && r > 1.8 * g && r > 1.8 * b;
}

const profileDir = process.env.QGATE_PROFILE_DIR;
rmSync(profileDir, { recursive: true, force: true });
const browser = await puppeteer.launch({
  executablePath: process.env.QGATE_CHROMIUM,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", `--user-data-dir=${profileDir}`],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 900 });
  const problems = [];
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  // Nothing may be fetched from anywhere but the dashboard itself: it must work offline.
  const origin = snapshot ? "file://" : new URL(url).origin;
  const outside = [];
  const apiRequests = [];  // the API requests the page made (path?query), for the host filter's checks
  page.on("request", (r) => {
    if (!r.url().startsWith(origin) && !r.url().startsWith("data:")) outside.push(r.url());
    else if (!snapshot && new URL(r.url()).pathname.startsWith("/api/")) apiRequests.push(new URL(r.url()));
  });

  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("body[data-ready]", { timeout: 30000 });
  equal(await page.$eval("body", (b) => b.dataset.ready), "1", "the page loaded its data");
  await page.screenshot({ path: path.join(artifacts, "overview.png"), fullPage: true });

  // --- Jobs ---
  const jobs = qgate("jobs", "--limit", "50").jobs;
  equal(await page.$$eval("#jobs tbody tr", (rows) => rows.length), jobs.length, "job rows");
  const shownVerdicts = await page.$$eval("#jobs tbody tr td:nth-child(6)", (tds) => tds.map((t) => t.textContent));
  equal(shownVerdicts.join(","), jobs.map((j) => (j.verdict ? j.verdict.verdict.replace("VERDICT_", "") : "")).join(","),
    "verdicts in the job rows");
  // The Host column: the host whose daemon claimed each job, as `qgate jobs` has it; every job here ran
  // on this machine's daemon, which records the machine's host name (gethostname, as os.hostname()).
  const machine = os.hostname();
  const hostColumn = (await page.$$eval("#jobs thead th", (th) => th.map((t) => t.textContent))).indexOf("Host") + 1;
  check(hostColumn > 0, `the jobs table has a Host column (column ${hostColumn})`);
  const shownHosts = await page.$$eval(`#jobs tbody tr td:nth-child(${hostColumn || 1})`, (tds) => tds.map((t) => t.textContent));
  equal(shownHosts.join(","), jobs.map((j) => j.host || "-").join(","), "hosts in the job rows, as `qgate jobs` has them");
  const finishedJobs = jobs.filter((j) => j.state === "JOB_STATE_DONE");
  check(finishedJobs.length > 0 && finishedJobs.every((j) => shownHosts[jobs.indexOf(j)] === machine),
    `the Host of every finished job (${finishedJobs.length}) is this machine's, ${machine}`);
  const hostOptions = await page.$$eval("#host-filter option", (o) => o.map((x) => x.value));
  equal(hostOptions.join(","), `,${machine}`, "the host filter offers all hosts and this machine's");
  equal(await page.$eval("#host-filter", (s) => s.disabled), snapshot, `the host filter is ${snapshot ? "off in a snapshot" : "on"}`);

  // --- Trend: every profile the page offers ---
  const symbols = (sel, name) => page.$$eval(`${sel} g.mark-symbol.role-mark${name ? "." + name : ""} path`, (p) => p.length);
  const profiles = await page.$$eval("#trend-profile option", (o) => o.map((x) => x.value));
  check(profiles.length >= 2, `profiles offered: ${profiles.join(", ")}`);
  let quietSeen = 0, hollowSeen = 0, changesSeen = 0, contendedSeen = 0, panelsSeen = 0;
  for (const profile of profiles) {
    await page.select("#trend-profile", profile);
    await page.waitForFunction((p) => {
      const el = document.getElementById("trend-chart");
      return el.dataset.profile === p && el.dataset.rendered === "1";
    }, { timeout: 20000 }, profile);
    const expected = qgate("trend", "--profile", profile, "--include-contended", "--since", "3650d").points;
    const drawn = await symbols("#trend-chart");
    equal(drawn, expected.length, `trend points of ${profile}`);
    const quiet = expected.filter((p) => p.cotenant_known && !p.contended).length;
    const filled = await page.$$eval("#trend-chart g.mark-symbol.role-mark path",
      (ps) => ps.filter((p) => { const f = p.getAttribute("fill"); return f && f !== "transparent" && f !== "none"; }).length);
    equal(filled, quiet, `filled (quiet) trend points of ${profile}`);
    quietSeen += quiet;
    hollowSeen += drawn - filled;
    const changes = qgate("trend", "--profile", profile, "--changes", "--since", "3650d");
    const expectedChanges = (changes.changes.series || [])
      .filter((s) => s.profile === profile).reduce((n, s) => n + (s.changes || []).length, 0);
    equal(await page.$$eval("#trend-chart g.mark-rule.role-mark line", (l) => l.filter((x) => /changes_/.test(x.parentNode.getAttribute("class"))).length),
      expectedChanges, `change-point rules of ${profile}`);
    changesSeen += expectedChanges;
    // A point is as loaded as its worst runs: any contended run draws it contended (docs/trends.md).
    const contended = expected.filter((p) => p.contended || p.contended_runs > 0).length;
    equal(await page.$$eval("#trend-chart g.mark-symbol.role-mark path", (ps) => ps.filter((p) => /^load contended/.test(p.getAttribute("aria-label") || "")).length),
      contended, `trend points of ${profile} drawn contended`);
    contendedSeen += contended;
    // Every series in the legend, each named once (no "q4_0 q4_0"), with the names the page gives them.
    const names = await page.evaluate((pts) => { const many = QgateCharts.variety(pts); return [...new Set(pts.map((p) => QgateCharts.seriesName(p, many)))]; }, expected);
    const legend = await page.$$eval("#trend-chart g.role-legend-label text", (t) => t.map((x) => x.textContent));
    const legendSeries = legend.filter((t) => !["quiet", "contended", "unknown"].includes(t));
    equal(legendSeries.length, names.length, `series in the legend of ${profile}`);
    check(names.every((n) => legendSeries.includes(n)), `the legend of ${profile} names every series`);
    check(!names.some((n) => /^(\S+) \1\b/.test(n)), `no doubled series name in ${profile} (${names.slice(0, 3).join(", ")}, ...)`);
    const yTitles = await page.$$eval("#trend-chart g.role-axis-title text", (t) => t.map((x) => x.textContent).filter((x) => /tok\/s/.test(x)));
    const imported = expected.every((p) => !p.job_id);
    const tool = !imported ? "prefill" : expected.every((p) => ["pp", "tg", "pp+tg"].includes(p.path)) ? "llama-bench"
      : expected.every((p) => /^mul_mat-/.test(p.profile)) ? "test-backend-ops" : "imported";
    check(yTitles.length > 0 && yTitles.every((t) => t.includes(tool)), `the tok/s axis of ${profile} names ${tool}: ${yTitles[0]}`);
    const tests = new Set(expected.filter((p) => ["pp", "tg", "pp+tg"].includes(p.path)).map((p) => `${p.path}${p.tokens}`));
    if (tests.size > 1) {
      equal(yTitles.length, tests.size, `tok/s axes of ${profile}, one per llama-bench test (pp and tg apart)`);
      const titles = await page.$$eval("#trend-chart g.role-title text", (t) => t.map((x) => x.textContent).join(" | "));
      check([...tests].every((t) => titles.includes(t)) && titles.includes("own tok/s scale"), `panel titles of ${profile}: ${titles}`);
      panelsSeen += 1;
    }
    // Along time the window leaves room at both ends: no point sits on the axis' edge.
    const domain = (await page.$eval("#trend-chart", (e) => e.dataset.xDomain)).split("~").map(Number);
    const times = expected.map((p) => p.started_unix_ms);
    const margin = (domain[1] - domain[0]) * 0.01;
    check(domain.length === 2 && Math.min(...times) > domain[0] + margin && Math.max(...times) < domain[1] - margin,
      `the time axis of ${profile} has room around its points`);
    await page.screenshot({ path: path.join(artifacts, `trend-${profile.replace(/[^A-Za-z0-9_.-]+/g, "_")}.png`), fullPage: false,
      clip: await (await page.$("#trend-section")).boundingBox() });
  }
  check(quietSeen > 0 && hollowSeen > 0, `quiet (${quietSeen}) and contended or unknown (${hollowSeen}) points both drawn`);
  check(changesSeen > 0, `change points drawn: ${changesSeen}`);
  check(contendedSeen > 0, `contended points drawn: ${contendedSeen}`);
  check(panelsSeen > 0, `a profile with llama-bench's pp and tg drawn in panels: ${panelsSeen}`);
  check(profiles.length >= 3, `qgate's and imported profiles (llama-bench, test-backend-ops) offered: ${profiles.length}`);

  // A point with unknown-load and contended runs is drawn contended, whatever its other runs were.
  const mixed = await page.evaluate(async () => {
    const div = document.createElement("div");
    div.style.width = "500px";
    document.body.appendChild(div);
    const point = { profile: "p", path: "mmq", weight_type: "q4_0", build_name: "b", started_unix_ms: Date.now(), tokens_per_s: 100,
      tokens_per_s_low: 99, tokens_per_s_high: 101, runs: 3, contended_runs: 1, contended: true, cotenant_known: false, job_id: 1 };
    await vegaEmbed(div, QgateCharts.trend([point], [], "time", { width: 400 }), { renderer: "svg", actions: false });
    const path = div.querySelector("g.mark-symbol.role-mark path");
    const out = { label: path.getAttribute("aria-label"), fill: path.getAttribute("fill"), d: path.getAttribute("d") };
    div.remove();
    return out;
  });
  check(/^load contended/.test(mixed.label) && mixed.fill === "transparent" && !/A/.test(mixed.d),
    `a point with unknown-load and contended runs is drawn contended (a hollow triangle): ${mixed.label}`);
  await page.select("#trend-x", "build");
  await page.waitForFunction(() => document.getElementById("trend-chart").dataset.rendered === "1");
  check((await symbols("#trend-chart")) > 0, "the trend along builds draws too");

  // --- A permalink: the llama-bench profile, one series, a zoom window; reloaded, the same view ---
  const allPoints = profiles.flatMap((p) => qgate("trend", "--profile", p, "--include-contended", "--since", "3650d").points);
  const bench = allPoints.filter((p) => p.path === "tg");
  check(bench.length > 0, "llama-bench's tg points are in the trend");
  const benchProfile = bench[0].profile;
  const benchPoints = allPoints.filter((p) => p.profile === benchProfile);
  const benchNames = await page.evaluate((pts) => { const many = QgateCharts.variety(pts); return pts.map((p) => QgateCharts.seriesName(p, many)); }, benchPoints);
  const pickedSeries = benchNames[benchPoints.indexOf(bench[0])];
  const picked = benchPoints.filter((p, i) => benchNames[i] === pickedSeries);
  const pickedTimes = picked.map((p) => p.started_unix_ms).sort((a, b) => a - b);
  const zoom = [pickedTimes[2] - 1000, pickedTimes[pickedTimes.length - 3] + 1000];
  const inWindow = picked.filter((p) => p.started_unix_ms >= zoom[0] && p.started_unix_ms <= zoom[1]).length;
  const permalink = `${url}#page=trends&profile=${encodeURIComponent(benchProfile)}&series=${encodeURIComponent(pickedSeries)}&zoom=${zoom.join("~")}`;
  const checkPermalinkView = async (when) => {
    await page.waitForSelector("body[data-ready]", { timeout: 30000 });
    // The view drawn for this URL (a fragment-only navigation redraws after its hashchange); if it never
    // comes, the checks below say what is shown instead.
    await page.waitForFunction((p, z) => {
      const el = document.getElementById("trend-chart");
      return el.dataset.rendered === "1" && el.dataset.profile === p && el.dataset.zoom === z;
    }, { timeout: 20000 }, benchProfile, zoom.join("~")).catch(() => {});
    equal(await page.$eval("#trend-profile", (s) => s.value), benchProfile, `${when}: the profile`);
    equal(await page.$eval("#trend-chart", (e) => e.dataset.zoom), zoom.join("~"), `${when}: the zoom window`);
    equal(await page.$eval("#trend-chart", (e) => e.dataset.xDomain), zoom.join("~"), `${when}: the time axis shows the window`);
    equal(await page.$$eval("#series-list input:checked", (b) => b.map((x) => x.value).join("|")), pickedSeries, `${when}: the series picked`);
    equal(await symbols("#trend-chart"), picked.length, `${when}: points of the picked series (${inWindow} in the window)`);
    const visible = await page.$$eval("#trend-chart g.mark-symbol.role-mark path", (ps) => ps.filter((p) => {
      const r = p.getBoundingClientRect();
      return r.width > 0 && document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === p;
    }).length);
    check(visible <= inWindow, `${when}: points outside the window are not drawn over the axes (${visible} visible)`);
  };
  await page.goto(permalink, { waitUntil: "load" });
  await checkPermalinkView("a permalink opened");
  await page.reload({ waitUntil: "load" });
  await checkPermalinkView("the permalink reloaded");
  await page.screenshot({ path: path.join(artifacts, "permalink-trend.png"), clip: await (await page.$("#trend-section")).boundingBox() });
  // A permalink with a weight type: that type's points only, after a reload too.
  const gemmPoints = allPoints.filter((p) => /^mul_mat-/.test(p.profile));
  const gemmType = gemmPoints.length ? gemmPoints[0].weight_type : "";
  check(Boolean(gemmType), `test-backend-ops points carry a weight type (${gemmType})`);
  await page.goto(`${url}#page=trends&profile=${encodeURIComponent(gemmPoints[0].profile)}&type=${encodeURIComponent(gemmType)}`, { waitUntil: "load" });
  for (const when of ["a permalink with a type opened", "the permalink with a type reloaded"]) {
    if (when.includes("reloaded")) await page.reload({ waitUntil: "load" });
    await page.waitForSelector("body[data-ready]", { timeout: 30000 });
    await page.waitForFunction((t) => {
      const el = document.getElementById("trend-chart");
      return el.dataset.rendered === "1" && el.dataset.type === t;
    }, { timeout: 20000 }, gemmType).catch(() => {});
    equal(await page.$eval("#trend-type", (s) => s.value), gemmType, `${when}: the type`);
    equal(await symbols("#trend-chart"), gemmPoints.filter((p) => p.weight_type === gemmType).length, `${when}: the type's points`);
  }
  await page.goto(permalink, { waitUntil: "load" });
  await checkPermalinkView("the permalink opened again");
  // Zooming with the wheel writes the new window into the URL.
  const box = await (await page.$("#trend-chart svg")).boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + 100);
  await page.mouse.wheel({ deltaY: -300 });
  await page.waitForFunction((z) => document.getElementById("trend-chart").dataset.zoom !== z, { timeout: 5000 }, zoom.join("~")).catch(() => {});
  const zoomed = await page.$eval("#trend-chart", (e) => e.dataset.zoom);
  check(zoomed !== zoom.join("~") && (await page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get("zoom"))) === zoomed,
    `zooming writes the window into the URL (${zoomed})`);
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("body[data-ready]", { timeout: 30000 });

  // --- The gate's A/B view ---
  const gate = jobs.find((j) => j.spec && j.spec.kind === "JOB_KIND_GATE");
  check(Boolean(gate), "a gate job is listed");
  await page.click(`#jobs tbody tr[data-job-id="${gate.id}"]`);
  await page.waitForSelector(`#job-section[data-job-id="${gate.id}"]`, { timeout: 20000 });
  check(await page.$eval("#job-section", (s) => !s.hidden), "clicking the gate opened its A/B view");
  const shown = qgate("show", String(gate.id)).job;
  const v = shown.verdict;
  equal(await symbols("#pairs-chart"), v.pairs, "A/B pair points");
  const looks = (() => { // the planned looks for the gate's 4..10 pair budget, halving down from the budget
    const out = [];
    for (let n = 10; n >= 4; n = Math.ceil(n / 2)) { out.unshift(n); if (n === Math.ceil(n / 2)) break; }
    return out.filter((n, i, a) => a.indexOf(n) === i);
  })();
  equal(await symbols("#looks-chart"), looks.filter((n) => n <= v.pairs).length, "reached sequential looks");
  equal(await page.$$eval("#looks-table tbody tr", (r) => r.length), looks.length, "planned looks in the table");
  equal(await page.$$eval("#pairs-chart g.mark-rect.role-mark path", (r) => r.length), 1, "the verdict's interval band");

  // Every API answer is an envelope with the data under its key (docs/dashboard.md).
  const parityAnswer = (snapshot
    ? await page.evaluate((id) => window.QGATE_SNAPSHOT[`/api/jobs/${id}/parity`], gate.id)
    : await page.evaluate(async (id) => (await fetch(`/api/jobs/${id}/parity`)).json(), gate.id)).parity;
  equal(parityAnswer.cases.length, v.parity_passed + v.parity_failed, "parity cases behind the matrix (the verdict's count)");
  const cells = new Set(parityAnswer.cases.map((c) => `${c.weight_type}|${c.nt}x${c.od}x${c.k}`)).size;
  equal(await page.$$eval("#parity-chart g.mark-rect.role-mark path", (r) => r.length), cells, "parity matrix cells (type x shape)");
  equal(await page.$$eval("#parity-chart g.mark-text.role-mark text", (r) => r.length), cells, "parity cell labels");
  // Passing cells read as passing: red only past the bound.
  const parityFills = await page.$$eval("#parity-chart g.mark-rect.role-mark path", (r) => r.map((p) => p.getAttribute("fill")));
  const failedCells = new Set(parityAnswer.cases.filter((c) => c.outcome !== "passed").map((c) => `${c.weight_type}|${c.nt}x${c.od}x${c.k}`)).size;
  equal(parityFills.filter(isRed).length, failedCells, `red parity cells (failing ones: ${failedCells})`);
  const shade = async (f) => page.$eval("#parity-chart", (e, x) => e.vegaView.scale("color")(x), f);
  const at024 = await shade(0.24), at099 = await shade(0.99), at15 = await shade(1.5);
  check(!isRed(at024) && !isRed(at099), `a parity cell at 0.24 (${at024}) or 0.99 (${at099}) of its bound is not red`);
  check(isRed(at15), `a parity cell at 1.5 of its bound (failing) is red: ${at15}`);
  // The looks in their order: 1, 2, 3, 4.
  const lookLabels = await page.$$eval("#looks-chart g.role-axis-label text", (t) => t.map((x) => x.textContent).filter((x) => /^look /.test(x)));
  const lookNumbers = lookLabels.map((l) => Number(/^look (\d+)/.exec(l)[1]));
  equal(lookNumbers.join(","), lookNumbers.map((_, i) => i + 1).join(","), "the looks along the axis, in order");
  // Four looks, the first not yet bounded (no interval to draw): still 1, 2, 3, 4 along the axis.
  const fourLooks = await page.evaluate(async () => {
    const div = document.createElement("div");
    div.style.width = "500px";
    document.body.appendChild(div);
    const look = (n, bounded) => ({ look: n, pairs: 4 * n, reached: true, bounded, ratio: 0.97, ci_low: bounded ? 0.9 : 0,
      ci_high: bounded ? 1.05 : 0, verdict: "VERDICT_INCONCLUSIVE", decision: "continue" });
    await vegaEmbed(div, QgateCharts.looks({ looks: [look(4, true), look(1, false), look(3, true), look(2, true)] }),
      { renderer: "svg", actions: false });
    const labels = [...div.querySelectorAll("g.role-axis-label text")].map((t) => t.textContent).filter((t) => /^look /.test(t));
    div.remove();
    return labels.map((l) => /^look (\d+)/.exec(l)[1]).join(",");
  });
  equal(fourLooks, "1,2,3,4", "four looks, the first unbounded, along the axis");

  const timeline = (snapshot
    ? await page.evaluate((id) => window.QGATE_SNAPSHOT[`/api/jobs/${id}/cotenant`], gate.id)
    : await page.evaluate(async (id) => (await fetch(`/api/jobs/${id}/cotenant`)).json(), gate.id)).cotenant;
  const withSm = timeline.readings.filter((r) => r.foreign_sm_percent !== undefined).length;
  const withClock = timeline.readings.filter((r) => r.sm_clock_mhz !== undefined).length;
  const reasons = timeline.readings.reduce((n, r) => n + r.throttle_reasons.length, 0);
  check(withSm > 0 && reasons > 0, `the gate's runs were sampled (${withSm} readings, ${reasons} throttle reasons)`);
  equal(await symbols("#cotenant-chart"), withSm + withClock, "co-tenant readings (foreign SM % and clock)");
  equal(await page.$$eval("#cotenant-chart g.mark-rect.role-mark path", (r) => r.length), reasons, "throttle-reason ticks");

  for (const id of ["pairs-chart", "looks-chart", "parity-chart", "cotenant-chart"]) {
    const points = await page.$eval(`#${id}`, (e) => e.dataset.points);
    check(Number(points) >= 0, `${id} says it drew ${points} data marks`);
  }
  await page.screenshot({ path: path.join(artifacts, "job-ab.png"), fullPage: true });
  for (const id of ["pairs-chart", "looks-chart", "parity-chart", "cotenant-chart"])
    await (await page.$(`#${id}`)).screenshot({ path: path.join(artifacts, `${id}.png`) });

  // An A/B job under a co-tenant: its pairs are drawn as contended.
  const busy = jobs.find((j) => j.build && j.build.metadata.name === "mmq-busy");
  if (busy) {
    await page.click(`#jobs tbody tr[data-job-id="${busy.id}"]`);
    await page.waitForSelector(`#job-section[data-job-id="${busy.id}"]`, { timeout: 20000 });
    equal(await symbols("#pairs-chart"), busy.verdict.pairs, "pairs of the job under a co-tenant");
    await page.screenshot({ path: path.join(artifacts, "job-contended.png"), fullPage: true });
  } else {
    check(false, "the job under a co-tenant is listed");
  }

  // The parity job: its matrix, and no A/B (no pair points, no looks listed).
  const parityJob = jobs.find((j) => j.spec && j.spec.kind === "JOB_KIND_PARITY");
  if (parityJob) {
    await page.click(`#jobs tbody tr[data-job-id="${parityJob.id}"]`);
    await page.waitForSelector(`#job-section[data-job-id="${parityJob.id}"]`, { timeout: 20000 });
    equal(await symbols("#pairs-chart"), 0, "pair points of the parity job");
    equal(await page.$$eval("#looks-table tbody tr", (r) => r.length), 0, "looks listed for the parity job");
    check((await page.$$eval("#parity-chart g.mark-rect.role-mark path", (r) => r.length)) > 0, "the parity job's matrix is drawn");
    await page.screenshot({ path: path.join(artifacts, "job-parity.png"), fullPage: true });
  } else {
    check(false, "the parity job is listed");
  }

  // --- Regressions: the rows of `qgate regressions`, newest first ---
  await page.click('#pages a[data-page="regressions"]');
  await page.waitForFunction(() => document.getElementById("regressions-section").dataset.rows > "", { timeout: 20000 });
  const regressions = qgate("regressions", "--since", "3650d").regressions;
  const expectedRows = [];
  for (const s of regressions.series || []) {
    const changes = s.changes || [];
    changes.forEach((c, i) => {
      if (c.ratio >= 1 || c.fixes_previous) return;
      const next = changes[i + 1];
      expectedRows.push({ started: c.started_unix_ms, text: [c.previous_build_name, c.build_name, ratioText(c.ratio),
        intervalText(c.ci_low, c.ci_high), next && next.fixes_previous ? next.build_name : "not yet",
        c.transient ? `${c.slow_builds} transient` : String(c.slow_builds)].join(" | "), transient: c.transient });
    });
  }
  expectedRows.sort((a, b) => b.started - a.started);
  const shownRows = await page.$$eval("#regressions-table tbody tr", (trs) => trs.map((tr) => {
    const td = [...tr.children].map((c) => c.textContent);
    return [td[5], td[6], td[1], td[2], td[7].replace(/ \(.*$/, ""), td[8]].join(" | ");
  }));
  equal(shownRows.join("\n"), expectedRows.map((r) => r.text).join("\n"), "regressions rows, newest first, as `qgate regressions` has them (slow builds and transient label too)");
  check(expectedRows.some((r) => r.transient) && expectedRows.some((r) => !r.transient),
    `regressions include a transient slowdown (the 2-build dip) and a sustained one (${expectedRows.length} rows)`);
  const transientShown = await page.$eval("#regressions-summary", (p) => p.textContent);
  check(transientShown.includes(`${expectedRows.filter((r) => r.transient).length} of them transient`),
    `the summary counts the transient slowdowns: ${transientShown}`);
  const regressionSeries = await page.$$eval("#regressions-table tbody tr td:nth-child(4)", (tds) => tds.map((t) => t.textContent));
  const expectedSettings = (regressions.series || []).filter((s) => (s.changes || []).some((c) => c.ratio < 1 && !c.fixes_previous)).map((s) => s.settings);
  check(expectedSettings.every((x) => !x || regressionSeries.some((t) => t.includes(x))), `regressions name their series' settings: ${regressionSeries.join("; ")}`);
  check(expectedRows.length >= 2 && expectedRows.some((r) => !r.text.endsWith("not yet")),
    `regressions include a dip that recovered, with the build that fixed it (${expectedRows.length} rows)`);
  await page.screenshot({ path: path.join(artifacts, "regressions.png"), fullPage: true });

  // --- Compare: the ratio and verdict of `qgate compare` ---
  const compareShows = async (a, b, what) => {
    await page.waitForFunction((x) => document.getElementById("compare-section").dataset.compared === x, { timeout: 20000 }, `${a}|${b}`);
    const expected = qgateCompare(a, b);
    const shown = await page.$$eval("#compare-table tbody tr", (trs) => trs.map((tr) => ({ series: tr.dataset.series,
      cells: [...tr.children].map((c) => c.textContent) })));
    if (!expected) {
      equal(shown.length, 0, `${what}: nothing comparable, as the CLI says`);
      return 0;
    }
    equal(shown.length, expected.rows.length, `${what}: rows of \`qgate compare ${a} ${b}\``);
    for (const r of expected.rows) {
      const s = shown.find((x) => x.series === r.series);
      const verdict = r.comparison.replace("COMPARISON_", "").replace("UNSPECIFIED", "");
      equal(s ? [s.cells[1], s.cells[2], s.cells[3]].join(" ") : "missing", [ratioText(r.ratio), intervalText(r.ci_low, r.ci_high), verdict].join(" "),
        `${what}: ratio, interval and verdict of ${r.series.slice(0, 60)}...`);
      if (r.settings) equal(s ? s.cells[6] : "", r.settings, `${what}: settings shown`);
    }
    equal(await symbols("#compare-chart"), expected.rows.length, `${what}: a ratio drawn per series`);
    return expected.rows.length;
  };
  const gateBuild = gate.build.metadata.name, gateBaseline = gate.baseline.metadata.name;
  await page.goto(`${url}#page=compare&a=${encodeURIComponent(gateBuild)}&b=${encodeURIComponent(gateBaseline)}`, { waitUntil: "load" });
  check((await compareShows(gateBuild, gateBaseline, "the gate's two builds")) > 0, "the gate's builds are compared");
  check((await page.$$eval("#compare-table tbody tr td:last-child a", (a) => a.length)) > 0, "the job that paired them is linked");
  await page.screenshot({ path: path.join(artifacts, "compare.png"), fullPage: true });
  await page.reload({ waitUntil: "load" });
  await compareShows(gateBuild, gateBaseline, "the compare permalink reloaded");
  // A regression's builds, through its link.
  await page.click('#pages a[data-page="regressions"]');
  await page.waitForFunction(() => document.getElementById("regressions-section").dataset.rows > "", { timeout: 20000 });
  const [after, before] = await page.$eval("#regressions-table tbody tr", (tr) => [tr.dataset.build, tr.dataset.previous]);
  await page.click("#regressions-table tbody tr td:nth-child(5) a");
  await compareShows(after, before, "a regression's two builds");
  await page.screenshot({ path: path.join(artifacts, "compare-regression.png"), fullPage: true });

  // --- Devices: `qgate device`, each GPU with its host and when it was published ---
  const devices = qgate("device").devices;
  await page.goto(`${url}#page=devices`, { waitUntil: "load" });
  await page.waitForSelector("body[data-ready]", { timeout: 30000 });
  await page.waitForFunction(() => document.getElementById("devices-section").dataset.rows > "", { timeout: 20000 });
  const deviceRows = await page.$$eval("#devices-table tbody tr", (trs) => trs.map((tr) => [...tr.children].map((c) => c.textContent)));
  equal(deviceRows.map((r) => `${r[0]} ${r[1]} ${r[2]} ${r[10]}`).join(", "),
    devices.map((d) => `${d.host} ${d.device} ${d.name} ${d.published_unix_ms ? "published" : "live"}`).join(", "),
    "the devices page lists `qgate device`'s GPUs: host, GPU, name, published");
  check(devices.length > 0 && devices.every((d) => d.host === machine), `the daemon's GPUs are on this machine's host (${devices.length})`);
  await page.screenshot({ path: path.join(artifacts, "devices.png"), fullPage: true });

  // --- The host filter: a host that ran nothing, then this machine's ---
  const nowhere = "no-such-host.invalid";
  if (!snapshot) {
    const since = apiRequests.length;
    const askedFor = (route) => apiRequests.slice(since).some((u) => u.pathname === route && u.searchParams.get("host") === nowhere);
    await page.goto(`${url}#page=trends&host=${encodeURIComponent(nowhere)}`, { waitUntil: "load" });
    await page.waitForSelector("body[data-ready]", { timeout: 30000 });
    // The trend is drawn before the jobs are listed (app.js: renderTrends).
    await page.waitForFunction((h) => document.getElementById("jobs").dataset.host === h, { timeout: 20000 }, nowhere).catch(() => {});
    equal(await page.$eval("#host-filter", (s) => s.value), nowhere, "the host in the URL is the filter's");
    check(askedFor("/api/jobs") && askedFor("/api/trend") && askedFor("/api/changes"), `the jobs, trend and changes were asked for host=${nowhere}`);
    check(jobs.length > 0, `jobs to filter out (${jobs.length})`);
    equal(await page.$$eval("#jobs tbody tr", (r) => r.length), 0, `job rows on ${nowhere}`);
    const none = await page.$eval("#jobs-none", (p) => (p.hidden ? "" : p.textContent));
    check(none.includes(nowhere), `the jobs table says none ran there: ${none}`);
    equal(await symbols("#trend-chart"), 0, `trend points on ${nowhere}`);
    const emptyTrend = await page.$eval("#trend-summary", (p) => p.textContent);
    check(emptyTrend.includes(`no finished runs on host ${nowhere}`), `the trend says so: ${emptyTrend}`);
    await page.screenshot({ path: path.join(artifacts, "host-nothing.png"), fullPage: false });

    // This machine's host, picked in the filter: its jobs and points come back, as `qgate --host` lists them.
    await page.select("#host-filter", machine);
    await page.waitForFunction((h) => document.getElementById("jobs").dataset.host === h, { timeout: 20000 }, machine).catch(() => {});
    equal(await page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get("host")), machine, "the host picked is in the URL");
    const onMachine = qgate("jobs", "--limit", "50", "--host", machine).jobs;
    check(onMachine.length > 0, `\`qgate jobs --host ${machine}\` lists jobs (${onMachine.length})`);
    equal(await page.$$eval("#jobs tbody tr", (r) => r.length), onMachine.length, `job rows on ${machine}`);
    equal((await page.$$eval(`#jobs tbody tr td:nth-child(${hostColumn || 1})`, (tds) => tds.map((t) => t.textContent))).filter((h) => h !== machine).length,
      0, `job rows of another host on ${machine}`);
    equal(await page.$eval("#jobs-none", (p) => p.hidden), true, "no 'no jobs' note");
    const hostProfile = await page.$eval("#trend-profile", (s) => s.value);
    const hostPoints = qgate("trend", "--profile", hostProfile, "--include-contended", "--since", "3650d", "--host", machine).points;
    check(hostPoints.length > 0, `\`qgate trend --host ${machine}\` has points of ${hostProfile} (${hostPoints.length})`);
    equal(await symbols("#trend-chart"), hostPoints.length, `trend points of ${hostProfile} on ${machine}`);
    // Imported results name no host: the filter leaves their profiles out.
    const hostProfiles = await page.$$eval("#trend-profile option", (o) => o.map((x) => x.value));
    check(hostProfiles.length < profiles.length, `profiles on ${machine}: ${hostProfiles.join(", ")} (of ${profiles.length})`);
    await page.select("#host-filter", "");
    await page.waitForFunction(() => document.getElementById("jobs").dataset.host === "", { timeout: 20000 }).catch(() => {});
    equal(await page.$$eval("#jobs tbody tr", (r) => r.length), jobs.length, "all hosts again: every job row");
    equal(await page.evaluate(() => new URLSearchParams(location.hash.slice(1)).has("host")), false, "all hosts: no host in the URL");

    // Regressions, compare and devices keep to the host filtered on too.
    await page.goto(`${url}#page=regressions&host=${encodeURIComponent(nowhere)}`, { waitUntil: "load" });
    await page.waitForFunction(() => document.getElementById("regressions-section").dataset.rows > "", { timeout: 20000 });
    check(expectedRows.length > 0, `slowdowns to filter out (${expectedRows.length})`);
    equal(await page.$$eval("#regressions-table tbody tr", (r) => r.length), 0, `regressions on ${nowhere}`);
    check(askedFor("/api/regressions"), `the regressions were asked for host=${nowhere}`);
    await page.select("#host-filter", machine);
    await page.waitForFunction(() => document.getElementById("regressions-section").dataset.rows > "" &&
      new URLSearchParams(location.hash.slice(1)).get("page") === "regressions", { timeout: 20000 });
    const machineRegressions = qgate("regressions", "--since", "3650d", "--host", machine).regressions;
    const machineSlowdowns = (machineRegressions.series || []).reduce((n, s) => n + (s.changes || []).filter((c) => c.ratio < 1 && !c.fixes_previous).length, 0);
    equal(await page.$$eval("#regressions-table tbody tr", (r) => r.length), machineSlowdowns, `regressions on ${machine}, as \`qgate regressions --host\``);

    const problemsBefore = problems.length;
    await page.goto(`${url}#page=compare&host=${encodeURIComponent(nowhere)}&a=${encodeURIComponent(gateBuild)}&b=${encodeURIComponent(gateBaseline)}`, { waitUntil: "load" });
    await page.waitForFunction((x) => document.getElementById("compare-section").dataset.compared === x, { timeout: 20000 }, `${gateBuild}|${gateBaseline}`);
    equal(await page.$$eval("#compare-table tbody tr", (r) => r.length), 0, `compared series on ${nowhere}`);
    check(askedFor("/api/compare"), `the comparison was asked for host=${nowhere}`);
    const noComparison = await page.$eval("#compare-summary", (p) => p.textContent);
    check(/^No comparison|on host/.test(noComparison), `the compare page says there is nothing to compare: ${noComparison}`);
    // The daemon's refusal of nothing comparable is an HTTP error the browser logs; that one only.
    const refusals = problems.splice(problemsBefore);
    check(refusals.every((p) => /Failed to load resource: the server responded with a status of 4\d\d/.test(p)),
      `only the daemon's refusal was logged: ${refusals.join(" | ") || "none"}`);
    await page.select("#host-filter", machine);
    await compareShows(gateBuild, gateBaseline, `the gate's two builds on ${machine}`);
    const machineCompare = qgate("compare", gateBuild, gateBaseline, "--host", machine).compare;
    equal(await page.$$eval("#compare-table tbody tr", (r) => r.length), machineCompare.rows.length,
      `compared series on ${machine}, as \`qgate compare --host\``);

    await page.goto(`${url}#page=devices&host=${encodeURIComponent(nowhere)}`, { waitUntil: "load" });
    await page.waitForFunction(() => document.getElementById("devices-section").dataset.rows > "", { timeout: 20000 });
    equal(await page.$$eval("#devices-table tbody tr", (r) => r.length), 0, `GPUs on ${nowhere}`);
    await page.select("#host-filter", machine);
    await page.waitForFunction(() => document.getElementById("devices-section").dataset.rows > "", { timeout: 20000 });
    equal(await page.$$eval("#devices-table tbody tr", (r) => r.length), devices.length, `GPUs on ${machine}`);
  } else {
    // A snapshot holds every host's answers only: a host in its URL is not applied.
    await page.goto(`${url}#page=trends&host=${encodeURIComponent(nowhere)}`, { waitUntil: "load" });
    await page.reload({ waitUntil: "load" });
    await page.waitForSelector("body[data-ready]", { timeout: 30000 });
    equal(await page.$eval("#host-filter", (s) => s.value), "", "a snapshot's host filter stays on all hosts");
    equal(await page.$$eval("#jobs tbody tr", (r) => r.length), jobs.length, "a snapshot lists every job whatever host its URL names");
  }

  // --- Phone width: nothing wider than the window ---
  await page.setViewport({ width: 390, height: 844, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
  const views = [["trends", `#page=trends&job=${gate.id}`, () => document.getElementById("job-section").dataset.jobId > ""],
    ["regressions", "#page=regressions", () => document.getElementById("regressions-section").dataset.rows > ""],
    ["compare", `#page=compare&a=${encodeURIComponent(gateBuild)}&b=${encodeURIComponent(gateBaseline)}`,
      () => document.getElementById("compare-section").dataset.compared > ""],
    ["devices", "#page=devices", () => document.getElementById("devices-section").dataset.rows > ""]];
  for (const [name, hash, ready] of views) {
    await page.goto(`${url}${hash}`, { waitUntil: "load" });
    await page.reload({ waitUntil: "load" });
    await page.waitForSelector("body[data-ready]", { timeout: 30000 });
    await page.waitForFunction(ready, { timeout: 20000 });
    await page.waitForFunction(() => document.getElementById("trend-chart").dataset.rendered !== "0", { timeout: 20000 });
    const widths = await page.evaluate(() => ({ doc: document.documentElement.scrollWidth, body: document.body.scrollWidth, view: window.innerWidth,
      widest: [...document.querySelectorAll("main *, header *")].filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1 &&
        !e.closest(".table-scroll, .scroll-x")).slice(0, 3).map((e) => e.tagName + (e.id ? "#" + e.id : "") + (e.className && e.className.baseVal === undefined ? "." + e.className : "")) }));
    check(widths.doc <= widths.view && widths.body <= widths.view,
      `at 390 px the ${name} page is ${widths.doc} px wide (window ${widths.view})${widths.widest.length ? ": " + widths.widest.join(", ") : ""}`);
    await page.screenshot({ path: path.join(artifacts, `phone-${name}.png`), fullPage: true });
  }
  await page.setViewport({ width: 1400, height: 900 });

  equal(outside.length, 0, `requests outside the dashboard${outside.length ? ": " + outside.join(" ") : ""}`);
  equal(problems.length, 0, `console errors${problems.length ? ": " + problems.join(" | ") : ""}`);
} finally {
  await browser.close();
}
if (failures) {
  console.error(`dashboard browser test: ${failures} check(s) failed`);
  process.exit(1);
}
console.log("dashboard browser test: every check passed");
