// Lint-style guard: host code that handles sandboxes never opens a path inside a workspace. Every
// file a handler needs from a sandbox is read through it (sb.readFile, sb.exec), as the sandbox
// user, so a symlink, FIFO or device the task planted never reaches a read by the server (root).
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const HANDLERS = path.join(ROOT, 'src/server/handlers');
const SANDBOX = path.join(ROOT, 'src/server/sandbox');

function tsFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => path.join(e.parentPath, e.name));
}

/** Calls of node:fs (sync, promise or callback) and other ways to open a path. */
const FS_CALL =
  /\b(?:fs|fsp|promises)\.\w+\(|(?<![.\w])(?<!^\s*)(?:readFile|readFileSync|writeFile|writeFileSync|open|openSync|createReadStream|createWriteStream|stat|statSync|lstat|lstatSync|readdir|readdirSync|rm|rmSync|unlink|unlinkSync|chmod|chmodSync|chown|chownSync|cp|cpSync|copyFile|copyFileSync|realpath|realpathSync|readlink|readlinkSync|access|accessSync|existsSync)\(/;
/** What names a workspace on the host. */
const WORKSPACE = /\bworkspace\b|\bsb\b|\bsandbox\b|\bruntime\b\.|ctx\.runtime/i;

/**
 * Files that may create or remove host directories of sandboxes: before any sandbox code runs
 * (creation, image seeding) or after every sandbox process is gone (removal, without following
 * links). Each entry says why.
 */
const ALLOWED: Record<string, string> = {
  'src/server/sandbox/workspace.ts':
    'creates host workspaces before the sandbox starts; removes them after its processes are gone (no-follow)',
  'src/server/sandbox/image-root.ts':
    "lstats the image's own tree in the image cache (never a sandbox's workspace; the overlay keeps it unchanged), without following a link",
};

/**
 * Lines that name a sandbox's workspace only as text for the model or an error message (the path
 * inside the sandbox, which differs per image: /workspace, /testbed), never for a host fs call.
 */
const TEXT_USES: Array<{ file: string; line: string; why: string }> = [
  {
    file: 'src/server/handlers/swe/index.ts',
    line: "const dir = ctx.runtime?.workspace ?? '/workspace';",
    why: 'the prompt names the directory',
  },
  {
    file: 'src/server/handlers/swe/image.ts',
    line: 'could not set up the repository of the image at ${sb.workspace}',
    why: 'an error message names the directory',
  },
];
const textUse = (rel: string, line: string): boolean =>
  TEXT_USES.some((t) => t.file === rel && line.includes(t.line) && !FS_CALL.test(line));

/** Strips comments so documentation that mentions the workspace does not count. */
function code(src: string): string[] {
  return src
    .replace(/\/\*[\s\S]*?\*\//g, (m) => m.replace(/[^\n]/g, ' '))
    .split('\n')
    .map((l) => l.replace(/\/\/.*$/, ''));
}

describe('no host-side reads of sandbox workspaces', () => {
  it('handlers never touch a workspace path: no .workspace, no fs call on a sandbox path', () => {
    const bad: string[] = [];
    for (const f of tsFiles(HANDLERS)) {
      code(fs.readFileSync(f, 'utf8')).forEach((line, i) => {
        const rel = path.relative(ROOT, f);
        const at = `${rel}:${i + 1}: ${line.trim()}`;
        if (/\.workspace\b/.test(line) && !textUse(rel, line)) bad.push(at);
        else if (FS_CALL.test(line) && WORKSPACE.test(line)) bad.push(at);
      });
    }
    expect(bad, `read sandbox files with sb.readFile(path, { maxBytes }) or sb.exec(argv) instead:\n${bad.join('\n')}`).toEqual([]);
  });

  it('sandbox code opens workspace paths only where it creates or removes them', () => {
    const bad: string[] = [];
    for (const f of tsFiles(SANDBOX)) {
      const rel = path.relative(ROOT, f);
      if (ALLOWED[rel]) continue;
      code(fs.readFileSync(f, 'utf8')).forEach((line, i) => {
        if (FS_CALL.test(line) && /workspace/i.test(line)) bad.push(`${rel}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(bad, `the host must not open paths inside a workspace:\n${bad.join('\n')}`).toEqual([]);
  });

  it('the guard itself catches a host read of a workspace file (so it cannot pass vacuously)', () => {
    const sample = "const s = await readFile(path.join(sb.workspace, 'solution.py'), 'utf8');";
    expect(/\.workspace\b/.test(sample)).toBe(true);
    expect(FS_CALL.test("fs.readFileSync(join(workspace, 'x'))") && WORKSPACE.test("fs.readFileSync(join(workspace, 'x'))")).toBe(true);
    expect(tsFiles(HANDLERS).length).toBeGreaterThan(5);
    expect(tsFiles(SANDBOX).length).toBeGreaterThan(5);
  });
});
