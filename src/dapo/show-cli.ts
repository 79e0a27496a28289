import type { Command } from 'commander';
import { resolveTokenizerSpec } from '../tokens/resolve.js';
import { intArg } from '../util/config-flags.js';
import { examples } from '../util/help.js';
import { RunDir } from './run-dir.js';
import { formatList, formatRollout } from './show.js';

/** The tokenizer the run generated with: `--tokenizer`, else its embedded server's `tokenizer`, else Qwen3. */
function tokenizerOf(config: Record<string, unknown> | undefined, flag: string | undefined): string {
  if (flag) return flag;
  const emb = config?.embedded as { server?: { tokenizer?: unknown } } | undefined;
  return typeof emb?.server?.tokenizer === 'string' ? emb.server.tokenizer : 'qwen3';
}

/** Registers `raas show <run dir> [step] [rollout]`. */
export function registerShow(program: Command): void {
  program
    .command('show')
    .description('print one rollout of a run as text: prompt, model turns with their tool calls, observations, the mask and the reward')
    .addHelpText(
      'after',
      examples([
        ['raas show runs/demo', "the last step's first rollout"],
        ['raas show runs/demo 0 --list', "step 0's rollouts: job id, reward, finish reason, turns"],
        ['raas show runs/demo 0 1 --ids', 'rollout 1 of step 0 (or give its job id), with every token id and logprob'],
      ]),
    )
    .argument('<run-dir>', 'a run directory (raas train, or raas sidecar --keep-batches)')
    .argument('[step]', 'the step (default: the last one written)', intArg('step', { min: 0 }))
    .argument('[rollout]', 'its index in the batch (group by group, from 0) or its job id (default: 0)')
    .option('--ids', "print each segment's token ids, and a model turn's logprobs")
    .option('--full', 'print long texts whole (default: head and tail)')
    .option('--list', "list the step's rollouts instead")
    .option('--tokenizer <spec>', "qwen3, a tokenizer folder or a Hugging Face model id (default: the run's)")
    .action(
      async (
        dir: string,
        step: number | undefined,
        rollout: string | undefined,
        o: { ids?: boolean; full?: boolean; list?: boolean; tokenizer?: string },
      ) => {
        const run = new RunDir(dir);
        const batch = await run.batch(step);
        if (o.list) {
          process.stdout.write(formatList(batch));
          return;
        }
        const tok = resolveTokenizerSpec(tokenizerOf(await run.config(), o.tokenizer));
        process.stdout.write(formatRollout(batch, rollout, tok, { ids: o.ids, full: o.full }));
      },
    );
}
