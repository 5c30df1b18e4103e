/**
 * A QMP (QEMU Machine Protocol) client over a unix socket, our own: the one npm package that
 * exists matches replies first-in-first-out, drops event data and assumes the greeting arrives in
 * one chunk (`docs/dependencies.md#qmp-client`).
 *
 * Protocol: QEMU greets with `{"QMP": {...}}`; the client sends `qmp_capabilities`; then each
 * request carries an `id` echoed in its `{"return"}` or `{"error"}` reply, and asynchronous
 * `{"event"}` messages arrive in between. Messages are JSON objects, one per line.
 *
 * It is: one connection, multiplexed (several commands may be in flight; QEMU answers them in
 * order, but replies are matched by id anyway). It is not: a reconnecting client. A QMP monitor
 * serves one client at a time, so whoever holds the connection should share it; when the socket
 * closes (QEMU quit or died) every pending command rejects with `QmpClosedError` and the client
 * is done. Events sent before `qmp_capabilities` are lost (QEMU holds none back).
 */
import { createConnection, type Socket } from 'node:net';
import type { Logger } from '../../lib/logging/logger';
import { systemClock, type Clock } from '../../lib/clock';
import { QmpClosedError, QmpCommandError, QmpConnectError, QmpProtocolError, QmpTimeoutError } from './errors';

/** An asynchronous event, with its data (an empty object when QEMU sent none). */
export interface QmpEvent {
  readonly event: string;
  readonly data: Readonly<Record<string, unknown>>;
  /** Seconds since the epoch, from QEMU's timestamp. */
  readonly time?: number;
}

/** QEMU's version, from the greeting. */
export interface QmpVersion {
  readonly major: number;
  readonly minor: number;
  readonly micro: number;
  readonly package: string;
}

/** How to connect. */
export interface QmpConnectOptions {
  /** Budget for the whole handshake: the socket appearing, the greeting, `qmp_capabilities`. */
  readonly timeoutMs: number;
  /** Default deadline of each command (default 30 s). */
  readonly commandTimeoutMs?: number;
  /** Pause between attempts while the socket does not exist or refuses (default 20 ms). */
  readonly retryIntervalMs?: number;
  /** Aborting stops the attempts and rejects with `QmpConnectError`. */
  readonly signal?: AbortSignal;
  readonly clock?: Clock;
  readonly logger?: Logger;
}

type Pending = { command: string; resolve: (v: unknown) => void; reject: (e: Error) => void; stop: AbortController };

