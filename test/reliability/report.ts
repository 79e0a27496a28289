// `npm run test:reliability [-- --report]`: runs the reliability suite (vitest, test/reliability),
// collects what every test observed (observations.jsonl) and the pass/fail of every test (vitest's
// JSON reporter), checks the process table for anything the suite left running, prints a summary,
// and with --report writes docs/reliability.md. Exits with vitest's exit code (1 also when an
// orphaned process is found).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readObservations, type Observation, type Section } from './helpers/observe.js';
import { processTable } from '../helpers/procs.js';
import { renderSection as mutationSection } from '../mutation/section.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const args = process.argv.slice(2);
const writeDoc = args.includes('--report');
const filter = args.filter((a) => !a.startsWith('--'));

interface TestResult {
  /** `describe > it`, as expect.getState().currentTestName names it (observations carry this). */
  fullName: string;
  ancestorTitles?: string[];
  title?: string;
  status: string;
  duration?: number;
  failureMessages?: string[];
}

/** CPU seconds (user + sys) of every child process this process has waited for (/proc/self/stat cutime + cstime). */
function childCpuSeconds(): number {
  const stat = fs.readFileSync('/proc/self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[13]) + Number(f[14])) / 100;
}

/** Runs vitest on the suite with a JSON reporter; returns its exit code, results, wall time and CPU time. */
function runSuite(out: string): {
  code: number;
  tests: TestResult[];
  wallS: number;
  cpuS: number;
  files: Array<{ name: string; s: number }>;
} {
  const cpu0 = childCpuSeconds();
  const json = path.join(out, 'vitest.json');
  const t0 = Date.now();
  const r = spawnSync(
    path.join(ROOT, 'node_modules/.bin/vitest'),
    ['run', ...(filter.length ? filter : ['test/reliability']), '--reporter=default', '--reporter=json', `--outputFile.json=${json}`],
    {
      cwd: ROOT,
      stdio: 'inherit',
      env: { ...process.env, RAAS_RELIABILITY_OUT: out, RAAS_TESTS: 'all' },
    },
  );
  const wallS = (Date.now() - t0) / 1000;
  // Wall time depends on what else the machine runs; CPU time (all of vitest's workers, the servers,
  // simulators, sandboxes it started and waited for) is the figure to compare with the 110 s share.
  const cpuS = childCpuSeconds() - cpu0;
  if (!fs.existsSync(json)) return { code: r.status ?? 1, tests: [], wallS, cpuS, files: [] };
  const data = JSON.parse(fs.readFileSync(json, 'utf8')) as {
    testResults: Array<{ name: string; startTime: number; endTime: number; assertionResults: TestResult[] }>;
  };
  const tests = data.testResults
    .flatMap((f) => f.assertionResults)
    .map((t) => ({ ...t, fullName: t.title !== undefined ? [...(t.ancestorTitles ?? []), t.title].join(' > ') : t.fullName }));
  const files = data.testResults.map((f) => ({ name: path.relative(ROOT, f.name), s: (f.endTime - f.startTime) / 1000 }));
  return { code: r.status ?? 1, tests, wallS, cpuS, files };
}

/** Processes the suite may have left: anything naming its sandbox roots, fixtures or marker sleeps. */
function leftovers(): string[] {
  return processTable()
    .filter((p) => p.pid !== process.pid && (/raas-rel-|test\/reliability\/fixtures/.test(p.cmd) || /^sleep 6[12]\d$/.test(p.cmd)))
    .map((p) => `${p.pid} ${p.cmd.slice(0, 120)}`);
}

const SECTIONS: Array<[Section, string]> = [
  ['load', 'Load'],
  ['faults', 'Faults injected'],
  ['bad_input', 'Bad input'],
  ['escapes', 'Sandbox escape attempts'],
  ['api_security', 'API security'],
];

const sum = (obs: Observation[], key: string) => obs.reduce((n, o) => n + (o.figures?.[key] ?? 0), 0);
// Observed error texts may quote what a backend sent (control bytes included): keep the page plain text.
const cell = (s: string) =>
  s.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).replace(/\|/g, '\\|');

