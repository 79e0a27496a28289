import { readFileSync } from 'node:fs';

/** A fenced code block of a Markdown file. */
export interface DocBlock {
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  code: string;
  /** The reason of a `<!-- not-executed: reason -->` comment right before the block. */
  notExecuted?: string;
}

/** Languages the executed-docs test runs: shell, TypeScript, Python. */
export const RUNNABLE = new Set(['sh', 'bash', 'shell', 'console', 'ts', 'typescript', 'python', 'py']);

/** The fenced blocks of a Markdown file, each with the not-executed marker that precedes it, if any. */
export function docBlocks(file: string, text = readFileSync(file, 'utf8')): DocBlock[] {
  const lines = text.split('\n');
  const out: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,})([\w+-]*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const fence = open[2]!;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !new RegExp(`^\\s*${fence}\\s*$`).test(lines[j]!)) body.push(lines[j++]!);
    let k = i - 1;
    while (k >= 0 && lines[k]!.trim() === '') k--;
    const marker = k >= 0 ? /^<!--\s*not-executed:\s*(.+?)\s*-->$/.exec(lines[k]!.trim()) : null;
    out.push({ file, line: i + 1, lang: open[3]!.toLowerCase(), code: body.join('\n'), ...(marker ? { notExecuted: marker[1]! } : {}) });
    i = j;
  }
  return out;
}
