// The mutation-testing section of docs/reliability.md, rendered from test/mutation/summary.json
// (written by `npm run test:mutation`, test/mutation/run.ts). test/reliability/report.ts includes it
// when it regenerates the page; run.ts replaces it in place between the markers.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const SUMMARY = path.join(ROOT, 'test/mutation/summary.json');
export const START = '<!-- mutation:start -->';
export const END = '<!-- mutation:end -->';

/** Mutants of one file by outcome, from Stryker's JSON report. */
export interface Counts {
  killed: number;
  timeout: number;
  survived: number;
  no_coverage: number;
  /** Did not compile, or crashed the runner: not part of the score. */
  errors: number;
  /** Reached only outside any test (ignoreStatic): not part of the score. */
  ignored: number;
}

/** One file's last run. */
export interface FileScore extends Counts {
  at: string;
  commit: string;
}

/** One target: its files' last runs, and the score with the tests from before mutation testing. */
export interface TargetSummary {
  files: Record<string, FileScore>;
  /** Score of `npm run test:mutation -- <target> --baseline` (the tests that existed before), when measured. */
  baseline?: number;
  baseline_note?: string;
}

export type Summary = Record<string, TargetSummary>;

/** The files a target's `mutate` patterns name (a directory glob or a plain path), relative to the root. */
export function targetFiles(mutate: string[]): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const rel = path.posix.join(dir, e.name);
      if (e.isDirectory()) walk(rel);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(rel);
    }
  };
  for (const g of mutate) {
    if (g.includes('*')) walk(g.slice(0, g.indexOf('*')).replace(/\/$/, ''));
    else out.push(g);
  }
  return out.sort();
}

export function readTargets(): Record<string, { mutate: string[]; tests: string[]; baseline?: string[] }> {
  return JSON.parse(fs.readFileSync(path.join(ROOT, 'test/mutation/targets.json'), 'utf8'));
}

export function readSummary(): Summary {
  return fs.existsSync(SUMMARY) ? (JSON.parse(fs.readFileSync(SUMMARY, 'utf8')) as Summary) : {};
}

export function total(files: Counts[]): Counts & { mutants: number; score: number } {
  const c: Counts = { killed: 0, timeout: 0, survived: 0, no_coverage: 0, errors: 0, ignored: 0 };
  for (const f of files) for (const k of Object.keys(c) as Array<keyof Counts>) c[k] += f[k];
  const detected = c.killed + c.timeout;
  const valid = detected + c.survived + c.no_coverage;
  return { ...c, mutants: valid + c.errors + c.ignored, score: valid ? (100 * detected) / valid : 0 };
}

const pct = (x: number) => `${x.toFixed(1)}%`;

export function renderSection(summary: Summary = readSummary()): string {
  const lines = [START, '## Mutation testing', ''];
  lines.push(
    "Stryker (`@stryker-mutator/core` 9.6 with its vitest runner) changes the code below one small edit at a time (a mutant: a flipped comparison, a removed call, an emptied string) and runs the fast unit tests of `test/mutation/targets.json` against each; a mutant no test notices is a behaviour no test states. `npm run test:mutation` runs every target, `npm run test:mutation -- core llm` some, `npm run test:mutation -- llm --files pool,session` some files of one. One target at a time, 2 workers, per-test coverage, incremental (a rerun only tests mutants of changed code or tests); not part of `npm test`. HTML reports and Stryker's incremental files: `reports/mutation/<target>[-<files>]/` (not committed; this page and `test/mutation/summary.json` are). On this shared 2-core machine a run tests about 10 mutants a minute.",
    '',
    "Score = (killed + timed out) / (killed + timed out + survived + not covered). Left out: mutants that do not compile, and mutants reached only outside any test (module load, `beforeAll`, timers firing between tests; Stryker's `ignoreStatic`), which would each need a fresh test process and every test of the target. Target: at least 80% on each.",
    '',
  );
  const targets = readTargets();
  const names = [...new Set([...Object.keys(targets), ...Object.keys(summary)])];
  lines.push("The tests run against each target's mutants:", '');
  for (const n of Object.keys(targets))
    lines.push(`- ${n} (${targets[n].mutate.map((m) => `\`${m}\``).join(', ')}): ${targets[n].tests.map((t) => `\`${t}\``).join(', ')}`);
  lines.push('');
  lines.push(
    '| target | mutants | killed | timed out | survived | not covered | ignored (static) | score | tests from before |',
    '|---|---|---|---|---|---|---|---|---|',
  );
  for (const n of names) {
    const s = summary[n] ?? { files: {} };
    const t = total(Object.values(s.files));
    const missing = targets[n] ? targetFiles(targets[n].mutate).filter((f) => !s.files[f]).length : 0;
    if (!Object.keys(s.files).length) {
      lines.push(`| ${n} | | | | | | | not run yet | ${s.baseline_note ?? 'not measured'} |`);
      continue;
    }
    lines.push(
      `| ${n} | ${t.mutants} | ${t.killed} | ${t.timeout} | ${t.survived} | ${t.no_coverage} | ${t.ignored} | **${pct(t.score)}**${missing ? ` (${missing} file${missing > 1 ? 's' : ''} not run yet)` : ''} | ${s.baseline_note ?? (s.baseline === undefined ? 'not measured' : pct(s.baseline))} |`,
    );
  }
  lines.push(
    '',
    'Per file (last run of each):',
    '',
    '| file | mutants | survived | not covered | score | measured |',
    '|---|---|---|---|---|---|',
  );
  for (const n of names) {
    const s = summary[n] ?? { files: {} };
    const all = new Set([...Object.keys(s.files), ...(targets[n] ? targetFiles(targets[n].mutate) : [])]);
    for (const f of [...all].sort()) {
      const c = s.files[f];
      if (!c) {
        lines.push(`| \`${f}\` | | | | not run yet | |`);
        continue;
      }
      const t = total([c]);
      lines.push(
        `| \`${f}\` | ${t.mutants} | ${c.survived} | ${c.no_coverage} | ${pct(t.score)} | ${c.at.slice(0, 16).replace('T', ' ')} UTC, ${c.commit.slice(0, 7)} |`,
      );
    }
  }
  lines.push('', END);
  return lines.join('\n');
}

/** Puts the section into docs/reliability.md: in place of the old one, else before "## The suite", else at the end. */
export function writeSection(file = path.join(ROOT, 'docs/reliability.md')): void {
  const doc = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const section = renderSection();
  const a = doc.indexOf(START);
  const b = doc.indexOf(END);
  let next: string;
  if (a >= 0 && b > a) next = doc.slice(0, a) + section + doc.slice(b + END.length);
  else {
    const at = doc.search(/^## The suite/m);
    next = at >= 0 ? `${doc.slice(0, at)}${section}\n\n${doc.slice(at)}` : `${doc.trimEnd()}\n\n${section}\n`;
  }
  fs.writeFileSync(file, next);
}
