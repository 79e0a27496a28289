import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/protocol/errors.js';
import { SIDECAR_ERROR_CODES, SIDECAR_EVENTS, SIDECAR_OPS } from '../../src/protocol/sidecar.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const doc = readFileSync(path.join(root, 'docs/sidecar.md'), 'utf8');

describe('docs/sidecar.md stays in sync with the protocol', () => {
  it('has a section for every op', () => {
    for (const op of SIDECAR_OPS) expect(doc, op).toContain(`### \`${op}\``);
  });
  it('documents every event', () => {
    for (const ev of SIDECAR_EVENTS) expect(doc, ev).toMatch(new RegExp(`\\| \`${ev}\` \\|`));
  });
  it('documents every error code the sidecar answers with, each from the one registry', () => {
    for (const code of SIDECAR_ERROR_CODES) {
      expect(ERROR_CODES, code).toHaveProperty(code);
      expect(doc, code).toMatch(new RegExp(`\\| \`${code}\` \\|`));
    }
  });
});
