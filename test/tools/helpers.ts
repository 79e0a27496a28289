import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ToolServer } from '../../src/server/tools/server.js';
import { ToolClient } from '../../src/server/sandbox/client.js';
import type { ToolServerOptions } from '../../src/server/tools/protocol.js';

/** A real tool server on a Unix socket in a temp directory (no sandbox), with a connected client. */
export async function startToolServer(opts: Partial<ToolServerOptions> = {}): Promise<{
  client: ToolClient;
  workspace: string;
  server: ToolServer;
  close(): Promise<void>;
}> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-tools-'));
  const workspace = path.join(dir, 'ws');
  fs.mkdirSync(workspace);
  const server = new ToolServer({
    socket: path.join(dir, 's.sock'),
    workspace,
    tmp_dir: dir,
    python: '/usr/bin/python3',
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: workspace, TERM: 'xterm', LANG: 'C.UTF-8' },
    ...opts,
  });
  await server.listen();
  const client = await ToolClient.connect(path.join(dir, 's.sock'));
  return {
    client,
    workspace,
    server,
    async close() {
      client.close();
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
