/**
 * Wire shapes of the tool server's JSON-lines protocol over its Unix domain socket. The tool server
 * runs inside the sandbox and must stay self-contained (node builtins and node-pty only), so these
 * are plain types rather than zod schemas; the host client imports them too.
 */

/** One request line. `id` is chosen by the client and echoed in the answer. */
export type ToolRequest =
  | { id: number; tool: 'ping' }
  | { id: number; tool: 'configure'; env?: Record<string, string>; limits?: ToolServerOptions['limits']; tools?: ToolServerOptions['tools'] }
  | { id: number; tool: 'warm' }
  | { id: number; tool: 'shutdown' }
  | { id: number; tool: 'cancel'; target: number }
  | { id: number; tool: 'bash'; command: string; timeout_s?: number; no_change_timeout_s?: number; is_input?: boolean }
  | { id: number; tool: 'python'; code: string; timeout_s?: number }
  | { id: number; tool: 'edit'; op: Record<string, unknown> }
  | { id: number; tool: 'read_file'; path: string; max_bytes?: number }
  | { id: number; tool: 'write_files'; files: Record<string, string>; append?: boolean }
  | { id: number; tool: 'exec'; argv: string[]; stdin?: string; cwd?: string; env?: Record<string, string>; timeout_s?: number; max_output_bytes?: number };

/** One answer line: `result` on success, `error` when the request was malformed or refused. */
export type ToolResponse =
  | { id: number | null; ok: true; result: unknown }
  | { id: number | null; ok: false; error: { code: 'tool_error' | 'sandbox_error' | 'sandbox_limit'; message: string } };

/** The fd number of the tool server's inherited connection to the host (bwrap keeps it open). */
export const CONN_FD = 9;

/** Options the host passes to the tool server as one JSON argument. */
export interface ToolServerOptions {
  /** Socket path as seen by the tool server (used when no listen_fd is passed). */
  socket: string;
  /**
   * An inherited, already connected socket (one end of a socketpair the host made): the only
   * channel to the host. Nothing in the sandbox can connect to it; the limits wrapper closes it in
   * every child, so only the tool server holds it.
   */
  conn_fd?: number;
  /** A read-only tree copied into the workspace at start (an image). */
  seed_dir?: string;
  /** Cap of one read_file answer, bytes (sandbox.max_read_bytes). */
  max_read_bytes?: number;
  /** Size of the workspace filesystem in MB (sandbox.disk_mb), for the message when it is full. */
  disk_mb?: number;
  /** Workspace directory as seen by the tool server (editor paths are confined to it). */
  workspace: string;
  /** Which tools to start (default all). */
  tools?: Array<'bash' | 'python' | 'editor'>;
  /** 'pty' (default) or the tmux baseline. */
  bash_backend?: 'pty' | 'tmux';
  /** Poll interval of the tmux baseline (OpenHands uses 500 ms). */
  tmux_poll_ms?: number;
  /** Python interpreter path (default /usr/bin/python3). */
  python?: string;
  /** Environment of the bash and python children (the tool server's own environment is not passed). */
  env?: Record<string, string>;
  /** Resource limits of the bash and python children (applied with ulimit inside the sandbox). */
  limits?: { memory_mb?: number; cpu_s?: number; processes?: number; file_size_mb?: number };
  /** Output cap in characters per answer (head and tail kept). */
  output_cap?: number;
  /** Largest accepted command or code, in bytes. */
  max_input_bytes?: number;
  /** Directory for temporary command files (default /tmp). */
  tmp_dir?: string;
}
