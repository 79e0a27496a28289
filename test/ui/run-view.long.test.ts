import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';
import { type RunViewer, startRunViewer } from '../../src/ui/view-server.js';
import { type Browser, launch } from '../helpers/browser.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** Resolves once `pred` holds (checked every 100 ms), or rejects after `ms`. */
async function until(pred: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`waited ${ms} ms for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// raas view over the quick start's run while `raas train` is still writing it, in Debian's chromium.
describe('raas view: a run in the browser', () => {
  const out = mkdtempSync(path.join(tmpdir(), 'raas-view-'));
  const runDir = path.join(out, 'demo');
  let train: ChildProcess;
  let trainExit: Promise<number | null>;
  let viewer: RunViewer;
  let browser: Browser;

  beforeAll(async () => {
    train = spawn(
      process.execPath,
      [path.join(ROOT, 'dist/src/cli.js'), 'train', path.join(ROOT, 'configs/demo.yaml'), '--set', `output_dir=${out}`, '--set', 'steps=4'],
      { cwd: out, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    trainExit = new Promise((r) => train.on('exit', (code) => r(code)));
    await until(() => existsSync(path.join(runDir, 'config.json')), 60_000, 'raas train to create its run directory');
    viewer = await startRunViewer({ dir: runDir, tokenizer: qwen3Tokenizer, followMs: 250 });
    browser = await launch();
  }, 90_000);
  afterAll(async () => {
    train?.kill('SIGKILL');
    await browser?.close();
    await viewer?.close();
    rmSync(out, { recursive: true, force: true });
  });

  it('follows the run as it writes steps, then shows the step table and the plot panels as charts', async () => {
    const page = await browser.page();
    await page.goto(`${viewer.url}/ui`);
    await page.waitForSelector('#run-live');
    // The page was opened before the run finished: steps appear without a reload.
    const first = await page.locator('#steps tbody tr').count();
    expect(await trainExit).toBe(0);
    expect(first).toBeLessThan(4);
    await page.waitForSelector('#steps tr[data-step="3"]', { timeout: 15_000 });
    expect(await page.locator('#steps tbody tr').count()).toBe(4);
    for (const id of ['chart-reward', 'chart-groups', 'chart-filtered', 'chart-waste', 'chart-staleness', 'chart-time'])
      expect(await page.locator(`#${id} canvas`).count(), id).toBe(1);
    await browser.shot(page, 'run');
    // A point of a chart opens its step.
    const box = (await page.locator('#chart-reward .u-over').boundingBox())!;
    await page.mouse.move(box.x + box.width - 2, box.y + box.height / 2);
    await page.mouse.click(box.x + box.width - 2, box.y + box.height / 2);
    await page.waitForURL(/#\/steps\/3$/);
    expect(browser.problems).toEqual({ console: [], errors: [], failed: [] });
  }, 180_000);

  it("lists a step's groups with rewards and advantages, filtered ones apart, and opens a rollout's trajectory", async () => {
    const page = await browser.page();
    await page.goto(`${viewer.url}/ui#/steps/1`);
    await page.waitForSelector('#groups [data-verdict=accepted]');
    // batch_size 4: four accepted groups of n = 4 rollouts, advantages that sum to ~0 per group.
    expect(await page.locator('#groups [data-verdict=accepted]').count()).toBe(4);
    expect(await page.locator('#groups [data-verdict=accepted] tr[data-job]').count()).toBe(16);
    expect(await page.textContent('#verdicts')).toMatch(/accepted 4/);
    // Groups outside the batch come from groups.jsonl, each rollout with its reward and grader details.
    expect(await page.textContent('#verdicts')).toContain('groups.jsonl');
    const filtered = page.locator('#groups [data-verdict=filtered]');
    if ((await filtered.count()) > 0) {
      expect(await filtered.first().locator('tr[data-job]').count()).toBe(4);
      await filtered.first().locator('tr[data-job] a').first().click();
      await page.waitForSelector('#answer-compare');
      expect(await page.textContent('#turns, .trajectory')).toMatch(/No turns|Turns \(0\)/);
      await page.goBack();
      await page.waitForSelector('#groups [data-verdict=accepted]');
    }
    await browser.shot(page, 'step');
    const job = (await page.getAttribute('#groups [data-verdict=accepted] tr[data-job] >> nth=0', 'data-job'))!;
    await page.click(`#groups tr[data-job="${job}"] a`);
    await page.waitForSelector('#turns .turn[data-role=assistant]');
    expect(await page.textContent('.summary')).toContain(job);
    expect(await page.textContent('.summary')).toMatch(/advantage/);
    // The grader's details travel in the batch: the answer it extracted against the ground truth.
    expect(await page.textContent('#answer-compare')).toMatch(/answer extracted.*ground truth/s);
    // The batch carries ids only (no return_messages): the turns are decoded from them.
    expect(await page.locator('#turns .turn[data-role=user]').count()).toBeGreaterThan(0);
    await browser.shot(page, 'rollout');
    await page.click('button[role=tab]:text-matches("Tokens")');
    await page.waitForSelector('.token-line .tk-gen');
    expect(await page.textContent('#token-summary')).toMatch(/generated \d+/);
    expect(browser.problems).toEqual({ console: [], errors: [], failed: [] });
  });
});
