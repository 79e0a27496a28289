/**
 * The `Examples:` section of a command's `--help`: each example a line saying what it does, then
 * the command to paste. docs/cli.md carries every command's help, and the executed docs run each
 * example there.
 */
export function examples(lines: ReadonlyArray<readonly [command: string, what: string]>): string {
  return `\nExamples:\n${lines.map(([c, w]) => `  # ${w}\n  $ ${c}`).join('\n')}\n`;
}
