// POST /prefetch and the coordinator that calls it: the instances to come are named to the
// servers, which unpack their images while the current jobs run (real rollout server on port 0,
// bwrap runtime, busybox SIF images under handlers.swe.images_dir; /status shows the image cache).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator } from '../../src/dapo/index.js';
import { RolloutClient } from '../../src/client/index.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { busyboxImage, sifOf } from '../helpers/images.js';
import { testRoot } from '../sandbox/helpers.js';

const root = testRoot('prefetch');
const images = path.join(root, 'images');
let server: RolloutServer;
let client: RolloutClient;

const swe = (i: number): Record<string, unknown> => ({
  data_source: 'swe',
  instance_id: `acme__pkg-${i}`,
  problem_statement: 'fix it',
  repo: 'acme/pkg',
  base_commit: 'a'.repeat(40),
  FAIL_TO_PASS: ['t'],
});

async function imageCache(): Promise<{ entries: number; conversions: number } | undefined> {
  return ((await client.status()) as { sandbox?: { image_cache?: { entries: number; conversions: number } } }).sandbox?.image_cache;
}

async function until<T>(what: () => Promise<T>, ok: (v: T) => boolean, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await what();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 200));
  }
}

beforeAll(async () => {
  fs.mkdirSync(images, { recursive: true });
  const sif = await sifOf('busybox', await busyboxImage());
  // One image per instance, as SWE-bench's are (here the same tree under different names).
  for (let i = 0; i < 6; i++) fs.copyFileSync(sif, path.join(images, `sweb.eval.x86_64.acme_s_pkg-${i}.sif`));
  fs.appendFileSync(path.join(images, 'sweb.eval.x86_64.acme_s_pkg-5.sif'), 'different');
  server = await startRolloutServer({
    port: 0,
    log_level: 'silent',
    sandbox: { runtime: 'bwrap', root },
    handlers: { swe: { images_dir: images } },
  } as never);
  client = new RolloutClient({ url: server.url });
}, 120_000);

afterAll(async () => {
  client?.close();
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

describe('POST /prefetch', () => {
  it('unpacks the images of the instances named, skips what names none, and answers at once', async () => {
    const t0 = performance.now();
    const r = await client.prefetch([
      swe(0),
      swe(1),
      swe(1),
      { data_source: 'math', problem: '1+1', answer: '2' },
      { data_source: 'nope' },
    ]);
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(r).toEqual({ status: 'ok', images: 2, skipped: 2 });
    const cache = await until(imageCache, (c) => (c?.entries ?? 0) >= 2);
    // Instances 0 and 1 have byte-identical images at two paths: each path is its own entry.
    expect(cache).toMatchObject({ entries: 2, conversions: 2 });
  });

  it('a bad body is a 400 naming the field; GET is a 405', async () => {
    const bad = await fetch(`${server.url}/prefetch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"instance": {}}',
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/instances/);
    const get = await fetch(`${server.url}/prefetch`);
    expect(get.status).toBe(405);
  });

  it('the coordinator names the prompts after the one it admits to the servers, before their groups start', async () => {
    // The server has no LLM backend, so /process refuses (503) and no group ever starts: every image
    // unpacked here was unpacked on the hint.
    const data = path.join(root, 'swe.jsonl');
    fs.writeFileSync(data, [2, 3, 4, 5].map((i) => JSON.stringify(swe(i))).join('\n') + '\n');
    const c = new Coordinator({
      name: 'prefetch',
      seed: 1,
      servers: [{ url: server.url }],
      dataset: { path: data, shuffle: false },
      n: 1,
      batch_size: 1,
      max_inflight_jobs: 1,
      prefetch_ahead: 3,
      steps: 1,
    } as never);
    const pending = c.nextBatch().catch(() => undefined);
    try {
      await until(imageCache, (v) => (v?.entries ?? 0) >= 5);
      const sources = fs
        .readdirSync(path.join(root, 'rootfs'))
        .filter((k) => /^[0-9a-f]{32}$/.test(k))
        .map((k) => (JSON.parse(fs.readFileSync(path.join(root, 'rootfs', k, 'complete.json'), 'utf8')) as { source: string }).source);
      // Prompt 2 was admitted; 3, 4 and 5 come next (prefetch_ahead 3); 0 and 1 are the earlier test's.
      expect(sources.map((s) => path.basename(s)).sort()).toEqual([0, 1, 3, 4, 5].map((i) => `sweb.eval.x86_64.acme_s_pkg-${i}.sif`));
      expect(((await client.status()) as unknown as { jobs: number }).jobs).toBe(0);
    } finally {
      await c.close();
      await pending;
    }
  });
});
