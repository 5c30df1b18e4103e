/**
 * A one-shot DevTools-protocol client for the benchmarks: against a Node process started with
 * `--inspect=127.0.0.1:<port>`, it forces a full garbage collection (`HeapProfiler.collectGarbage`)
 * and evaluates one expression there, by default `process.memoryUsage()`, so a benchmark can tell
 * live heap and external memory from what the allocator keeps in RSS. Node 20 has a WebSocket
 * client only behind `--experimental-websocket`, so the exchange runs in a child process started
 * with that flag (`node inspector.js <ws-url> [expression]`, printing the expression's string
 * value as one line); `collectAndMeasure` and `collectAndEvaluate` do that.
 *
 * Not here: anything that writes to the inspected process.
 */
import { execFile } from 'node:child_process';
import { createServer } from 'node:net';

/** `process.memoryUsage()` of the inspected process, in bytes. */
export interface InspectedMemory {
  readonly rss: number;
  readonly heapTotal: number;
  readonly heapUsed: number;
  readonly external: number;
  readonly arrayBuffers: number;
}

async function debuggerUrl(port: number): Promise<string> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{ webSocketDebuggerUrl?: string }>;
  const url = targets[0]?.webSocketDebuggerUrl;
  if (!url) throw new Error(`no inspector target on 127.0.0.1:${port}`);
  return url;
}

const MEMORY_USAGE = 'JSON.stringify(process.memoryUsage())';

/** Forces a full GC in the process inspected on `port`, then reads its memory. */
export async function collectAndMeasure(port: number): Promise<InspectedMemory> {
  return JSON.parse(await collectAndEvaluate(port, MEMORY_USAGE)) as InspectedMemory;
}

/**
 * Forces a full GC in the process inspected on `port`, then evaluates `expression` in its main
 * context; the expression must produce a string (JSON.stringify what you need), which is returned.
 */
export async function collectAndEvaluate(port: number, expression: string): Promise<string> {
  const url = await debuggerUrl(port);
  return new Promise<string>((resolve, reject) =>
    execFile(process.execPath, ['--experimental-websocket', '--no-warnings', __filename, url, expression], { timeout: 60_000 }, (err: Error | null, stdout) => (err ? reject(err) : resolve(stdout.trim()))),
  );
}

interface WebSocketLike {
  onopen: (() => void) | null;
  onmessage: ((e: { data: unknown }) => void) | null;
  onerror: ((e: unknown) => void) | null;
  send(data: string): void;
  close(): void;
}

/** The child's side: one GC, one evaluation, printed. */
async function main(url: string, expression: string): Promise<void> {
  const Ws = (globalThis as unknown as { WebSocket?: new (u: string) => WebSocketLike }).WebSocket;
  if (!Ws) throw new Error('run with --experimental-websocket');
  const ws = new Ws(url);
  const pending = new Map<number, (r: unknown) => void>();
  let next = 1;
  const send = (method: string, params: Record<string, unknown> = {}): Promise<unknown> =>
    new Promise((resolve) => {
      const id = next++;
      pending.set(id, resolve);
      ws.send(JSON.stringify({ id, method, params }));
    });
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = (e) => reject(new Error(`inspector connection failed: ${String(e)}`));
  });
  ws.onmessage = (e) => {
    const m = JSON.parse(String(e.data)) as { id?: number; result?: unknown };
    if (m.id !== undefined) pending.get(m.id)?.(m.result);
  };
  await send('HeapProfiler.collectGarbage');
  const r = (await send('Runtime.evaluate', { expression, returnByValue: true })) as { result?: { value?: string } };
  ws.close();
  process.stdout.write(`${r.result?.value ?? '{}'}\n`);
}

/** A loopback port free right now, for the inspected process's `--inspect`. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (typeof a === 'object' && a ? resolve(a.port) : reject(new Error('no free port'))));
    });
  });
}

if (require.main === module) {
  main(process.argv[2] ?? '', process.argv[3] ?? MEMORY_USAGE).then(
    () => process.exit(0),
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
