import fs from 'node:fs';
import path from 'node:path';
import { capText } from './output-cap.js';
import type { EditAnswer } from './protocol.js';

export type { EditAnswer } from './protocol.js';

class EditRefused extends Error {}

const SNIPPET_LINES = 4;

/**
 * File editor with the commands of the SWE-agent / OpenHands editor: view, create, str_replace,
 * insert, undo_edit. Every path is confined to the workspace: `..` segments are refused, and the
 * real path (symlinks resolved) of the file or its nearest existing ancestor must stay inside.
 */
export class Editor {
  private readonly root: string;
  private readonly history = new Map<string, string[]>();

  constructor(
    workspace: string,
    private readonly cap = 30_000,
  ) {
    this.root = fs.realpathSync(workspace);
  }

  /** Runs one operation; every refusal or failure is an answer with `ok: false`, never a throw. */
  run(op: Record<string, unknown>): EditAnswer {
    try {
      return { ok: true, output: this.dispatch(op) };
    } catch (e) {
      const msg = e instanceof EditRefused ? e.message : `edit failed: ${(e as Error).message}`;
      return { ok: false, output: msg };
    }
  }

  private dispatch(op: Record<string, unknown>): string {
    const cmd = op.command;
    const p = this.resolve(op.path);
    switch (cmd) {
      case 'view':
        return this.view(p, op.view_range);
      case 'create':
        return this.create(p, str(op.file_text, 'file_text'));
      case 'str_replace':
        return this.strReplace(p, str(op.old_str, 'old_str'), op.new_str === undefined ? '' : str(op.new_str, 'new_str'));
      case 'insert':
        return this.insert(p, op.insert_line, str(op.new_str, 'new_str'));
      case 'undo_edit':
        return this.undo(p);
      default:
        throw new EditRefused(`unknown command ${JSON.stringify(cmd)}: use one of view, create, str_replace, insert, undo_edit`);
    }
  }

  /** Maps a path (absolute inside the workspace, or relative to it) to a host path, refusing escapes. */
  private resolve(raw: unknown): string {
    if (typeof raw !== 'string' || raw === '') throw new EditRefused('path is required (a file or directory inside the workspace)');
    if (raw.includes('\0')) throw new EditRefused('path contains a NUL byte');
    if (raw.split(/[\\/]+/).includes('..')) throw new EditRefused(`path ${raw} contains "..": paths must stay inside the workspace`);
    let p = raw;
    // The agent sees the workspace as /workspace in a sandbox; accept that spelling too.
    if (p === '/workspace' || p.startsWith('/workspace/')) p = path.join(this.root, p.slice('/workspace'.length));
    else if (!path.isAbsolute(p)) p = path.join(this.root, p);
    p = path.normalize(p);
    if (!inside(this.root, p)) throw new EditRefused(`path ${raw} is outside the workspace ${this.root}`);
    // Resolve symlinks on the longest existing prefix.
    let probe = p;
    while (!fs.existsSync(probe) && probe !== this.root) probe = path.dirname(probe);
    const real = fs.realpathSync(probe);
    if (!inside(this.root, real)) throw new EditRefused(`path ${raw} resolves through a symlink to ${real}, outside the workspace`);
    return p;
  }

  private view(p: string, range: unknown): string {
    if (!fs.existsSync(p)) throw new EditRefused(`${this.show(p)} does not exist`);
    if (fs.statSync(p).isDirectory()) {
      if (range !== undefined) throw new EditRefused('view_range applies to files, not directories');
      const lines = listTwoLevels(p, this.root);
      return capText(`Files and directories up to 2 levels deep in ${this.show(p)}, hidden items excluded:\n${lines.join('\n')}`, this.cap)
        .text;
    }
    const text = this.read(p);
    const all = text.split('\n');
    let start = 1;
    let end = all.length;
    if (range !== undefined) {
      if (!Array.isArray(range) || range.length !== 2 || !range.every((n) => Number.isInteger(n))) {
        throw new EditRefused('view_range must be two integers [start, end] (end -1 means the last line)');
      }
      [start, end] = range as [number, number];
      if (end === -1) end = all.length;
      if (start < 1 || start > all.length) throw new EditRefused(`view_range start ${start} must be within [1, ${all.length}]`);
      if (end < start || end > all.length) throw new EditRefused(`view_range end ${end} must be within [${start}, ${all.length}] or -1`);
    }
    return capText(numbered(all.slice(start - 1, end), start), this.cap).text;
  }

