// The results journal on its own, on real files: appends and reads back by place, the last line of
// an id wins on reload, expired, torn and foreign lines are dropped and the file is compacted, only
// the newest `keep` results come back as JSON, and reads after close or from a replaced file say
// "not there" instead of answering with another job's result.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ResultsJournal } from '../../src/server/pipeline/journal.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function dir(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'raas-journal-unit-'));
  dirs.push(d);
  return d;
}
const line = (job_id: string, ended_at: number, result: object = { job_id }, state = 'done') =>
  JSON.stringify({ job_id, state, ended_at, instance_hash: `h-${job_id}`, result });

describe('ResultsJournal', () => {
  it('starts empty in a new directory (created), appends lines and reads each back by its place', async () => {
    const d = path.join(dir(), 'nested', 'journal');
    const j = new ResultsJournal(d);
    expect(j.file).toBe(path.join(d, 'results.jsonl'));
    expect(await j.open(1000, 0)).toEqual([]);
    const a = j.append('a', 'done', 5, 'ha', '{"job_id":"a","reward":1}')!;
    const b = j.append('b/é', 'failed', 6, 'hb', '{"job_id":"b/é"}')!;
    expect(a).toEqual({ offset: 0, length: Buffer.byteLength(line('a', 5, { job_id: 'a', reward: 1 }).replace('h-a', 'ha')) });
    expect(b.offset).toBe(a.length + 1);
    expect(await j.read('a', a)).toBe('{"job_id":"a","reward":1}');
    expect(await j.read('b/é', b)).toBe('{"job_id":"b/é"}');
    expect(await j.read('a', b)).toBeUndefined(); // another job's line is not an answer
    expect(await j.read('a', { offset: a.offset, length: a.length - 1 })).toBeUndefined(); // a torn read neither
    await j.close();
    await j.close();
    expect(await j.read('a', a)).toBeUndefined(); // closed
    expect(j.append('c', 'done', 7, 'hc', '{}')).toBeUndefined();
    const text = readFileSync(j.file, 'utf8');
    expect(text.split('\n')).toHaveLength(3);
    expect(JSON.parse(text.split('\n')[1])).toEqual({
      job_id: 'b/é',
      state: 'failed',
      ended_at: 6,
      instance_hash: 'hb',
      result: { job_id: 'b/é' },
    });
  });

  it('reloads the last line of each id within the ttl, drops expired, torn and foreign lines, and compacts the file', async () => {
    const d = dir();
    const file = path.join(d, 'results.jsonl');
    writeFileSync(
      file,
      [
        line('old', 100),
        line('x', 900, { v: 1 }),
        'not json',
        JSON.stringify({ job_id: 'nores', ended_at: 950 }),
        JSON.stringify({ job_id: 7, ended_at: 950, result: {} }),
        '',
        line('x', 950, { v: 2 }, 'failed'),
        line('y', 960, { v: 3 }),
        '{"job_id":"torn","ended_at":99',
      ].join('\n'),
    );
    const j = new ResultsJournal(d);
    const got = await j.open(500, 1000); // ttl 500 ms at wall time 1000: ended_at >= 500 answers
    expect(got.map((e) => [e.job_id, e.state, e.ended_at, e.instance_hash])).toEqual([
      ['x', 'failed', 950, 'h-x'],
      ['y', 'done', 960, 'h-y'],
    ]);
    expect(got.map((e) => e.json)).toEqual(['{"v":2}', '{"v":3}']);
    expect(readFileSync(file, 'utf8')).toBe(`${line('x', 950, { v: 2 }, 'failed')}\n${line('y', 960, { v: 3 })}\n`);
    expect(await j.read('x', got[0].at)).toBe('{"v":2}');
    expect(await j.read('y', got[1].at)).toBe('{"v":3}');
    // appends go after the compacted lines
    const z = j.append('z', 'done', 1001, 'hz', '{"v":4}')!;
    expect(z.offset).toBe(got[1].at.offset + got[1].at.length + 1);
    expect(await j.read('z', z)).toBe('{"v":4}');
    await j.close();
  });

  it('gives the JSON of the newest `keep` results only; the older ones are read from their lines', async () => {
    const d = dir();
    writeFileSync(path.join(d, 'results.jsonl'), [line('a', 1), line('b', 2), line('c', 3)].join('\n') + '\n');
    const j = new ResultsJournal(d);
    const got = await j.open(1e9, 10, 1);
    expect(got.map((e) => [e.job_id, e.json])).toEqual([
      ['a', undefined],
      ['b', undefined],
      ['c', '{"job_id":"c"}'],
    ]);
    expect(await j.read('a', got[0].at)).toBe('{"job_id":"a"}');
    await j.close();
    const none = new ResultsJournal(d);
    expect((await none.open(1e9, 10, 0)).every((e) => e.json === undefined)).toBe(true);
    await none.close();
  });

  it('a file replaced by hand answers "not there" rather than another result', async () => {
    const d = dir();
    const j = new ResultsJournal(d);
    await j.open(1e9, 0);
    const a = j.append('a', 'done', 1, 'h', '{"job_id":"a"}')!;
    expect(await j.read('a', a)).toBe('{"job_id":"a"}');
    await j.close();
    writeFileSync(j.file, line('b', 1) + '\n');
    const k = new ResultsJournal(d);
    await k.open(1e9, 0);
    expect(await k.read('a', a)).toBeUndefined();
    await k.close();
  });

  it('reads a line once its write reached the file, even right after the append', async () => {
    const d = dir();
    const j = new ResultsJournal(d);
    await j.open(1e9, 0);
    const big = JSON.stringify({ blob: 'x'.repeat(1 << 20) });
    const places = Array.from({ length: 5 }, (_, i) => j.append(`j${i}`, 'done', i, 'h', big)!);
    const reads = await Promise.all(places.map((at, i) => j.read(`j${i}`, at)));
    expect(reads.every((r) => r === big)).toBe(true);
    await j.close();
  });
  it('reloads a file of several MiB whose lines straddle the 1 MiB read chunks, a foreign one-byte line first, blank lines between', async () => {
    const d = dir();
    const file = path.join(d, 'results.jsonl');
    // 3,000 lines of ~1.5 KiB of varied length (4.5 MiB): many cross a chunk boundary.
    const ids = Array.from({ length: 3000 }, (_, i) => `job-${i}`);
    const body = ids.map((id, i) => line(id, 10, { job_id: id, pad: 'x'.repeat(1000 + ((i * 37) % 900)) }));
    writeFileSync(file, `x\n${body.slice(0, 1500).join('\n')}\n\n\n${body.slice(1500).join('\n')}`); // no newline at the end
    const j = new ResultsJournal(d);
    const back = await j.open(1000, 20, 2);
    expect(back.map((e) => e.job_id)).toEqual(ids);
    expect(back.filter((e) => e.json !== undefined).map((e) => e.job_id)).toEqual(['job-2998', 'job-2999']);
    for (const i of [0, 1, 699, 700, 1499, 1500, 2222, 2999]) {
      expect(JSON.parse((await j.read(ids[i]!, back[i]!.at))!).pad).toHaveLength(1000 + ((i * 37) % 900));
    }
    await j.close();
    expect(readFileSync(file, 'utf8')).toBe(`${body.join('\n')}\n`); // compacted: foreign and blank lines gone
  });
});
