/**
 * Wire shapes of the tool server's JSON-lines protocol over its Unix domain socket. The tool server
 * runs inside the sandbox and must stay self-contained (node builtins and node-pty only), so these
 * are plain types rather than zod schemas; the host client imports them too.
 */

/** What `bash` answers. */
export interface BashAnswer {
  output: string;
  /** null while the command is still running (no-change timeout) or after a timeout. */
  exit_code: number | null;
  timed_out: boolean;
  /** True when the command is still running (no-change timeout answered). */
  running?: boolean;
  truncated: boolean;
}

/** What `bash` takes. */
export interface BashRequest {
  command: string;
  /** Hard timeout; sends Ctrl-C and answers `timed_out` with the output so far. */
  timeout_s?: number;
  /** Answer (without interrupting) once output has not changed for this long. */
  no_change_timeout_s?: number;
  /** Send `command` as keystrokes to the running program instead of as a new command. */
  is_input?: boolean;
}

/** What `python` answers. */
export interface PythonAnswer {
  stdout: string;
  stderr: string;
  /** repr of the last expression, like IPython. */
  result?: string;
  error?: { type: string; message: string; traceback: string };
  timed_out: boolean;
}

/** One editor operation (the str_replace_editor tool's commands). */
export type EditOp =
  | { command: 'view'; path: string; view_range?: [number, number] }
  | { command: 'create'; path: string; file_text: string }
  | { command: 'str_replace'; path: string; old_str: string; new_str?: string }
  | { command: 'insert'; path: string; insert_line: number; new_str: string }
  | { command: 'undo_edit'; path: string };

/** The editor's answer: `ok: false` carries the message the agent should read. */
export interface EditAnswer {
  ok: boolean;
  /** The observation text (file view, snippet after an edit, or the error message). */
  output: string;
}

/** What one `exec` answers. The exit status comes from the process itself, never from its output. */
export interface ExecAnswer {
  exit_code: number | null;
  /** The signal that ended the process (a timeout kills with SIGKILL). */
  signal: string | null;
  stdout: string;
  stderr: string;
  timed_out: boolean;
  /** Output past max_output_bytes was dropped. */
  truncated: boolean;
}

/** What `exec` takes: argv run without a shell. */
export interface ExecRequest {
  argv: string[];
  stdin?: string;
  cwd?: string;
  env?: Record<string, string>;
  timeout_s?: number;
  max_output_bytes?: number;
}

/**
 * Every call of the tool server: what it takes and what it answers, keyed by tool name. Both sides
 * of the socket use this one map: the host's client (`ToolClient.call`) and the server's dispatch.
 */
export interface ToolCalls {
  ping: { args: Record<string, never>; answer: { pong: true } };
  configure: {
    args: { env?: Record<string, string>; limits?: ToolServerOptions['limits']; tools?: ToolServerOptions['tools'] };
    answer: { configured: true };
  };
  warm: { args: Record<string, never>; answer: unknown };
  shutdown: { args: Record<string, never>; answer: { stopping: true } };
  cancel: { args: { target: number }; answer: { cancelled: boolean } };
  bash: { args: BashRequest; answer: BashAnswer };
  python: { args: { code: string; timeout_s?: number }; answer: PythonAnswer };
  edit: { args: { op: EditOp }; answer: EditAnswer };
  read_file: { args: { path: string; max_bytes?: number }; answer: { data: string; bytes: number } };
  write_files: { args: { files: Record<string, string>; append?: boolean }; answer: { written: number } };
  exec: { args: ExecRequest; answer: ExecAnswer };
}

/** A tool's name. */
export type ToolName = keyof ToolCalls;

/** One request line: `id` is chosen by the client and echoed in the answer. */
export type ToolRequest = { [K in ToolName]: { id: number; tool: K } & ToolCalls[K]['args'] }[ToolName];

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
  /**
   * The shell that applies the limits to exec and python children (default /bin/bash; an image
   * without bash gives /bin/sh). The bash tool itself always needs /bin/bash.
   */
  shell?: string;
  /**
   * `inherit`: the sandbox is an image the host did not unpack (Apptainer runs a .sif itself): the
   * children's environment is the tool server's own (what the runtime gave the container) under
   * `env`, with the image's conda `testbed` environment activated, and the shell and python are
   * those the image has (tools/image-env.ts).
   */
  image_env?: 'inherit';
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
