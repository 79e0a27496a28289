import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Command } from 'commander';
import { RaasError } from '../protocol/errors.js';
import { auditDrift, viewsOfLine, type DriftReport, type TokenView } from './drift.js';
import { loadTokenizer } from './local.js';
import { qwen3Tokenizer } from './tokenizer.js';
import { examples } from '../util/help.js';

/** Reads a results/batches JSONL file and audits re-tokenisation drift of its trajectories. */
export async function auditDriftFile(file: string, opts: { tokenizer?: string; examples?: number } = {}): Promise<DriftReport> {
  const tok = opts.tokenizer ? loadTokenizer(opts.tokenizer) : qwen3Tokenizer();
  const views: Array<TokenView | undefined> = [];
  const input = createReadStream(file, 'utf8');
  const opened = new Promise<void>((resolve, reject) => {
    input.once('open', () => resolve());
    input.once('error', (err) => reject(new RaasError('config_invalid', `audit-drift: cannot read ${file}: ${err.message}`)));
  });
  await opened;
  let n = 0;
  for await (const line of createInterface({ input, crlfDelay: Infinity })) {
    n++;
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      views.push(undefined);
      continue;
    }
    const found = viewsOfLine(value, n);
    if (found.length === 0) views.push(undefined);
    else views.push(...found);
  }
  return auditDrift(tok, views, { maxExamples: opts.examples });
}

/** The report as people read it. */
export function formatDriftReport(r: DriftReport): string {
  const pct = (a: number, b: number): string => (b === 0 ? '0%' : `${((100 * a) / b).toFixed(2)}%`);
  const lines = [
    `trajectories: ${r.trajectories} (${r.trajectories_changed} would change under a text round trip, ${pct(r.trajectories_changed, r.trajectories)})`,
    `model turns:  ${r.model_turns} (${r.turns_changed} changed)`,
    `model tokens: ${r.model_tokens} (${r.tokens_changed} would be replaced, ${pct(r.tokens_changed, r.model_tokens)})`,
  ];
  if (r.skipped > 0) lines.push(`skipped lines: ${r.skipped} (not JSON, or no tokens.response_ids/response_mask)`);
  for (const e of r.examples)
    lines.push(
      `  ${e.trajectory} turn ${e.turn}: ${JSON.stringify(e.text)} generated ${JSON.stringify(e.generated)} -> re-encoded ${JSON.stringify(e.reencoded)}`,
    );
  return `${lines.join('\n')}\n`;
}

/** Registers `raas audit-drift <results.jsonl>`. */
export function registerAuditDrift(program: Command): void {
  program
    .command('audit-drift')
    .description("decode and re-encode each trajectory's model turns and report what a text round trip would change")
    .addHelpText(
      'after',
      examples([
        ['raas audit-drift runs/demo/batches.jsonl', 'after raas train configs/demo.yaml'],
        ['raas audit-drift runs/demo/batches.jsonl --json --examples 0', 'the report as JSON'],
      ]),
    )
    .argument('<results.jsonl>', 'rollout results (one per line, as GET /jobs or the results journal) or DAPO batches.jsonl')
    .option('--tokenizer <dir>', 'a local tokenizer folder (tokenizer.json + tokenizer_config.json); default Qwen3')
    .option('--examples <n>', 'examples to show', (v) => Number.parseInt(v, 10), 5)
    .option('--json', 'print the report as JSON')
    .action(async (file: string, flags: { tokenizer?: string; examples: number; json?: boolean }) => {
      const report = await auditDriftFile(file, { tokenizer: flags.tokenizer, examples: flags.examples });
      process.stdout.write(flags.json ? `${JSON.stringify(report)}\n` : formatDriftReport(report));
    });
}
