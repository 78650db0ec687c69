#!/usr/bin/env python3
# The report of one scripts/bench-fleet-daemons.sh run of N daemons: reads the jobs table it saved
# (jobs.tsv), the daemons' /metrics scraped after the drain and after the submit-while-draining phase,
# and the submit times; writes JSON and prints a table. Exits 1 when a job did not end done exactly
# once with one verdict.
import argparse
import json
import math
import re
import sys
from pathlib import Path

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """[(name, {label: value}, value)] of a Prometheus text page."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        m = SAMPLE.match(line)
        if m:
            out.append((m.group(1), dict(LABEL.findall(m.group(2) or '')), float(m.group(3))))
    return out


def histogram(samples, name, **labels):
    """{'buckets': {le: cumulative}, 'count', 'sum'} of one labelled histogram of a page."""
    h = {'buckets': {}, 'count': 0.0, 'sum': 0.0}
    for metric, ls, value in samples:
        rest = {k: v for k, v in ls.items() if k != 'le'}
        if rest != labels:
            continue
        if metric == name + '_bucket':
            h['buckets'][math.inf if ls['le'] == '+Inf' else float(ls['le'])] = value
        elif metric == name + '_count':
            h['count'] = value
        elif metric == name + '_sum':
            h['sum'] = value
    return h


def merge(hs, minus=None):
    """The sum of histograms (one per daemon), less another sum when given (an earlier scrape)."""
    out = {'buckets': {}, 'count': 0.0, 'sum': 0.0}
    for h in hs:
        for le, c in h['buckets'].items():
            out['buckets'][le] = out['buckets'].get(le, 0.0) + c
        out['count'] += h['count']
        out['sum'] += h['sum']
    if minus:
        for le, c in minus['buckets'].items():
            out['buckets'][le] -= c
        out['count'] -= minus['count']
        out['sum'] -= minus['sum']
    return out


def histogram_quantile(h, q):
    """As Prometheus' histogram_quantile: linear within the bucket the rank falls in (seconds)."""
    if h['count'] <= 0:
        return None
    rank = q * h['count']
    lower, below = 0.0, 0.0
    for le in sorted(h['buckets']):
        c = h['buckets'][le]
        if c >= rank:
            if math.isinf(le):
                return lower  # beyond the last bound: the last bound is all that is known
            return lower + (le - lower) * ((rank - below) / (c - below) if c > below else 1.0)
        lower, below = le, c
    return lower


def statement_summary(h):
    return {
        'count': int(round(h['count'])),
        'mean_ms': round(1000 * h['sum'] / h['count'], 3) if h['count'] else None,
        'p50_ms': ms(histogram_quantile(h, 0.5)),
        'p99_ms': ms(histogram_quantile(h, 0.99)),
    }


def ms(seconds):
    return None if seconds is None else round(1000 * seconds, 3)


def percentile(values, q):
    """Nearest rank."""
    if not values:
        return None
    v = sorted(values)
    return v[max(0, math.ceil(q * len(v)) - 1)]


def page_set(run, tag, n):
    return [parse_metrics((run / f'metrics-{tag}-{i}.txt').read_text()) for i in range(n)]


def statements(pages, minus_pages=None):
    out = {}
    for result in ('job', 'empty'):
        minus = merge([histogram(p, 'qgate_claim_statement_duration_seconds', result=result) for p in minus_pages]) \
            if minus_pages else None
        out[result] = statement_summary(
            merge([histogram(p, 'qgate_claim_statement_duration_seconds', result=result) for p in pages], minus))
    errors = sum(v for p in pages for name, ls, v in p
                 if name == 'qgate_claim_statements_total' and ls.get('result') == 'error')
    if minus_pages:
        errors -= sum(v for p in minus_pages for name, ls, v in p
                      if name == 'qgate_claim_statements_total' and ls.get('result') == 'error')
    out['error_count'] = int(errors)
    return out


