import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PausableTimer, loadServerConfig, loadHandlerModules, HandlerRegistry } from '../../src/server/index.js';
import { systemClock } from '../../src/util/clock.js';

describe('PausableTimer (fake timers)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('counts only resumed stretches and fires once at the limit', () => {
    let fired = 0;
    const t = new PausableTimer(1_000, systemClock, () => fired++);
    vi.advanceTimersByTime(5_000); // not started: nothing counts
    t.resume();
    vi.advanceTimersByTime(600);
    t.pause();
    expect(t.elapsedMs()).toBe(600);
    vi.advanceTimersByTime(10_000); // paused (a queue): nothing counts
    expect(fired).toBe(0);
    t.resume();
    vi.advanceTimersByTime(399);
    expect(fired).toBe(0);
    vi.advanceTimersByTime(1);
    expect(fired).toBe(1);
    expect(t.expired).toBe(true);
    expect(t.elapsedMs()).toBe(1_000);
    t.resume();
    vi.advanceTimersByTime(5_000);
    expect(fired).toBe(1);
  });

  it('dispose stops counting without firing', () => {
    let fired = 0;
    const t = new PausableTimer(100, systemClock, () => fired++);
    t.resume();
    vi.advanceTimersByTime(50);
    t.dispose();
    vi.advanceTimersByTime(500);
    expect(fired).toBe(0);
    expect(t.expired).toBe(false);
    expect(t.elapsedMs()).toBe(50);
  });
});

describe('server config and handler modules', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'raas-cfg-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('fills every default, lets flags override the file, and names a bad key', async () => {
    const file = path.join(dir, 'server.yaml');
    await writeFile(file, 'port: 9100\nworkers:\n  run: 8\nllm:\n  routing: assigned\n');
    const { config } = await loadServerConfig(file, { port: 9200, llm: { affinity_margin: 2 } });
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 9200,
      workers: { init: 16, run: 8, eval: 16 },
      timeout_s: 600,
      result_ttl_s: 3600,
      max_queued_jobs: 4096,
      body_limit_bytes: 8 * 1024 * 1024,
      llm: { routing: 'assigned', affinity_margin: 2, group_affinity: true },
    });
    await writeFile(file, 'workers:\n  run: many\n');
    await expect(loadServerConfig(file)).rejects.toMatchObject({ code: 'config_invalid', message: expect.stringContaining('workers.run') });
    await writeFile(file, 'wokers: 3\n');
    await expect(loadServerConfig(file)).rejects.toMatchObject({
      message: expect.stringContaining('`wokers`: unknown key; did you mean `workers`?'),
    });
    await writeFile(file, '- a\n- b\n');
    await expect(loadServerConfig(file)).rejects.toMatchObject({ message: expect.stringContaining('mapping') });
    await expect(loadServerConfig(path.join(dir, 'missing.yaml'))).rejects.toMatchObject({ code: 'config_invalid' });
  });

  it('loads handler modules by path (a handler or an array) and refuses malformed ones', async () => {
    const good = path.join(dir, 'one.mjs');
    await writeFile(
      good,
      `export default { name: 'one', instance: { '~standard': { version: 1, vendor: 't', validate: (v) => ({ value: v }) } }, init: async () => ({}), run: async () => ({}), eval: async () => ({ reward: 0, resolved: false }) };`,
    );
    const handlers = await loadHandlerModules(['one.mjs', path.join(process.cwd(), 'test/server/fixtures/slow-handler.mjs')], dir);
    expect(handlers.map((h) => h.name)).toEqual(['one', 'slow']);
    const reg = new HandlerRegistry(handlers);
    expect(reg.resolve('one')?.name).toBe('one');
    expect(() => reg.register(handlers[0])).toThrow(/already registered/);
    const bad = path.join(dir, 'bad.mjs');
    await writeFile(bad, `export default { name: 'bad', init() {} };`);
    await expect(loadHandlerModules([bad])).rejects.toMatchObject({
      code: 'config_invalid',
      message: expect.stringMatching(/instance.*run\(\).*eval\(\)/),
    });
    await expect(loadHandlerModules([path.join(dir, 'nope.mjs')])).rejects.toMatchObject({
      code: 'config_invalid',
      message: expect.stringContaining('cannot load'),
    });
  });
});
