// The tool server as installed: one CommonJS bundle made by `npm run build` (scripts/bundle-tools.mjs)
// from the compiled modules in dist/src/server/tools, refused when it no longer matches them.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { checkBundleFresh, installToolServer } from '../../src/server/sandbox/prepare.js';
import { testRoot } from './helpers.js';

const DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist');

describe('the bundled tool server', () => {
  const root = testRoot('bundle');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-bundle-'));
  afterAll(() => {
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('installs one CommonJS file and node-pty, not the ES modules', () => {
    const dir = installToolServer(root);
    const files = fs
      .readdirSync(dir, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.js') && !f.startsWith('node_modules'));
    expect(files).toEqual(['main.js']);
    expect(JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).type).toBe('commonjs');
    expect(fs.existsSync(path.join(dir, 'node_modules/node-pty/build/Release/pty.node'))).toBe(true);
    // node-pty stays outside the bundle (a native addon), loaded on the first bash call.
    expect(fs.readFileSync(path.join(dir, 'main.js'), 'utf8')).toContain('require("node-pty")');
  });

  it('refuses a bundle made from other compiled files, naming the fix', () => {
    const bundle = path.join(tmp, 'tool-server');
    const compiled = path.join(tmp, 'tools');
    fs.cpSync(path.join(DIST, 'tool-server'), bundle, { recursive: true });
    fs.cpSync(path.join(DIST, 'src/server/tools'), compiled, { recursive: true });
    expect(() => checkBundleFresh(bundle, compiled)).not.toThrow();
    // tsc alone rebuilt one module: the bundle is stale.
    fs.appendFileSync(path.join(compiled, 'editor.js'), '\n// changed\n');
    expect(() => checkBundleFresh(bundle, compiled)).toThrow(/was not built from the compiled files in .*run "npm run build"/);
    fs.rmSync(path.join(bundle, 'sources.sha256'));
    expect(() => checkBundleFresh(bundle, compiled)).toThrow(/npm run build/);
  });
});