const RETRYABLE = new Set(['ENOENT', 'ECONNREFUSED', 'EAGAIN']);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A text field of a QMP message (QMP's schema makes them strings), or `fallback`. */
export function qmpText(v: unknown, fallback: string): string {
  return typeof v === 'string' ? v : fallback;
}

/**
 * One QMP connection. Owned by whoever connected it; safe to share between concurrent callers.
 * Never throws synchronously; every failure is a rejected promise with a `QmpError` subclass.
 */
export class QmpClient {
  private readonly pending = new Map<string, Pending>();
  private readonly listeners = new Set<(e: QmpEvent) => void>();
  private nextId = 1;
  private buffer = '';
  private done = false;
  private readonly clock: Clock;
  private readonly commandTimeoutMs: number;
  /** Resolves once the connection is closed, whoever closed it. */
  readonly closed: Promise<void>;
  private markClosed!: () => void;

  private constructor(
    private readonly socket: Socket,
    readonly path: string,
    readonly version: QmpVersion,
    opts: QmpConnectOptions,
    leftover: string,
  ) {
    this.clock = opts.clock ?? systemClock;
    this.commandTimeoutMs = opts.commandTimeoutMs ?? 30_000;
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
    socket.on('data', (chunk: string) => this.onData(chunk));
    socket.on('close', () => this.shutdown());
    socket.on('error', () => this.shutdown());
    if (leftover) this.onData(leftover);
    socket.resume();
  }

  /**
   * Connects, retrying while the socket is still appearing (ENOENT, ECONNREFUSED), reads the
   * greeting and negotiates capabilities.
   * @throws QmpConnectError when the deadline passes or the signal aborts first
   * @throws QmpProtocolError when the peer does not greet like QEMU
   */
  static async connect(path: string, opts: QmpConnectOptions): Promise<QmpClient> {
    const clock = opts.clock ?? systemClock;
    const deadline = clock.now() + opts.timeoutMs;
    let lastError = 'the socket did not appear';
    for (;;) {
      if (opts.signal?.aborted) throw new QmpConnectError(path, 'aborted');
      const left = deadline - clock.now();
      if (left <= 0) throw new QmpConnectError(path, `${lastError} within ${opts.timeoutMs} ms`);
      const attempt = await openSocket(path, left, opts.signal);
      if ('socket' in attempt) {
        const greeted = await readGreeting(attempt.socket, path, deadline - clock.now(), clock, opts.signal);
        const client = new QmpClient(attempt.socket, path, greeted.version, opts, greeted.rest);
        try {
          await client.execute('qmp_capabilities', undefined, { timeoutMs: Math.max(1, deadline - clock.now()) });
        } catch (e) {
          client.close();
          throw new QmpConnectError(path, `qmp_capabilities failed: ${(e as Error).message}`, { cause: e });
        }
        opts.logger?.debug({ qmp: path, qemu: `${greeted.version.major}.${greeted.version.minor}.${greeted.version.micro}` }, 'qmp connected');
        return client;
      }
      if (!RETRYABLE.has(attempt.code)) throw new QmpConnectError(path, attempt.code);
      lastError = attempt.code === 'ENOENT' ? 'the socket did not appear' : `connection ${attempt.code}`;
      await clock.sleep(Math.min(opts.retryIntervalMs ?? 20, Math.max(1, left)), opts.signal).catch(() => undefined);
    }
  }

  get isClosed(): boolean {
    return this.done;
  }

  /**
   * Runs `command` and resolves with its `return` value.
   * @throws QmpCommandError when QEMU answers with an error
   * @throws QmpTimeoutError when no answer comes within the deadline (a late answer is dropped)
   * @throws QmpClosedError when the connection is or becomes closed first
   */
  execute(command: string, args?: Readonly<Record<string, unknown>>, opts: { readonly timeoutMs?: number } = {}): Promise<unknown> {
    if (this.done) return Promise.reject(new QmpClosedError(this.path, command));
    const id = `q${this.nextId++}`;
    const timeoutMs = opts.timeoutMs ?? this.commandTimeoutMs;
    return new Promise<unknown>((resolve, reject) => {
      const stop = new AbortController();
      this.pending.set(id, { command, resolve, reject, stop });
      this.clock.sleep(timeoutMs, stop.signal).then(
        () => {
          if (this.pending.delete(id)) reject(new QmpTimeoutError(command, timeoutMs));
        },
        () => undefined,
      );
      const message = args === undefined ? { execute: command, id } : { execute: command, arguments: args, id };
      this.socket.write(`${JSON.stringify(message)}\n`);
    });
  }

  /** Calls `listener` with every event until the returned function is called. */
  onEvent(listener: (e: QmpEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * The next event named `name` (and accepted by `match`), arriving after this call.
   * @throws QmpTimeoutError, QmpClosedError
   */
  waitEvent(name: string, opts: { readonly timeoutMs: number; readonly match?: (e: QmpEvent) => boolean }): Promise<QmpEvent> {
    if (this.done) return Promise.reject(new QmpClosedError(this.path, `event ${name}`));
    return new Promise<QmpEvent>((resolve, reject) => {
      const stop = new AbortController();
      const finish = (fn: () => void): void => {
        off();
        stop.abort();
        fn();
      };
      const off = this.onEvent((e) => {
        if (e.event === name && (opts.match?.(e) ?? true)) finish(() => resolve(e));
      });
      this.closed.then(() => finish(() => reject(new QmpClosedError(this.path, `event ${name}`))), () => undefined);
      this.clock.sleep(opts.timeoutMs, stop.signal).then(
        () => finish(() => reject(new QmpTimeoutError(`event ${name}`, opts.timeoutMs))),
        () => undefined,
      );
    });
  }

  /** Closes the connection; pending commands reject with `QmpClosedError`. Idempotent. */
  close(): void {
    this.socket.destroy();
    this.shutdown();
  }

  private shutdown(): void {
    if (this.done) return;
    this.done = true;
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      p.stop.abort();
      p.reject(new QmpClosedError(this.path, p.command));
    }
    this.markClosed();
  }

  private onData(chunk: string): void {
    this.buffer += chunk;
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl).trim();
      this.buffer = this.buffer.slice(nl + 1);
      if (line !== '') this.onMessage(line);
    }
  }

  private onMessage(line: string): void {
    let msg: unknown;
    try {
      msg = JSON.parse(line);
    } catch {
      return; // Not ours to fix; QEMU never sends partial JSON on a line.
    }
    if (!isObject(msg)) return;
    if (typeof msg.event === 'string') {
      const ts = isObject(msg.timestamp) ? msg.timestamp : undefined;
      const time = typeof ts?.seconds === 'number' ? ts.seconds + (typeof ts.microseconds === 'number' ? ts.microseconds / 1e6 : 0) : undefined;
      const event: QmpEvent = { event: msg.event, data: isObject(msg.data) ? msg.data : {}, ...(time === undefined ? {} : { time }) };
      for (const l of [...this.listeners]) l(event);
      return;
    }
    const id = typeof msg.id === 'string' ? msg.id : undefined;
    const p = id === undefined ? undefined : this.pending.get(id);
    if (!p || id === undefined) return; // a late answer to a timed-out command
    this.pending.delete(id);
    p.stop.abort();
    if ('return' in msg) p.resolve(msg.return);
    else if (isObject(msg.error)) p.reject(new QmpCommandError(p.command, qmpText(msg.error.class, 'GenericError'), qmpText(msg.error.desc, '')));
    else p.reject(new QmpProtocolError(this.path, `answer to ${p.command} has neither return nor error`));
  }
}

