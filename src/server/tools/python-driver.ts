/**
 * Source of the persistent Python driver, run as `python3 -u driver.py`. Its protocol uses file
 * descriptors 3 (requests), 4 (answers) and 5 (interrupts), never stdin/stdout, so user code
 * cannot corrupt it. Code runs with `exec` in one namespace that persists across calls; the last
 * expression's repr is returned like IPython. An interrupt raises KeyboardInterrupt in the main
 * thread, which keeps the namespace.
 */
export const PYTHON_DRIVER = String.raw`
import ast, contextlib, io, json, os, signal, sys, threading, traceback

req_in = os.fdopen(3, 'r', encoding='utf-8', errors='replace')
rep_out = os.fdopen(4, 'w', encoding='utf-8')
int_in = os.fdopen(5, 'rb', buffering=0)
for fd in (3, 4, 5):
    os.set_inheritable(fd, False)
ns = {'__name__': '__main__', '__builtins__': __builtins__}
current = [None]
main_id = threading.main_thread().ident
signal.signal(signal.SIGINT, signal.default_int_handler)

def interrupter():
    buf = b''
    while True:
        b = int_in.read(64)
        if not b:
            os._exit(0)
        buf += b
        while b'\n' in buf:
            line, buf = buf.split(b'\n', 1)
            try:
                target = int(line)
            except ValueError:
                continue
            if current[0] == target:
                signal.pthread_kill(main_id, signal.SIGINT)

threading.Thread(target=interrupter, daemon=True).start()

def run(code):
    out, err = io.StringIO(), io.StringIO()
    rep = {}
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            tree = ast.parse(code, '<cell>', 'exec')
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, '<cell>', 'exec'), ns)
            if last is not None:
                value = eval(compile(last, '<cell>', 'eval'), ns)
                if value is not None:
                    rep['result'] = repr(value)
    except BaseException as e:
        tb = e.__traceback__
        # Hide the driver's own frames; keep the user's cell and what it called.
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        rep['error'] = {'type': type(e).__name__, 'message': str(e), 'traceback': ''.join(traceback.format_exception(type(e), e, tb))}
    rep['stdout'] = out.getvalue()
    rep['stderr'] = err.getvalue()
    return rep

for line in req_in:
    try:
        req = json.loads(line)
    except ValueError:
        continue
    current[0] = req['id']
    try:
        rep = run(req['code'])
    except KeyboardInterrupt:
        rep = {'stdout': '', 'stderr': '', 'error': {'type': 'KeyboardInterrupt', 'message': '', 'traceback': 'KeyboardInterrupt'}}
    while True:
        # An interrupt racing with the end of the cell must not kill the driver.
        try:
            current[0] = None
            break
        except KeyboardInterrupt:
            continue
    rep['id'] = req['id']
    rep_out.write(json.dumps(rep) + '\n')
    rep_out.flush()
`;
