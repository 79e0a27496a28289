import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ERROR_CODES } from '../../src/protocol/errors.js';
import { ServerConfig } from '../../src/protocol/config-server.js';
import { loadServerConfig } from '../../src/server/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const api = readFileSync(path.join(root, 'docs/api.md'), 'utf8');

describe('docs/api.md and configs/server.yaml stay in sync with the code', () => {
  it('lists every error code with its status (add a row to docs/api.md for a new code)', () => {
    for (const [code, { status }] of Object.entries(ERROR_CODES))
      expect(api, code).toMatch(new RegExp(`\\| \`${code}\` \\| ${status} \\|`));
  });

  it('documents every route', () => {
    for (const r of [
      'POST /process',
      'POST /cancel',
      'GET /jobs/:id',
      'POST /add_llm_server',
      'POST /remove_llm_server',
      'POST /clear_llm_server',
      'POST /start',
      'POST /stop',
      'POST /pause',
      'POST /resume',
      'POST /prefetch',
      'GET /status',
      'GET /health',
      'GET /metrics',
    ])
      expect(api).toContain(r);
  });

  it('configs/server.yaml is valid and restates the defaults', async () => {
    const { config } = await loadServerConfig(path.join(root, 'configs/server.yaml'));
    const defaults = ServerConfig.parse({});
    expect({ ...config, journal: defaults.journal, handlers: {} }).toEqual(defaults);
  });
});