type Attempt = { socket: Socket } | { code: string };

function openSocket(path: string, timeoutMs: number, signal?: AbortSignal): Promise<Attempt> {
  return new Promise((resolve) => {
    const socket = createConnection({ path });
    const timer = setTimeout(() => finish({ code: 'ETIMEDOUT' }), timeoutMs);
    const onAbort = (): void => finish({ code: 'ABORTED' });
    signal?.addEventListener('abort', onAbort, { once: true });
    function finish(a: Attempt): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      socket.removeAllListeners('connect');
      socket.removeAllListeners('error');
      if ('code' in a) socket.destroy();
      resolve(a);
    }
    socket.once('connect', () => finish({ socket }));
    socket.once('error', (e: NodeJS.ErrnoException) => finish({ code: e.code ?? 'ERROR' }));
  });
}

/**
 * Reads the greeting line; returns QEMU's version and whatever followed it in the same chunk.
 * Event lines before it are skipped: a client that connects while QEMU is still starting can be
 * sent an event (RESUME, as the VM starts) before the monitor has greeted it.
 */
function readGreeting(socket: Socket, path: string, timeoutMs: number, clock: Clock, signal?: AbortSignal): Promise<{ version: QmpVersion; rest: string }> {
  socket.setEncoding('utf8');
  return new Promise((resolve, reject) => {
    let buf = '';
    const stop = new AbortController();
    const fail = (e: Error): void => {
      cleanup();
      socket.destroy();
      reject(e);
    };
    const onData = (chunk: string): void => {
      buf += chunk;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        let msg: unknown;
        try {
          msg = JSON.parse(line);
        } catch (e) {
          fail(new QmpProtocolError(path, `bad greeting ${JSON.stringify(line.slice(0, 80))}`, { cause: e }));
          return;
        }
        buf = buf.slice(nl + 1);
        if (isObject(msg) && typeof msg.event === 'string') continue;
        const qmp = isObject(msg) && isObject(msg.QMP) ? msg.QMP : undefined;
        const v = isObject(qmp?.version) ? qmp.version : undefined;
        const q = isObject(v?.qemu) ? v.qemu : undefined;
        if (!q) {
          fail(new QmpProtocolError(path, `bad greeting ${JSON.stringify(line.slice(0, 80))}`));
          return;
        }
        cleanup();
        socket.pause(); // until the client's own listener is attached
        const num = (x: unknown): number => (typeof x === 'number' ? x : 0);
        resolve({ version: { major: num(q.major), minor: num(q.minor), micro: num(q.micro), package: qmpText(v?.package, '') }, rest: buf });
        return;
      }
    };
    const onClose = (): void => fail(new QmpConnectError(path, 'closed before greeting'));
    const onAbort = (): void => fail(new QmpConnectError(path, 'aborted'));
    function cleanup(): void {
      stop.abort();
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.off('error', onClose);
      signal?.removeEventListener('abort', onAbort);
    }
    socket.on('data', onData);
    socket.on('close', onClose);
    socket.on('error', onClose);
    signal?.addEventListener('abort', onAbort, { once: true });
    clock.sleep(Math.max(1, timeoutMs), stop.signal).then(
      () => fail(new QmpConnectError(path, `no greeting within the deadline (another client may hold the monitor)`)),
      () => undefined,
    );
  });
}