  private create(p: string, text: string): string {
    if (fs.existsSync(p))
      throw new EditRefused(`${this.show(p)} already exists: create refuses to overwrite; use str_replace, or view it first`);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, text);
    this.push(p, undefined);
    return `File created successfully at: ${this.show(p)}`;
  }

  private strReplace(p: string, oldStr: string, newStr: string): string {
    const text = this.readFile(p);
    if (oldStr === '') throw new EditRefused('old_str must not be empty');
    const count = text.split(oldStr).length - 1;
    if (count === 0) throw new EditRefused(`No replacement was performed: old_str did not appear verbatim in ${this.show(p)}.`);
    if (count > 1) {
      const lines: number[] = [];
      let at = text.indexOf(oldStr);
      while (at >= 0) {
        lines.push(text.slice(0, at).split('\n').length);
        at = text.indexOf(oldStr, at + 1);
      }
      throw new EditRefused(
        `No replacement was performed: old_str occurs ${count} times in ${this.show(p)} (lines ${lines.join(', ')}); make it unique.`,
      );
    }
    const at = text.indexOf(oldStr);
    const next = text.slice(0, at) + newStr + text.slice(at + oldStr.length);
    this.push(p, text);
    fs.writeFileSync(p, next);
    const line = text.slice(0, at).split('\n').length;
    return `The file ${this.show(p)} has been edited. ${this.snippet(next, line, newStr.split('\n').length)}`;
  }

  private insert(p: string, at: unknown, newStr: string): string {
    const text = this.readFile(p);
    const lines = text.split('\n');
    if (!Number.isInteger(at) || (at as number) < 0 || (at as number) > lines.length) {
      throw new EditRefused(`insert_line must be an integer within [0, ${lines.length}] (0 inserts at the top)`);
    }
    const n = at as number;
    const next = [...lines.slice(0, n), ...newStr.split('\n'), ...lines.slice(n)].join('\n');
    this.push(p, text);
    fs.writeFileSync(p, next);
    return `The file ${this.show(p)} has been edited. ${this.snippet(next, n + 1, newStr.split('\n').length)}`;
  }

  private undo(p: string): string {
    const stack = this.history.get(p);
    if (!stack || stack.length === 0) throw new EditRefused(`No edit history for ${this.show(p)}`);
    const prev = stack.pop()!;
    // A NUL-prefixed sentinel marks "the file did not exist before create" (file text never holds NUL).
    if (prev === '\0created') fs.rmSync(p, { force: true });
    else fs.writeFileSync(p, prev);
    return prev === '\0created'
      ? `Undid the creation of ${this.show(p)}`
      : `Last edit to ${this.show(p)} undone successfully. ${this.snippet(prev, 1, 0)}`;
  }

  private push(p: string, prev: string | undefined): void {
    const stack = this.history.get(p) ?? [];
    stack.push(prev ?? '\0created');
    this.history.set(p, stack);
  }

  private readFile(p: string): string {
    if (!fs.existsSync(p)) throw new EditRefused(`${this.show(p)} does not exist; create it first`);
    if (fs.statSync(p).isDirectory()) throw new EditRefused(`${this.show(p)} is a directory`);
    return this.read(p);
  }

  private read(p: string): string {
    const buf = fs.readFileSync(p);
    if (buf.includes(0)) throw new EditRefused(`${this.show(p)} looks binary (contains NUL bytes); the editor handles text files`);
    return buf.toString('utf8');
  }

  private snippet(text: string, line: number, count: number): string {
    const lines = text.split('\n');
    const from = Math.max(1, line - SNIPPET_LINES);
    const to = Math.min(lines.length, line + Math.max(count, 1) - 1 + SNIPPET_LINES);
    return `Here is a snippet of the file:\n${capText(numbered(lines.slice(from - 1, to), from), this.cap).text}\nReview the changes and edit the file again if needed.`;
  }

  /** Paths as the agent sees them (relative to the workspace root). */
  private show(p: string): string {
    const rel = path.relative(this.root, p);
    return rel === '' ? '.' : rel;
  }
}

function str(v: unknown, name: string): string {
  if (typeof v !== 'string') throw new EditRefused(`${name} is required and must be a string`);
  return v;
}

function inside(root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

function numbered(lines: string[], first: number): string {
  return lines.map((l, i) => `${String(first + i).padStart(6)}\t${l}`).join('\n');
}

function listTwoLevels(dir: string, root: string): string[] {
  const out: string[] = [];
  const walk = (d: string, depth: number): void => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name));
    } catch {
      return;
    }
    for (const e of entries) {
      if (e.name.startsWith('.')) continue;
      const full = path.join(d, e.name);
      out.push(path.relative(root, full) + (e.isDirectory() ? '/' : ''));
      if (e.isDirectory() && depth < 2) walk(full, depth + 1);
    }
  };
  walk(dir, 1);
  return out;
}