function render(obs: Observation[], run: ReturnType<typeof runSuite>, orphans: string[]): string {
  const status = new Map(run.tests.map((t) => [t.fullName, t.status]));
  const passed = (o: Observation) => (o.test ? (status.get(o.test) ?? 'unknown') : 'unknown');
  const mark = (o: Observation) => ({ passed: 'held', failed: '**FAILED**' })[passed(o)] ?? passed(o);
  const of = (s: Section) => obs.filter((o) => o.section === s);
  const load = of('load');
  const faults = of('faults');
  const escapes = of('escapes');
  const bad = of('bad_input').filter((o) => o.figures?.inputs !== undefined);
  const lost = sum(obs, 'lost_jobs');
  const orphanCount = sum(obs, 'orphans') + orphans.length;
  const failedTests = run.tests.filter((t) => t.status === 'failed');
  const lines: string[] = [];
  lines.push('# Reliability and security report', '');
  lines.push(
    `Generated by \`npm run test:reliability -- --report\` on ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC: ${os.cpus().length} cores, Node ${process.version}, load average ${os.loadavg()[0].toFixed(1)} at the end. The suite (\`test/reliability/\`, part of \`npm test\` and \`npm run test:long\`) ran ${run.tests.length} tests in ${run.wallS.toFixed(0)} s of wall time and ${run.cpuS.toFixed(0)} CPU seconds (everything it started, summed over both cores): ${run.tests.filter((t) => t.status === 'passed').length} passed, ${failedTests.length} failed, ${run.tests.filter((t) => t.status !== 'passed' && t.status !== 'failed').length} skipped. How to rerun, what each part proves and how to add a case: [Suite](#the-suite).`,
    '',
  );
  lines.push('## The two numbers that must stay zero', '');
  lines.push('| | count |', '|---|---|');
  lines.push(`| lost jobs (a job that never got exactly one terminal result) | **${lost}** |`);
  lines.push(
    `| orphaned processes (sandbox or server processes left after a test, plus any found after the run) | **${orphanCount}** |`,
    '',
  );
  lines.push('## Summary', '');
  lines.push('| area | what was done | outcome |', '|---|---|---|');
  const loadFig = load[0]?.figures ?? {};
  lines.push(
    `| load | ${sum(load, 'jobs')} concurrent /process on one server (chat handler, simulated vLLM backend) | ${load.every((o) => passed(o) === 'passed') ? 'held' : '**FAILED**'}: ${loadFig.jobs_per_s ?? '?'} jobs/s on this machine, RSS after GC ${loadFig.rss_growth_pct === undefined ? '?' : `${loadFig.rss_growth_pct >= 0 ? '+' : ''}${loadFig.rss_growth_pct}%`} against the value before the wave (limit +20%), maps empty |`,
  );
  const failedIn = (prefix: string) => failedTests.filter((t) => t.fullName.startsWith(prefix)).length;
  lines.push(
    `| faults | ${faults.length} faults injected (${sum(faults, 'jobs')} jobs under them) | ${faults.filter((o) => passed(o) === 'passed').length} survived; ${failedIn('faults:')} fault test(s) failed |`,
  );
  lines.push(
    `| bad input | ${sum(bad, 'inputs')} bad inputs in ${bad.length} classes over every route and the sidecar | ${bad.filter((o) => passed(o) === 'failed').length === 0 && !failedTests.some((t) => /bad input/.test(t.fullName)) ? 'each a 4xx JSON error of the documented shape; server up; no sandbox started' : '**some failed** (see below)'} |`,
  );
  lines.push(
    `| sandbox escapes | ${escapes.length} attempts on real bwrap sandboxes | ${escapes.filter((o) => passed(o) === 'passed').length} failed as they must; ${failedIn('sandbox escape')} test(s) **failed** |`,
  );
  lines.push(
    `| API security | ${of('api_security').length} checks | ${failedIn('API security') === 0 ? 'held' : `**${failedIn('API security')} failed**`} |`,
    '',
  );
  for (const [section, title] of SECTIONS) {
    const list = of(section);
    if (!list.length) continue;
    lines.push(`## ${title}`, '');
    if (section === 'bad_input') {
      lines.push('| input class | inputs | answers seen | result |', '|---|---|---|---|');
      // Per class: FAILED when one of its answers left the documented shape (the test may have failed for another class).
      const verdict = (o: Observation) =>
        o.figures?.nonconforming === undefined ? mark(o) : o.figures.nonconforming > 0 ? '**FAILED**' : 'held';
      for (const o of list)
        lines.push(
          `| ${cell(o.name)} | ${o.figures?.inputs ?? ''} | ${cell(o.observed.replace(/^\d+ (inputs|lines) → /, ''))} | ${verdict(o)} |`,
        );
    } else {
      lines.push(
        `| ${section === 'escapes' ? 'attempt' : section === 'faults' ? 'fault injected' : 'case'} | observed | result |`,
        '|---|---|---|',
      );
      for (const o of list) lines.push(`| ${cell(o.name)} | ${cell(o.observed)} | ${mark(o)} |`);
    }
    lines.push('');
  }
  if (failedTests.length) {
    lines.push('## Failing tests', '');
    for (const t of failedTests) lines.push(`- ${t.fullName}: ${cell((t.failureMessages?.[0] ?? '').split('\n')[0].slice(0, 300))}`);
    lines.push('');
  }
  if (orphans.length) lines.push('## Processes found after the run', '', ...orphans.map((o) => `- \`${o}\``), '');
  lines.push('## Run time per file', '', '| file | seconds |', '|---|---|');
  for (const f of run.files.sort((a, b) => b.s - a.s)) lines.push(`| ${f.name} | ${f.s.toFixed(1)} |`);
  lines.push('');
  // Mutation scores come from `npm run test:mutation` (test/mutation/summary.json), not from this run.
  lines.push(mutationSection(), '');
  lines.push(fs.readFileSync(path.join(ROOT, 'test/reliability/suite.md'), 'utf8').trim(), '');
  return lines.join('\n');
}

const out = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-reliability-'));
const run = runSuite(out);
// Give SIGKILLed trees a moment to be reaped before the final process-table check.
await new Promise((r) => setTimeout(r, 1000));
const orphans = leftovers();
const obs = readObservations(out);
const lost = sum(obs, 'lost_jobs');
const orphanCount = sum(obs, 'orphans') + orphans.length;
process.stdout.write(
  `\nreliability: ${run.tests.length} tests (${run.tests.filter((t) => t.status === 'failed').length} failed) in ${run.wallS.toFixed(0)} s (${run.cpuS.toFixed(0)} CPU s); ${obs.length} observations; lost jobs ${lost}; orphaned processes ${orphanCount}\n`,
);
for (const o of orphans) process.stdout.write(`  left running: ${o}\n`);
if (writeDoc) {
  const file = path.join(ROOT, 'docs/reliability.md');
  fs.writeFileSync(file, render(obs, run, orphans));
  process.stdout.write(`wrote ${path.relative(ROOT, file)}\n`);
}
fs.rmSync(out, { recursive: true, force: true });
process.exit(run.code !== 0 ? run.code : orphans.length ? 1 : 0);