def phase(rows, n):
    """Throughput, waits and run times of a set of jobs (rows of jobs.tsv)."""
    if not rows:
        return None
    first_claim = min(r['started_ms'] for r in rows)
    last_finish = max(r['finished_ms'] for r in rows)
    first_submit = min(r['created_ms'] for r in rows)
    span_s = (last_finish - first_claim) / 1000
    waits = [(r['started_ms'] - r['created_ms']) / 1000 for r in rows]
    runs = [(r['finished_ms'] - r['started_ms']) / 1000 for r in rows]
    mean_run = sum(runs) / len(runs)
    return {
        'jobs': len(rows),
        'span_s': round(span_s, 3),
        'jobs_per_s': round(len(rows) / span_s, 4) if span_s > 0 else None,
        'first_submit_to_last_finish_s': round((last_finish - first_submit) / 1000, 3),
        'queue_wait_s': {'p50': percentile(waits, 0.5), 'p99': percentile(waits, 0.99), 'max': max(waits)},
        'run_s': {'p50': percentile(runs, 0.5), 'p99': percentile(runs, 0.99), 'mean': round(mean_run, 3)},
        # What the daemons' lanes did over the span: running jobs, the rest claiming, idle or between jobs.
        'busy_share': round(sum(runs) / (n * span_s), 4) if span_s > 0 else None,
        'jobs_per_s_if_always_running': round(n / mean_run, 4) if mean_run > 0 else None,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--daemons', type=int, required=True)
    ap.add_argument('--run', required=True)
    ap.add_argument('--first-live', type=int, required=True)
    ap.add_argument('--submit-ms', type=int, required=True)
    ap.add_argument('--job-args', default='')
    ap.add_argument('--json-out', required=True)
    a = ap.parse_args()
    run, n = Path(a.run), a.daemons

    rows = []
    for line in (run / 'jobs.tsv').read_text().splitlines():
        f = line.split('\t')
        rows.append({'id': int(f[0]), 'state': f[1], 'attempts': int(f[2]), 'claimed_by': f[3],
                     'created_ms': int(f[4]), 'started_ms': int(f[5]) if f[5] else None,
                     'finished_ms': int(f[6]) if f[6] else None, 'verdicts': int(f[7])})
    bad = [r for r in rows if r['state'] != 'done' or r['attempts'] != 0 or r['verdicts'] != 1
           or not r['claimed_by'] or r['started_ms'] is None or r['finished_ms'] is None]
    drain = [r for r in rows if r['id'] < a.first_live and r not in bad]
    live = [r for r in rows if r['id'] >= a.first_live and r not in bad]

    # Each daemon's jobs, of the drain and of the live phase: claimed_by is host:data-dir, and daemon
    # i's dir is RUN/d<i>.
    def by_daemon(subset):
        return {f'd{i}': sum(1 for r in subset if r['claimed_by'].endswith(f'/run-{n}/d{i}')) for i in range(n)}
    share = by_daemon(rows)
    unknown = len(rows) - sum(share.values())

    live_submits = []
    submits_file = run / 'live-submits.tsv'
    if submits_file.exists():
        live_submits = [int(line.split()[1]) / 1000 for line in submits_file.read_text().splitlines() if line]

    drain_pages = page_set(run, 'drain', n)
    live_pages = page_set(run, 'live', n) if live else None
    report = {
        'daemons': n,
        'engine': 'postgresql',
        'job': a.job_args,
        'jobs': len(rows),
        'queue_fill_submit_s_per_job': round(a.submit_ms / 1000 / max(1, len(drain)), 4),
        'drain': phase(drain, n),
        'drain_claim_statements': statements(drain_pages),
        'live': phase(live, n),
        'live_submit_s': {'p50': percentile(live_submits, 0.5), 'p99': percentile(live_submits, 0.99)}
        if live_submits else None,
        'live_claim_statements': statements(live_pages, drain_pages) if live_pages else None,
        'share': {k: round(v / len(rows), 4) for k, v in share.items()},
        'jobs_by_daemon': {'drain': by_daemon(drain), 'live': by_daemon(live), 'all': share},
        'jobs_of_no_daemon': unknown,
        'checks': {
            'every_job_done_once_with_one_verdict': not bad,
            'not_done_once': [{'id': r['id'], 'state': r['state'], 'attempts': r['attempts'],
                               'verdicts': r['verdicts']} for r in bad],
        },
    }
    Path(a.json_out).write_text(json.dumps(report, indent=2) + '\n')

    def fmt(x, unit=''):
        return '-' if x is None else f'{x:g}{unit}'

    d, s = report['drain'], report['drain_claim_statements']
    print(f'{n} daemon(s), PostgreSQL, {len(rows)} jobs ({a.job_args}); every job done once, one verdict: '
          f'{"yes" if not bad else "NO (" + str(len(bad)) + ")"}')
    print(f'  {"phase":<8} {"jobs":>5} {"jobs/s":>8} {"wait p50":>9} {"wait p99":>9} {"run p50":>8} '
          f'{"busy":>6} {"claim(job) p50/p99 ms":>22} {"claim(empty) p50/p99 ms":>24}')
    for name, p, st in (('drain', d, s), ('live', report['live'], report['live_claim_statements'])):
        if not p:
            continue
        print(f'  {name:<8} {p["jobs"]:>5} {fmt(p["jobs_per_s"]):>8} {fmt(p["queue_wait_s"]["p50"], "s"):>9} '
              f'{fmt(p["queue_wait_s"]["p99"], "s"):>9} {fmt(p["run_s"]["p50"], "s"):>8} {fmt(p["busy_share"]):>6} '
              f'{fmt(st["job"]["p50_ms"]) + " / " + fmt(st["job"]["p99_ms"]):>22} '
              f'{fmt(st["empty"]["p50_ms"]) + " / " + fmt(st["empty"]["p99_ms"]):>24}')
    for name in ('drain', 'live'):
        if report[name]:
            print(f'  jobs by daemon, {name}: ' + ', '.join(f'{k} {v}' for k, v in report['jobs_by_daemon'][name].items()))
    print('  share of all: ' + ', '.join(f'{k} {v:.0%}' for k, v in report['share'].items()) +
          (f'; {unknown} of no daemon' if unknown else ''))
    if report['live_submit_s']:
        print(f'  submit while draining: p50 {report["live_submit_s"]["p50"]:g} s, '
              f'p99 {report["live_submit_s"]["p99"]:g} s a submit (the CLI, one upload each)')
    return 0 if not bad else 1


if __name__ == '__main__':
    sys.exit(main())
