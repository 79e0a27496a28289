// Observations of the reliability suite: every test writes what it saw (one JSON line each) so that
// `npm run test:reliability -- --report` can print it in docs/reliability.md. The file lives under a
// temp dir; report.ts points RAAS_RELIABILITY_OUT at a fresh one before it runs vitest.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';

/** The report's sections. */
export type Section = 'load' | 'faults' | 'bad_input' | 'escapes' | 'api_security';

/** One observation line. */
export interface Observation {
  section: Section;
  /** Short name of the injected fault / input class / escape attempt. */
  name: string;
  /** What the test observed, in words (the error text, the result fields, the figures). */
  observed: string;
  /** The vitest full test name, to join with the JSON reporter's pass/fail. */
  test?: string;
  /** Numbers the report sums: jobs, lost jobs, orphaned processes, inputs tried... */
  figures?: Record<string, number>;
}

/** Directory of observations.jsonl. */
export function outDir(): string {
  return process.env.RAAS_RELIABILITY_OUT ?? path.join(os.tmpdir(), 'raas-reliability');
}

/** The running test's full name (`describe > it`), or undefined outside a test. */
export function currentTest(): string | undefined {
  try {
    return expect.getState().currentTestName;
  } catch {
    return undefined;
  }
}

/**
 * Appends one observation (synchronously, so a crash later in the test keeps it). `test` defaults
 * to the running test; pass it when observing from a hook on behalf of a test.
 */
export function observe(o: Observation): void {
  const dir = outDir();
  fs.mkdirSync(dir, { recursive: true });
  const test = o.test ?? currentTest();
  const line: Observation = { ...o, observed: o.observed.replace(/\s+/g, ' ').trim().slice(0, 600), test };
  fs.appendFileSync(path.join(dir, 'observations.jsonl'), JSON.stringify(line) + '\n');
}

/** Reads every observation written so far (report.ts). */
export function readObservations(dir = outDir()): Observation[] {
  const file = path.join(dir, 'observations.jsonl');
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Observation);
}
