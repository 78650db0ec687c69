// Drives Debian's Chromium (headless, through puppeteer-core; npm never downloads a browser here)
// over the dashboard at URL and checks what it drew against what the qgate CLI says about the same
// daemon: a row per job, a trend point per trend point of each profile (quiet ones filled, the rest
// hollow), a dashed rule per change point; then clicks the gate and checks its A/B view (a point per
// pair, a square per reached look), its parity matrix (a cell per type and shape) and its co-tenant
// timeline. Screenshots go to ARTIFACTS. With QGATE_SNAPSHOT=1 the URL is a snapshot opened from disk.
// Usage: node dashboard_browser_test.mjs URL ARTIFACTS
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
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
  page.on("request", (r) => { if (!r.url().startsWith(origin) && !r.url().startsWith("data:")) outside.push(r.url()); });

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

  // --- Trend: every profile the page offers ---
  const symbols = (sel, name) => page.$$eval(`${sel} g.mark-symbol.role-mark${name ? "." + name : ""} path`, (p) => p.length);
  const profiles = await page.$$eval("#trend-profile option", (o) => o.map((x) => x.value));
  check(profiles.length >= 2, `profiles offered: ${profiles.join(", ")}`);
  let quietSeen = 0, hollowSeen = 0, changesSeen = 0;
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
    equal(await page.$$eval("#trend-chart g.mark-rule.role-mark.layer_2_marks line", (l) => l.length), expectedChanges,
      `change-point rules of ${profile}`);
    changesSeen += expectedChanges;
    await page.screenshot({ path: path.join(artifacts, `trend-${profile.replace(/[^A-Za-z0-9_.-]+/g, "_")}.png`), fullPage: false,
      clip: await (await page.$("#trend-section")).boundingBox() });
  }
  check(quietSeen > 0 && hollowSeen > 0, `quiet (${quietSeen}) and contended or unknown (${hollowSeen}) points both drawn`);
  check(changesSeen > 0, `change points drawn: ${changesSeen}`);
  await page.select("#trend-x", "build");
  await page.waitForFunction(() => document.getElementById("trend-chart").dataset.rendered === "1");
  check((await symbols("#trend-chart")) > 0, "the trend along builds draws too");

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
