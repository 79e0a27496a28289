// `npm run test:mutation [-- <target>...] [--files a,b] [--baseline] [--no-doc]`: runs Stryker
// (stryker.config.mjs) on each target of test/mutation/targets.json in turn (all four by default),
// counts its JSON report per file into test/mutation/summary.json and rewrites the mutation section
// of docs/reliability.md. `--files pool,session` mutates only the target's files whose name
// contains one of those words (a target's score then combines each file's last run).
// `--baseline` runs only the tests that existed before mutation testing and records that score.
// `--collect` runs nothing: it reads the reports the last runs left (e.g. after an interrupted chain).
// Not part of `npm test`. Exits 1 when a run fails or a score is below 80%.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, SUMMARY, readSummary, readTargets, targetFiles, total, writeSection, type Counts } from './section.js';

const THRESHOLD = 80;
const targets = readTargets();
const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const only = flag('--files')?.split(',').filter(Boolean);
const asked = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--files');
const unknown = asked.filter((a) => !targets[a]);
if (unknown.length) {
  process.stderr.write(`test:mutation: unknown target ${unknown.join(', ')}; the targets are ${Object.keys(targets).join(', ')}\n`);
  process.exit(2);
}
const run = asked.length ? asked : Object.keys(targets);
const baseline = args.includes('--baseline');
const collect = args.includes('--collect');

interface Report {
  files: Record<string, { mutants: Array<{ status: string }> }>;
}

/** Counts one file of a Stryker JSON report (mutation-testing-report-schema). */
function count(mutants: Array<{ status: string }>): Counts {
  const n = (s: string) => mutants.filter((m) => m.status === s).length;
  return {
    killed: n('Killed'),
    timeout: n('Timeout'),
    survived: n('Survived'),
    no_coverage: n('NoCoverage'),
    errors: n('CompileError') + n('RuntimeError'),
    ignored: n('Ignored'),
  };
}

const commit = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
let failed = false;
for (const t of run) {
  const files = targetFiles(targets[t].mutate).filter((f) => !only || only.some((w) => path.basename(f).includes(w)));
  if (!files.length) {
    process.stderr.write(`test:mutation: no file of ${t} matches --files ${only?.join(',')}\n`);
    failed = true;
    continue;
  }
  const key = `${t}${baseline ? '-baseline' : ''}${only ? `-${only.join('-')}` : ''}`;
  process.stdout.write(`\n== mutation testing: ${t}${baseline ? ' (tests from before mutation testing)' : ''}: ${files.join(', ')}\n`);
  const t0 = Date.now();
  const r = collect
    ? { status: 0, signal: null }
    : spawnSync(path.join(ROOT, 'node_modules/.bin/stryker'), ['run', 'stryker.config.mjs'], {
        cwd: ROOT,
        stdio: 'inherit',
        env: {
          ...process.env,
          RAAS_MUTATION_TARGET: t,
          RAAS_MUTATION_OUT: `reports/mutation/${key}`,
          ...(only ? { RAAS_MUTATION_FILES: files.join(',') } : {}),
          ...(baseline ? { RAAS_MUTATION_BASELINE: '1' } : {}),
        },
      });
  const seconds = (Date.now() - t0) / 1000;
  const file = path.join(ROOT, `reports/mutation/${key}/mutation.json`);
  if (r.status !== 0 || !fs.existsSync(file)) {
    process.stderr.write(`test:mutation: stryker failed on ${t} (exit ${r.status ?? r.signal})\n`);
    failed = true;
    continue;
  }
  const report = JSON.parse(fs.readFileSync(file, 'utf8')) as Report;
  const summary = readSummary();
  const entry = (summary[t] ??= { files: {} });
  const counts = Object.entries(report.files).map(([f, v]) => [path.relative(ROOT, path.resolve(ROOT, f)), count(v.mutants)] as const);
  const score = total(counts.map(([, c]) => c)).score;
  if (baseline) {
    if (!only) entry.baseline = score;
    process.stdout.write(`${t} with the tests from before: ${score.toFixed(1)}% in ${seconds.toFixed(0)} s\n`);
  } else {
    const at = (collect ? fs.statSync(file).mtime : new Date()).toISOString();
    for (const [f, c] of counts) entry.files[f] = { ...c, at, commit };
    const all = total(Object.values(entry.files)).score;
    process.stdout.write(`${t}: ${score.toFixed(1)}% on this run's files in ${seconds.toFixed(0)} s; target score ${all.toFixed(1)}%\n`);
    if (all < THRESHOLD) failed = true;
  }
  fs.writeFileSync(SUMMARY, JSON.stringify(summary, null, 2) + '\n');
}
if (!args.includes('--no-doc')) {
  writeSection();
  process.stdout.write('updated the mutation section of docs/reliability.md\n');
}
process.exit(failed ? 1 : 0);
