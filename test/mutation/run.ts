// `npm run test:mutation [-- <target>...] [--no-doc] [--baseline]`: runs Stryker (stryker.config.mjs)
// on each target of test/mutation/targets.json in turn (all four by default), counts its JSON report
// into test/mutation/summary.json and rewrites the mutation section of docs/reliability.md.
// --baseline runs only the tests that existed before mutation testing and records the figure as the
// target's first-run score (reports/mutation/<target>-baseline/).
// Not part of `npm test`. Exits 1 when a run fails or a score is below 80%.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, SUMMARY, readSummary, writeSection, type TargetScore } from './section.js';

const THRESHOLD = 80;
const targets = JSON.parse(fs.readFileSync(path.join(ROOT, 'test/mutation/targets.json'), 'utf8')) as Record<string, { mutate: string[]; tests: string[] }>;
const args = process.argv.slice(2);
const asked = args.filter((a) => !a.startsWith('--'));
const unknown = asked.filter((a) => !targets[a]);
if (unknown.length) {
  process.stderr.write(`test:mutation: unknown target ${unknown.join(', ')}; the targets are ${Object.keys(targets).join(', ')}\n`);
  process.exit(2);
}
const run = asked.length ? asked : Object.keys(targets);
const baseline = args.includes('--baseline');

interface Report {
  files: Record<string, { mutants: Array<{ status: string }> }>;
}

/** Counts one Stryker JSON report (mutation-testing-report-schema) the way Stryker scores it. */
function count(report: Report): Omit<TargetScore, 'at' | 'commit' | 'seconds' | 'tests' | 'baseline'> {
  const c: Record<string, number> = {};
  for (const f of Object.values(report.files)) for (const m of f.mutants) c[m.status] = (c[m.status] ?? 0) + 1;
  const n = (s: string) => c[s] ?? 0;
  const detected = n('Killed') + n('Timeout');
  const valid = detected + n('Survived') + n('NoCoverage');
  return {
    files: Object.keys(report.files).sort(),
    mutants: Object.values(c).reduce((a, b) => a + b, 0),
    killed: n('Killed'),
    timeout: n('Timeout'),
    survived: n('Survived'),
    no_coverage: n('NoCoverage'),
    errors: n('CompileError') + n('RuntimeError'),
    ignored: n('Ignored'),
    score: valid ? (100 * detected) / valid : 0,
  };
}

const commit = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
let failed = false;
for (const t of run) {
  process.stdout.write(`\n== mutation testing: ${t} (${targets[t].mutate.join(', ')})\n`);
  const t0 = Date.now();
  const r = spawnSync(path.join(ROOT, 'node_modules/.bin/stryker'), ['run', 'stryker.config.mjs'], {
    cwd: ROOT,
    stdio: 'inherit',
    env: { ...process.env, RAAS_MUTATION_TARGET: t, ...(baseline ? { RAAS_MUTATION_BASELINE: '1' } : {}) },
  });
  const seconds = (Date.now() - t0) / 1000;
  const file = path.join(ROOT, `reports/mutation/${t}${baseline ? '-baseline' : ''}/mutation.json`);
  if (r.status !== 0 || !fs.existsSync(file)) {
    process.stderr.write(`test:mutation: stryker failed on ${t} (exit ${r.status ?? r.signal})\n`);
    failed = true;
    continue;
  }
  const summary = readSummary();
  const score = count(JSON.parse(fs.readFileSync(file, 'utf8')) as Report);
  if (baseline) {
    process.stdout.write(`${t} (tests before mutation testing): ${score.score.toFixed(1)}%\n`);
    summary[t] = { ...(summary[t] ?? { ...score, at: new Date().toISOString(), commit, seconds, tests: targets[t].tests }), baseline: score.score };
    fs.writeFileSync(SUMMARY, JSON.stringify(summary, null, 2) + '\n');
    continue;
  }
  summary[t] = { ...score, baseline: summary[t]?.baseline, at: new Date().toISOString(), commit, seconds, tests: targets[t].tests };
  fs.writeFileSync(SUMMARY, JSON.stringify(summary, null, 2) + '\n');
  process.stdout.write(`${t}: ${score.score.toFixed(1)}% (${score.killed} killed, ${score.timeout} timed out, ${score.survived} survived, ${score.no_coverage} not covered) in ${seconds.toFixed(0)} s\n`);
  if (score.score < THRESHOLD) failed = true;
}
if (!args.includes('--no-doc')) {
  writeSection();
  process.stdout.write('updated the mutation section of docs/reliability.md\n');
}
process.exit(failed ? 1 : 0);
