/**
 * A small unified-diff reader: turns a patch (`git diff` output) into per-file hunks, so the swe
 * policy can replay a gold patch as `str_replace_editor` edits (old text → new text per hunk).
 */

export interface HunkLine {
  tag: ' ' | '-' | '+';
  text: string;
}

export interface FileDiff {
  /** Path relative to the repository root (without `a/` / `b/`); null for /dev/null. */
  oldPath: string | null;
  newPath: string | null;
  hunks: HunkLine[][];
}

/** Parses a unified diff; lines outside hunks (index, mode, rename headers) are skipped. */
export function parseUnifiedDiff(patch: string): FileDiff[] {
  const files: FileDiff[] = [];
  let file: FileDiff | undefined;
  let hunk: HunkLine[] | undefined;
  const lines = patch.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith('diff --git ')) {
      file = undefined;
      hunk = undefined;
      continue;
    }
    if (line.startsWith('--- ') && lines[i + 1]?.startsWith('+++ ')) {
      file = { oldPath: stripPrefix(line.slice(4)), newPath: stripPrefix(lines[i + 1]!.slice(4)), hunks: [] };
      files.push(file);
      hunk = undefined;
      i++;
      continue;
    }
    if (line.startsWith('@@') && file) {
      hunk = [];
      file.hunks.push(hunk);
      continue;
    }
    if (!hunk) continue;
    if (line.startsWith('\\')) continue; // "\ No newline at end of file"
    const tag = line[0];
    if (tag === ' ' || tag === '-' || tag === '+') hunk.push({ tag, text: line.slice(1) });
    else if (line === '') hunk.push({ tag: ' ', text: '' });
  }
  // The patch's final empty line is its trailing newline, not context; a trailing blank context
  // line is dropped too (less context still replaces the same text).
  for (const f of files)
    for (const h of f.hunks) while (h.length > 1 && h[h.length - 1]!.tag === ' ' && h[h.length - 1]!.text === '') h.pop();
  return files;
}

function stripPrefix(p: string): string | null {
  const path = p.replace(/\t.*$/, '').trim();
  if (path === '/dev/null') return null;
  return path.replace(/^[ab]\//, '');
}

/** The text a hunk replaces and the text it writes (context included), joined with newlines. */
export function hunkTexts(h: HunkLine[]): { oldText: string; newText: string } {
  const oldText = h
    .filter((l) => l.tag !== '+')
    .map((l) => l.text)
    .join('\n');
  const newText = h
    .filter((l) => l.tag !== '-')
    .map((l) => l.text)
    .join('\n');
  return { oldText, newText };
}
