// npm run build: the tool server runs in every sandbox, and node's start is most of a sandbox's start.
// Loading its compiled ES modules one by one costs ~15-20 ms more than one CommonJS file (node 20's
// ESM loader: its own start plus an asynchronous resolve/load/link per module), so the build bundles
// dist/src/server/tools into dist/tool-server/main.js (CommonJS; node-pty, a native addon, stays a
// package next to it). The bundle records the digest of the compiled files it was made from: a build
// that ran tsc alone leaves a stale bundle, which the server refuses (src/server/sandbox/prepare.ts).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';

const src = 'dist/src/server/tools';
const out = 'dist/tool-server';

/** The digest prepare.ts computes too: every compiled .js of the tool server, by name. */
function digest(dir) {
  const h = createHash('sha256');
  for (const f of fs
    .readdirSync(dir)
    .filter((n) => n.endsWith('.js'))
    .sort())
    h.update(f).update('\0').update(fs.readFileSync(path.join(dir, f)));
  return h.digest('hex');
}

fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out, { recursive: true });
await build({
  entryPoints: [path.join(src, 'main.js')],
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  external: ['node-pty'],
  outfile: path.join(out, 'main.js'),
  logLevel: 'warning',
  legalComments: 'none',
  // import('node-pty') as a require: a dynamic import would start node's ESM loader on the first bash call.
  supported: { 'dynamic-import': false },
});
fs.writeFileSync(path.join(out, 'package.json'), JSON.stringify({ name: 'raas-tool-server', private: true, type: 'commonjs' }) + '\n');
fs.writeFileSync(path.join(out, 'sources.sha256'), digest(src) + '\n');
