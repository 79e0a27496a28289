import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// docs/cli.md is every command's `--help`, verbatim, and its examples as bash blocks, which the
// executed docs (test/docs/executed.test.ts) run: so every example a `--help` prints runs in CI.
// After changing a help text: RAAS_UPDATE_DOCS=1 npx vitest run test/config/help.test.ts
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(ROOT, 'dist/src/cli.js');
const DOC = path.join(ROOT, 'docs/cli.md');
/** In the page's order: the simulator and server first, so the later examples find what they use. */
const COMMANDS = ['sim-llm', 'serve', 'place', 'train', 'eval', 'show', 'view', 'audit-drift', 'sidecar'];

function help(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    // No terminal: commander wraps at 80 columns, the same on every machine.
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, COLUMNS: '80' },
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`raas ${args.join(' ')} exited ${code}`))));
  });
}

/** The `$ ` lines of a help text's Examples section. */
function examplesOf(text: string): string[] {
  const at = text.indexOf('\nExamples:\n');
  if (at < 0) return [];
  return text
    .slice(at)
    .split('\n')
    .filter((l) => l.startsWith('  $ '))
    .map((l) => l.slice(4));
}

async function page(): Promise<string> {
  const top = await help(['--help']);
  // One at a time: each is a node start-up, and CI machines are shared.
  const sections: string[] = [];
  for (const c of COMMANDS) {
    const text = await help([c, '--help']);
    const ex = examplesOf(text);
    expect(ex.length, `raas ${c} --help has no Examples section`).toBeGreaterThan(0);
    sections.push(`## raas ${c}\n\n\`\`\`text\n${text.trimEnd()}\n\`\`\`\n\n\`\`\`bash\n${ex.join('\n')}\n\`\`\`\n`);
  }
  return `# The \`raas\` command line

Every command's \`--help\`, as \`raas <command> --help\` prints it (\`npm run raas -- <command> --help\`
inside the repository), with its examples. Each example runs in CI: \`test/docs/executed.test.ts\`
runs the bash blocks of this page (servers on free ports, \`raas train\` shortened to one step), and
\`test/config/help.test.ts\` fails when this page and \`--help\` differ.

\`\`\`text
${top.trimEnd()}
\`\`\`

${sections.join('\n')}`;
}

describe('every --help', () => {
  it('has examples, and docs/cli.md is the help of every command with its examples', async () => {
    const want = await page();
    if (process.env.RAAS_UPDATE_DOCS === '1') writeFileSync(DOC, want);
    expect(readFileSync(DOC, 'utf8'), 'docs/cli.md is out of date: RAAS_UPDATE_DOCS=1 npx vitest run test/config/help.test.ts').toBe(want);
  }, 240_000);

  it('covers every command the CLI has', async () => {
    const top = await help(['--help']);
    const listed = [...top.matchAll(/^ {2}([a-z-]+)(?: \[options\]| |$)/gm)].map((m) => m[1]).filter((c) => c !== 'help');
    expect(listed.sort()).toEqual([...COMMANDS].sort());
  }, 60_000);
});
