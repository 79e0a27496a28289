// An image's environment, read without running anything: OCI `Env` lists, and the plain `export`
// lines Apptainer writes into /.singularity.d/env/*.sh. Those scripts are sourced by a shell in
// glob order (apptainer action_script.sh@917d6657:117-152); we never execute them, so only lines
// of the two forms docker2singularity writes (conveyorPacker_oci.go@917d6657:388-414) and other
// literal exports are read, and everything else (expansions, command substitutions) is skipped.
import fs from 'node:fs';
import path from 'node:path';

/** apptainer conveyorPacker_oci.go@917d6657:124 — the names it writes; others are skipped there too. */
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** An OCI `Env` (`["NAME=value", …]`) as a map; malformed entries are dropped. */
export function ociEnv(list: unknown): Record<string, string> {
  const env: Record<string, string> = {};
  if (!Array.isArray(list)) return env;
  for (const e of list) {
    if (typeof e !== 'string') continue;
    const eq = e.indexOf('=');
    if (eq <= 0 || !NAME.test(e.slice(0, eq))) continue;
    env[e.slice(0, eq)] = e.slice(eq + 1);
  }
  return env;
}

/**
 * Parses a shell word made only of literal parts: "double quoted" (with \\ \" \` \$ escapes, as
 * apptainer's shell.Escape writes them, escape.go@917d6657:25-31), 'single quoted' and bare
 * characters. Returns the value and where it stopped, or undefined at an expansion or a backtick.
 */
function literalWord(s: string, i: number, stop: string): { value: string; end: number } | undefined {
  let out = '';
  while (i < s.length && !stop.includes(s[i])) {
    const c = s[i];
    if (c === '"') {
      i++;
      for (;;) {
        if (i >= s.length) return undefined;
        const d = s[i];
        if (d === '"') break;
        if (d === '$' || d === '`') return undefined;
        if (d === '\\' && i + 1 < s.length && '\\"`$'.includes(s[i + 1])) {
          out += s[i + 1];
          i += 2;
          continue;
        }
        out += d;
        i++;
      }
      i++;
    } else if (c === "'") {
      const close = s.indexOf("'", i + 1);
      if (close < 0) return undefined;
      out += s.slice(i + 1, close);
      i = close + 1;
    } else if (/[A-Za-z0-9_./:,+=@%^~-]/.test(c)) {
      out += c;
      i++;
    } else {
      return undefined;
    }
  }
  return { value: out, end: i };
}

/**
 * One line of an env script: `export NAME=<literal>` or `export NAME="${NAME:-<literal>}"` (also
 * without the outer quotes). The second keeps a value an earlier script set, as the shell would.
 * Returns [name, value], or undefined for any other line.
 */
export function parseExport(line: string, env: Record<string, string>): [string, string] | undefined {
  const m = /^\s*export\s+([A-Za-z_][A-Za-z0-9_]*)=(.*?)\s*$/.exec(line);
  if (!m) return undefined;
  const [, name, rhs] = m;
  const open = rhs.startsWith(`"\${${name}:-`) ? `"\${${name}:-` : rhs.startsWith(`\${${name}:-`) ? `\${${name}:-` : undefined;
  if (open) {
    const close = open.startsWith('"') ? '}"' : '}';
    if (!rhs.endsWith(close)) return undefined;
    const inner = rhs.slice(open.length, rhs.length - close.length);
    const w = literalWord(inner, 0, '');
    if (!w || w.end !== inner.length) return undefined;
    return [name, env[name] ? env[name] : w.value];
  }
  const w = literalWord(rhs, 0, ' \t');
  if (!w || w.end !== rhs.length) return undefined;
  return [name, w.value];
}

/** A real directory (not a symlink) below `root`, or undefined: an image's links must not lead us to host files. */
function realDirBelow(root: string, rel: string[]): string | undefined {
  let p = root;
  for (const part of rel) {
    p = path.join(p, part);
    try {
      if (!fs.lstatSync(p).isDirectory()) return undefined;
    } catch {
      return undefined;
    }
  }
  return p;
}

/** The environment of an Apptainer root tree: the literal exports of `/.singularity.d/env/*.sh`, in glob order. */
export function singularityEnv(rootfs: string): Record<string, string> {
  const env: Record<string, string> = {};
  const dir = realDirBelow(rootfs, ['.singularity.d', 'env']);
  if (!dir) return env;
  const scripts = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.sh'))
    .sort();
  for (const f of scripts) {
    const p = path.join(dir, f);
    const st = fs.lstatSync(p);
    if (!st.isFile() || st.size > 1 << 20) continue;
    for (const line of fs.readFileSync(p, 'utf8').split('\n')) {
      const kv = parseExport(line, env);
      if (kv) env[kv[0]] = kv[1];
    }
  }
  return env;
}
