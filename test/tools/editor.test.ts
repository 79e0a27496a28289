import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EditOp, EditResult } from '../../src/server/sandbox/types.js';
import { startToolServer } from './helpers.js';

describe('editor in the tool server (real files)', () => {
  let t: Awaited<ReturnType<typeof startToolServer>>;
  const edit = (op: EditOp | Record<string, unknown>): Promise<EditResult> => t.client.call<EditResult>('edit', { op });
  beforeAll(async () => {
    t = await startToolServer();
  });
  afterAll(async () => t.close());

  it('creates, refuses to overwrite, and views with line numbers and a range', async () => {
    expect((await edit({ command: 'create', path: 'src/a.py', file_text: 'one\ntwo\nthree\nfour' })).ok).toBe(true);
    const again = await edit({ command: 'create', path: 'src/a.py', file_text: 'x' });
    expect(again).toMatchObject({ ok: false });
    expect(again.output).toMatch(/already exists/);
    expect((await edit({ command: 'view', path: 'src/a.py' })).output).toBe('     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour');
    expect((await edit({ command: 'view', path: '/workspace/src/a.py', view_range: [2, 3] })).output).toBe('     2\ttwo\n     3\tthree');
    expect((await edit({ command: 'view', path: 'src/a.py', view_range: [3, -1] })).output).toBe('     3\tthree\n     4\tfour');
    expect((await edit({ command: 'view', path: 'src/a.py', view_range: [9, 10] })).ok).toBe(false);
  });

  it('lists directories two levels deep without hidden entries', async () => {
    fs.mkdirSync(path.join(t.workspace, 'src/deep/deeper'), { recursive: true });
    fs.writeFileSync(path.join(t.workspace, 'src/deep/deeper/x.txt'), '');
    fs.writeFileSync(path.join(t.workspace, '.hidden'), '');
    const out = (await edit({ command: 'view', path: '.' })).output;
    expect(out).toContain('src/a.py');
    expect(out).toContain('src/deep/');
    expect(out).not.toContain('deeper/x.txt');
    expect(out).not.toContain('.hidden');
  });

  it('str_replace needs exactly one occurrence and says how many it found', async () => {
    await edit({ command: 'create', path: 'b.txt', file_text: 'a\nb\na\n' });
    const twice = await edit({ command: 'str_replace', path: 'b.txt', old_str: 'a', new_str: 'z' });
    expect(twice.ok).toBe(false);
    expect(twice.output).toMatch(/occurs 2 times in b.txt \(lines 1, 3\)/);
    expect((await edit({ command: 'str_replace', path: 'b.txt', old_str: 'q', new_str: 'z' })).output).toMatch(/did not appear/);
    const ok = await edit({ command: 'str_replace', path: 'b.txt', old_str: 'b\n', new_str: 'B\n' });
    expect(ok.ok).toBe(true);
    expect(ok.output).toContain('     2\tB');
    expect(fs.readFileSync(path.join(t.workspace, 'b.txt'), 'utf8')).toBe('a\nB\na\n');
  });

  it('inserts after a line and undoes edits in order', async () => {
    await edit({ command: 'insert', path: 'b.txt', insert_line: 1, new_str: 'ins' });
    expect(fs.readFileSync(path.join(t.workspace, 'b.txt'), 'utf8')).toBe('a\nins\nB\na\n');
    expect((await edit({ command: 'insert', path: 'b.txt', insert_line: 99, new_str: 'x' })).ok).toBe(false);
    await edit({ command: 'undo_edit', path: 'b.txt' });
    expect(fs.readFileSync(path.join(t.workspace, 'b.txt'), 'utf8')).toBe('a\nB\na\n');
    await edit({ command: 'undo_edit', path: 'b.txt' });
    expect(fs.readFileSync(path.join(t.workspace, 'b.txt'), 'utf8')).toBe('a\nb\na\n');
  });

  it('refuses .. and symlink escapes and paths outside the workspace', async () => {
    fs.symlinkSync('/etc', path.join(t.workspace, 'etc-link'));
    fs.symlinkSync('/etc/passwd', path.join(t.workspace, 'passwd-link'));
    for (const p of ['../outside.txt', 'src/../../x', '/etc/passwd', 'etc-link/passwd', 'passwd-link', 'etc-link/new.txt']) {
      const r = await edit({ command: 'view', path: p });
      expect(r.ok, p).toBe(false);
      const c = await edit({ command: 'create', path: p, file_text: 'pwned' });
      expect(c.ok, p).toBe(false);
    }
    expect(fs.existsSync('/etc/new.txt')).toBe(false);
  });

  it('answers unknown commands and missing fields with a message', async () => {
    expect((await edit({ command: 'delete', path: 'b.txt' })).output).toMatch(/unknown command/);
    expect((await edit({ command: 'str_replace', path: 'b.txt' })).output).toMatch(/old_str is required/);
  });
});
