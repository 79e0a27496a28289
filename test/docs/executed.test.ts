import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RUNNABLE, docBlocks, type DocBlock } from './blocks.js';

// Executed docs: every shell, TypeScript and Python block of README.md and docs/*.md runs here, so a
// doc that drifts from the code fails CI. A block that cannot run on a developer machine says why
// in an HTML comment right before it: `<!-- not-executed: needs a GPU -->` (counted below).
//
// How blocks run (the rewrites keep them short; nothing else about a command changes):
// - shell: one bash script per doc (`set -e`), in the repository, `raas` on PATH (dist/src/cli.js);
//   `npm run raas --` is `raas`; `bash scripts/setup.sh &&`, `npm ci && npm run build`, `npm run
//   build`, `npm test` and `pip install -e bridges/python` are skipped (the checkout is built, the
//   suite is this suite, PYTHONPATH has the bridge); `raas train` gets `--steps 1 --set batch_size=1
//   --output-dir <tmp>`, `raas eval` `--set dataset.limit=2 --n 2 --output <tmp>`, train_loop.py
//   `--steps 1`; `raas view runs/<name>` reads the run a `raas train` block wrote under <tmp>/runs;
//   `raas serve`, `raas sim-llm` and `raas view` get free ports (8006, 9000 and 8007 in the text are
//   replaced); the script waits for their /health after a backgrounded one, and a foreground one is
//   started, checked healthy and stopped; curl fails on an HTTP error and on a result whose
//   critical_error is set; `raas show` and `raas audit-drift` read `runs/` under <tmp>. Background
//   processes are killed when the script ends.
// - TypeScript: written under .raas/docs-test/ in the repository (so `import ... from 'raas'`
//   resolves to this package) and run with tsx.
// - Python: python3 with bridges/python on PYTHONPATH, in the repository; RaasSidecar gets
//   `--set batch_size=1` (one accepted group per step) and its run directory under <tmp>.

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const DOCS = [
  'README.md',
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];
const ALL = DOCS.flatMap((d) => docBlocks(path.join(ROOT, d)).map((b) => ({ ...b, file: d })));
const RUN = ALL.filter((b) => RUNNABLE.has(b.lang));
const OUT = mkdtempSync(path.join(tmpdir(), 'raas-docs-'));
const TS_DIR = path.join(ROOT, '.raas', 'docs-test');
afterAll(() => {
  rmSync(OUT, { recursive: true, force: true });
  rmSync(TS_DIR, { recursive: true, force: true });
});

const BIN = path.join(OUT, 'bin');
mkdirSync(BIN, { recursive: true });
writeFileSync(path.join(BIN, 'raas'), `#!/bin/sh\nexec "${process.execPath}" "${ROOT}/dist/src/cli.js" "$@"\n`);
chmodSync(path.join(BIN, 'raas'), 0o755);

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

/** Runs a command; resolves with its exit code and output (killed with its process group after `timeoutMs`). */
function run(
  cmd: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string } = {},
): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: ROOT, env: { ...process.env, ...opts.env }, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.stderr.on('data', (c: Buffer) => (out += c));
    const limit = opts.timeoutMs ?? 240_000;
    const timer = setTimeout(() => {
      out += `\n[docs test: timed out after ${limit} ms]`;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, limit);
    child.on('close', (code) => {
      clearTimeout(timer);
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
      resolve({ code, out });
    });
    child.stdin.end(opts.input ?? '');
  });
}

/** Shell lines of a block: continuation lines joined, `console` prompts stripped, output lines dropped. */
function shellLines(b: DocBlock): string[] {
  const raw =
    b.lang === 'console'
      ? b.code
          .split('\n')
          .filter((l) => l.startsWith('$ '))
          .map((l) => l.slice(2))
      : b.code.split('\n');
  const out: string[] = [];
  for (const l of raw) {
    if (out.length && out.at(-1)!.endsWith('\\')) out[out.length - 1] = out.at(-1)!.slice(0, -1) + ' ' + l.trim();
    else out.push(l);
  }
  return out;
}

