import type { Command } from 'commander';
import { applyPlacement } from './apply.js';
import { loadPlaceConfig } from './config.js';
import { formatPlan } from './format.js';
import { planPlacement } from './plan.js';
import { examples } from '../util/help.js';

interface PlaceFlags {
  config: string;
  dryRun?: boolean;
  json?: boolean;
  weightVersion?: string;
}

/** Registers `raas place --config place.yaml`: prints the node-affine plan, then applies it. */
export function registerPlace(program: Command): void {
  program
    .command('place')
    .description('assign LLM servers to rollout servers node-affinely (same node first, then round-robin), print the plan and apply it')
    .addHelpText(
      'after',
      examples([
        ['raas place --config configs/place.yaml --dry-run', 'print the plan only'],
        [
          'raas place --config configs/place.yaml --weight-version 3 --dry-run --json',
          'the plan as JSON, registered as weight_version 3 when applied',
        ],
      ]),
    )
    .requiredOption('--config <file>', 'YAML with rollout_servers [{url, token?}] and llm_servers [{address, api?}] (configs/place.yaml)')
    .option('--dry-run', 'print the plan without applying it')
    .option('--json', "print the plan (and the servers' backends after applying) as JSON")
    .option('--weight-version <v>', 'weight_version to register the LLM servers with (overrides the config)')
    .action(async (flags: PlaceFlags) => {
      const cfg = await loadPlaceConfig(flags.config);
      const plan = await planPlacement(cfg.rollout_servers, cfg.llm_servers, { fill_empty: cfg.fill_empty });
      if (!flags.json) process.stdout.write(`${formatPlan(plan)}\n`);
      if (flags.dryRun) {
        if (flags.json) process.stdout.write(`${JSON.stringify({ plan }, null, 2)}\n`);
        return;
      }
      const report = await applyPlacement(plan, {
        servers: cfg.rollout_servers,
        weight_version: flags.weightVersion ?? cfg.weight_version,
        mode: cfg.mode,
      });
      if (flags.json) process.stdout.write(`${JSON.stringify({ plan, applied: report.servers }, null, 2)}\n`);
      else for (const s of report.servers) process.stdout.write(`applied: ${s.rollout_server} now has ${s.backends.length} backend(s)\n`);
    });
}
