import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import type { SimPolicy } from '../../src/sim/policy.js';
import { parseTranscript } from '../../src/sim/policies/transcript.js';

// The one-file handler of docs/tasks.md (examples/write-file/write-file.ts, importing from 'raas'),
// loaded through handler_modules into a real server.
const here = path.dirname(fileURLToPath(import.meta.url));
let sim: SimHandle;
let srv: RolloutServer;
const root = `${process.getuid?.() === 0 ? '/var/tmp' : '/tmp'}/raas-t-h4-custom-${process.pid}`;

/** Writes the requested file (with a typo when the prompt says "typo"), then finishes. */
const writer: SimPolicy = {
  name: 'writer',
  respond(ctx) {
    const t = parseTranscript(ctx.promptText);
    const m = /Create \/workspace\/(\S+) whose content is exactly:\n([\s\S]*)$/.exec(t.firstUser ?? '');
    if (!m) return undefined;
    const content = m[2]!.includes('typo') ? m[2]!.replace('typo', 'tpyo') : m[2]!;
    if (t.assistant.length === 0)
      return {
        text: `<tool_call>\n${JSON.stringify({ name: 'str_replace_editor', arguments: { command: 'create', path: `/workspace/${m[1]}`, file_text: content } })}\n</tool_call>`,
      };
    return { text: 'Done.\n<tool_call>\n{"name": "finish", "arguments": {"message": "written"}}\n</tool_call>' };
  },
};

beforeAll(async () => {
  sim = await startSim({ seed: 1 }, { policies: [writer] });
  srv = await startRolloutServer({
    port: 0,
    log_level: 'silent',
    sandbox: { runtime: 'bwrap', root },
    handler_modules: [path.join(here, '../../examples/write-file/write-file.ts')],
  });
  await fetch(`${srv.url}/add_llm_server`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ address: sim.url }),
  });
}, 60_000);
afterAll(async () => {
  await srv?.close();
  await sim?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

async function process(instance: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const res = await fetch(`${srv.url}/process`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ instance }),
  });
  return { status: res.status, body: await res.json() };
}

it('runs the documented one-file handler end to end and grades it', async () => {
  const ok = await process({ data_source: 'write_file', path: 'notes/hello.txt', content: 'hello raas' });
  expect(ok.status).toBe(200);
  expect(ok.body).toMatchObject({ critical_error: null, finish_reason: 'finish', reward: 1, resolved: true, data_source: 'write_file' });
  const typo = await process({ data_source: 'touch', path: 'a.txt', content: 'a typo here' });
  expect(typo.body).toMatchObject({ critical_error: null, reward: 0 });
  const bad = await process({ data_source: 'write_file', path: '/etc/passwd', content: 'x' });
  expect(bad.status).toBe(400);
  expect(bad.body.error.message).toMatch(/path/);
}, 60_000);

it('the handler and its simulator script are the files docs/tasks.md prints (examples/write-file)', () => {
  const doc = fs.readFileSync(path.join(here, '../../docs/tasks.md'), 'utf8');
  for (const file of ['write-file.ts', 'write-file.sim.ts']) {
    const start = doc.indexOf(`// examples/write-file/${file}:`);
    expect(start, file).toBeGreaterThan(0);
    expect(fs.readFileSync(path.join(here, '../../examples/write-file', file), 'utf8')).toBe(doc.slice(start, doc.indexOf('```', start)));
  }
});