/** The rewrites listed at the top of this file. */
function rewrite(line: string, ports: { serve: number; sim: number; view: number }, out: string): string[] {
  let l = line.replace(/\bnpm run raas -- /g, 'raas ').replace(/^bash scripts\/setup\.sh && /, '');
  if (/^\s*(npm ci\b|npm run build\b|npm test\b|pip install -e bridges\/python)/.test(l)) return [`: skipped: ${l.replace(/'/g, '')}`];
  l = l.replace(/(localhost|127\.0\.0\.1):8006\b/g, `127.0.0.1:${ports.serve}`).replace(/\b9000\b/g, String(ports.sim));
  l = l.replace(/(localhost|127\.0\.0\.1):8007\b/g, `127.0.0.1:${ports.view}`);
  if (/^\s*raas view\b/.test(l)) {
    l = l.replace(/^(\s*raas view\s+)runs\//, `$1${out}/runs/`);
    if (!/--port/.test(l)) l = l.replace(/^(\s*raas view)/, `$1 --port ${ports.view}`);
  }
  if (/^\s*raas train\b.*--resume\s/.test(l)) {
    // A resume continues the run an earlier block started under <tmp>/runs, one step further at most.
    l = l.replace(/--resume\s+runs\//, `--resume ${out}/runs/`).replace(/--steps\s+\d+/, '--steps 2');
  } else l = l.replace(/^(\s*raas train\s+\S+)/, `$1 --steps 1 --set batch_size=1 --output-dir ${out}/runs`);
  l = l.replace(/^(\s*raas eval\s+\S+)/, `$1 --set dataset.limit=2 --n 2 --output ${out}/eval.json`);
  // Commands that read a run directory read the one an earlier block's raas train wrote under <tmp>/runs.
  if (/^\s*raas (show|audit-drift)\b/.test(l)) l = l.replace(/(\s)runs\//g, `$1${out}/runs/`);
  l = l.replace(/(examples\/python\/train_loop\.py(\s+\S+\.yaml)?)/, '$1 --steps 1');
  if (/^\s*raas serve\b/.test(l) && !/--port/.test(l)) l = l.replace(/^(\s*raas serve)/, `$1 --port ${ports.serve}`);
  l = l.replace(/\bcurl -s\b/g, 'doc_curl');
  const server = /^\s*raas serve\b/.test(l)
    ? ports.serve
    : /^\s*raas sim-llm\b/.test(l)
      ? ports.sim
      : /^\s*raas view\b/.test(l)
        ? ports.view
        : undefined;
  if (server === undefined) return [l];
  if (/&\s*(#.*)?$/.test(l)) return [l, `wait_health ${server} $!`];
  // A foreground server: started, checked healthy, stopped.
  return [`${l.replace(/\s+#.*$/, '')} &`, `wait_health ${server} $!`, 'kill $! && wait $! 2>/dev/null || true'];
}

const PRELUDE = `set -e
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT
wait_health() {
  for i in $(seq 1 300); do
    curl -sf "127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || { echo "the server for port $1 exited" >&2; return 1; }
    sleep 0.2
  done
  echo "no /health on port $1" >&2; return 1
}
doc_curl() {
  local out; out=$(curl -sS --fail-with-body "$@") || { echo "$out"; echo "curl failed: $*" >&2; return 1; }
  echo "$out"
  if printf '%s' "$out" | grep -q '"critical_error":"'; then echo "the result has a critical_error" >&2; return 1; fi
}
`;

const PY_PRELUDE = `import raas_bridge, raas_bridge.client as _c
_init = _c.RaasSidecar.__init__
def _fast(self, *a, args=(), **k): _init(self, *a, args=(*args, "--set", "batch_size=1", "--output-dir", ${JSON.stringify(path.join(OUT, 'py-runs'))}), **k)
_c.RaasSidecar.__init__ = _fast
`;

describe('executed docs: every runnable block of README.md and docs/*.md', () => {
  it('runs or says why not (a not-executed marker with a reason)', () => {
    const skipped = RUN.filter((b) => b.notExecuted);
    const executed = RUN.filter((b) => !b.notExecuted);
    process.stderr.write(
      `executed docs: ${executed.length} blocks run, ${skipped.length} marked not-executed:\n${skipped.map((b) => `  ${b.file}:${b.line} (${b.lang}): ${b.notExecuted}`).join('\n')}\n`,
    );
    expect(executed.length).toBeGreaterThanOrEqual(10);
    // A marker before a block that would not run anyway is a leftover.
    for (const b of ALL.filter((x) => x.notExecuted && !RUNNABLE.has(x.lang)))
      expect.fail(`${b.file}:${b.line}: not-executed marker before a ${b.lang || 'plain'} block`);
  });

  for (const doc of DOCS) {
    const blocks = RUN.filter((b) => b.file === doc && !b.notExecuted);
    if (!blocks.length) continue;
    it(doc, async () => {
      const ports = { serve: await freePort(), sim: await freePort(), view: await freePort() };
      const env = { PATH: `${BIN}:${process.env.PATH}`, PYTHONPATH: path.join(ROOT, 'bridges/python'), RAAS_TOKEN: 'docs-test-token' };
      const shell = blocks.filter((b) => ['sh', 'bash', 'shell', 'console'].includes(b.lang));
      if (shell.length) {
        const script =
          PRELUDE +
          shell
            .map(
              (b) =>
                `echo "### ${doc}:${b.line}" >&2\n${shellLines(b)
                  .flatMap((l) => rewrite(l, ports, path.join(OUT, doc.replace(/\W/g, '_'))))
                  .join('\n')}`,
            )
            .join('\n') +
          '\n';
        writeFileSync(path.join(OUT, `${doc.replace(/\W/g, '_')}.sh`), script);
        const r = await run('bash', [path.join(OUT, `${doc.replace(/\W/g, '_')}.sh`)], { env });
        expect(r.code, `${doc} shell blocks failed:\n${r.out.slice(-4000)}`).toBe(0);
      }
      for (const b of blocks.filter((x) => ['ts', 'typescript'].includes(x.lang))) {
        mkdirSync(TS_DIR, { recursive: true });
        const f = path.join(TS_DIR, `${doc.replace(/\W/g, '_')}_${b.line}.mts`);
        writeFileSync(f, b.code + '\n');
        const r = await run(path.join(ROOT, 'node_modules/.bin/tsx'), [f], { env });
        expect(r.code, `${doc}:${b.line} (ts) failed:\n${r.out.slice(-4000)}`).toBe(0);
      }
      for (const b of blocks.filter((x) => ['python', 'py'].includes(x.lang))) {
        const r = await run('python3', ['-c', PY_PRELUDE + b.code], { env });
        expect(r.code, `${doc}:${b.line} (python) failed:\n${r.out.slice(-4000)}`).toBe(0);
      }
    }, 300_000);
  }
});
