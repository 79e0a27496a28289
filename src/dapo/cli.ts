import type { Command } from 'commander';

/** Registers this area's subcommand(s) on the raas CLI. (Filled in by its issue.) */
export function registerTrain(_program: Command): void {}
