import fs from 'node:fs';

/**
 * `n` random bytes as hex, read from /dev/urandom (Web Crypto where there is none): the tool server
 * does not load node:crypto for its nonces, whose first load costs 1-2 ms of every sandbox's start.
 */
export function randomHex(n: number): string {
  const b = Buffer.alloc(n);
  try {
    const fd = fs.openSync('/dev/urandom', 'r');
    try {
      if (fs.readSync(fd, b, 0, n, null) !== n) throw new Error('short read');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    globalThis.crypto.getRandomValues(b);
  }
  return b.toString('hex');
}
