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

/** One target's last run (Stryker's JSON report, counted). */
export interface TargetScore {
  files: string[];
  mutants: number;
  killed: number;
  timeout: number;
  survived: number;
  no_coverage: number;
  /** Mutants that did not compile or crashed the runner: not part of the score. */
  errors: number;
  ignored: number;
  /** (killed + timeout) / (killed + timeout + survived + no_coverage), in percent. */
  score: number;
  /** Score of the first recorded run, before the tests written for mutation testing. */
  baseline?: number;
  at: string;
  commit: string;
  seconds: number;
  tests: string[];
}

export type Summary = Record<string, TargetScore>;

export function readSummary(): Summary {
  return fs.existsSync(SUMMARY) ? (JSON.parse(fs.readFileSync(SUMMARY, 'utf8')) as Summary) : {};
}

export function renderSection(summary: Summary = readSummary()): string {
  const lines = [START, '## Mutation testing', ''];
  lines.push(
    'Stryker (`@stryker-mutator/core` with its vitest runner) mutates the code below and runs the fast unit tests of `test/mutation/targets.json` against every mutant; a mutant that no test notices is a behaviour no test states. `npm run test:mutation` runs all four targets, `npm run test:mutation -- core llm` some of them (one target at a time, 2 workers, incremental: a rerun only tests mutants of changed code or tests). It is not part of `npm test`. HTML reports land in `reports/mutation/<target>/index.html`. Score = (killed + timed out) / (killed + timed out + survived + not covered); mutants that do not compile are left out. Target: at least 80% on each.',
    '',
  );
  const names = Object.keys(summary);
  if (!names.length) {
    lines.push('No run recorded yet.', '', END);
    return lines.join('\n');
  }
  lines.push('| target | code | mutants | killed | timed out | survived | not covered | score | first run | measured |', '|---|---|---|---|---|---|---|---|---|---|');
  for (const n of names) {
    const s = summary[n];
    lines.push(`| ${n} | ${s.files.map((f) => `\`${f}\``).join(', ')} | ${s.mutants} | ${s.killed} | ${s.timeout} | ${s.survived} | ${s.no_coverage} | **${s.score.toFixed(1)}%** | ${s.baseline === undefined ? '' : `${s.baseline.toFixed(1)}%`} | ${s.at.slice(0, 16).replace('T', ' ')} UTC at ${s.commit.slice(0, 7)}, ${Math.round(s.seconds)} s |`);
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
