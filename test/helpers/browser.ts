import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type BrowserContext, type Page, chromium } from 'playwright-core';
import { waitGone, withCommand } from './procs.js';

/** Debian's chromium (scripts/setup.sh installs it); playwright-core drives it and downloads no browser. */
export const CHROMIUM = '/usr/bin/chromium';

/** Where page screenshots go: a gitignored folder CI keeps as artifacts. */
export const ARTIFACTS = path.resolve(import.meta.dirname, '../../.raas/artifacts/console');

/**
 * RAAS_DOC_SHOTS=docs/img remakes the screenshots of docs/console.md: the same pages, drawn at
 * three quarters of the size (so the committed PNGs stay small), one screen each.
 */
const DOC_SHOTS = process.env.RAAS_DOC_SHOTS ? path.resolve(process.env.RAAS_DOC_SHOTS) : undefined;

/** What a page said that a user would see as broken: console errors and warnings, uncaught errors, failed loads. */
export interface PageProblems {
  console: string[];
  errors: string[];
  failed: string[];
}

/** A headless chromium with a fresh profile, and the problems of every page it opens. */
export interface Browser {
  context: BrowserContext;
  /** The fresh profile folder: every chromium process of this browser has it on its command line. */
  profile: string;
  problems: PageProblems;
  page(): Promise<Page>;
  /** Saves a full-page screenshot as ARTIFACTS/<name>.png and returns its path. */
  shot(page: Page, name: string, fullPage?: boolean): Promise<string>;
  close(): Promise<void>;
}

/**
 * Starts chromium with the flags that work in CI's containers (no sandbox, no GPU, no background
 * traffic), and `args` after them (e.g. `--host-resolver-rules`, for a test that needs a name).
 */
export async function launch(opts: { args?: string[] } = {}): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: the browser tests need Debian's chromium (bash scripts/setup.sh as root installs it)`);
  const profile = mkdtempSync(path.join(os.tmpdir(), 'raas-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: DOC_SHOTS ? { width: 1280, height: 860 } : { width: 1400, height: 1000 },
    ...(DOC_SHOTS ? { deviceScaleFactor: 0.75 } : {}),
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      ...(opts.args ?? []),
    ],
  });
  // A step that does not happen fails within 10 s, naming the step (the test's own timeout names nothing).
  context.setDefaultTimeout(10_000);
  const problems: PageProblems = { console: [], errors: [], failed: [] };
  context.on('page', (p) => watch(p, problems));
  mkdirSync(ARTIFACTS, { recursive: true });
  return {
    context,
    profile,
    problems,
    async page() {
      return context.pages()[0] ?? context.newPage();
    },
    async shot(page, name, fullPage = true) {
      const file = path.join(ARTIFACTS, `${name}.png`);
      await page.screenshot({ path: file, fullPage });
      if (DOC_SHOTS) await page.screenshot({ path: path.join(DOC_SHOTS, `console-${name}.png`) });
      return file;
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
      // Nothing we start outlives its owner: no chromium process of this profile is left.
      const left = await waitGone(() => withCommand(profile));
      if (left.length > 0) throw new Error(`chromium processes outlived the test: ${left.map((p) => p.pid).join(', ')}`);
    },
  };
}

function watch(page: Page, p: PageProblems): void {
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') p.console.push(`${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => p.errors.push(e.message));
  page.on('requestfailed', (r) => {
    // An event stream the page closes when it navigates away is aborted by design.
    if (r.failure()?.errorText === 'net::ERR_ABORTED') return;
    p.failed.push(`${r.url()}: ${r.failure()?.errorText}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400 && !r.url().includes('/ui/login')) p.failed.push(`${r.url()}: ${r.status()}`);
  });
}
