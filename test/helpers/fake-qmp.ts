/**
 * A fake QMP server on a unix socket: greets (optionally in pieces), answers `qmp_capabilities`,
 * and hands every other command to a test-supplied handler that may answer, answer later, answer
 * out of order, fail, or stay silent. Tests push events and close connections at will.
 *
 * It is: just enough of QEMU's monitor to test the client's framing, matching and failure paths.
 * It is not: a model of QEMU; real QEMU is exercised by the integration tests.
 */
import { createServer, type Server, type Socket } from 'node:net';

export interface FakeQmpCommand {
  readonly execute: string;
  readonly arguments?: Record<string, unknown>;
  readonly id?: unknown;
}

/** What the handler returns: an answer now, or nothing (the test answers later with `reply`). */
export type FakeQmpAnswer = { return: unknown } | { error: { class: string; desc: string } } | undefined;

export interface FakeQmpOptions {
  /** Sends the greeting in these pieces (default: whole). */
  readonly greetingPieces?: number;
  /** Never greet (a monitor busy with another client). */
  readonly silent?: boolean;
  /** Greet with this line instead. */
  readonly greeting?: string;
  /** Events sent before the greeting (QEMU can emit RESUME to a client that connected during its start-up). */
  readonly eventsBeforeGreeting?: readonly string[];
}

export class FakeQmpServer {
  readonly received: FakeQmpCommand[] = [];
  readonly connections: Socket[] = [];
  handler: (cmd: FakeQmpCommand) => FakeQmpAnswer = () => ({ return: {} });
  private server: Server | undefined;

  constructor(readonly path: string, private readonly opts: FakeQmpOptions = {}) {}

  async listen(): Promise<void> {
    this.server = createServer((socket) => this.onConnection(socket));
    await new Promise<void>((resolve, reject) => {
      this.server?.once('error', reject);
      this.server?.listen(this.path, () => resolve());
    });
  }

  /** Answers a command the handler left unanswered. */
  reply(cmd: FakeQmpCommand, answer: Exclude<FakeQmpAnswer, undefined>): void {
    this.send({ ...answer, id: cmd.id });
  }

  event(name: string, data?: Record<string, unknown>): void {
    this.send({ event: name, ...(data ? { data } : {}), timestamp: { seconds: 1700000000, microseconds: 500000 } });
  }

  /** Sends raw text to every connection. */
  raw(text: string): void {
    for (const c of this.connections) c.write(text);
  }

  /** Drops every client connection (QEMU quitting). */
  dropClients(): void {
    for (const c of this.connections) c.destroy();
    this.connections.length = 0;
  }

  async close(): Promise<void> {
    this.dropClients();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private send(msg: object): void {
    this.raw(`${JSON.stringify(msg)}\r\n`);
  }

  private onConnection(socket: Socket): void {
    this.connections.push(socket);
    socket.setEncoding('utf8');
    socket.on('error', () => undefined);
    for (const event of this.opts.eventsBeforeGreeting ?? []) {
      socket.write(`${JSON.stringify({ timestamp: { seconds: 1, microseconds: 0 }, event })}\r\n`);
    }
    if (!this.opts.silent) {
      const greeting =
        this.opts.greeting ?? `${JSON.stringify({ QMP: { version: { qemu: { micro: 22, minor: 2, major: 7 }, package: 'fake' }, capabilities: ['oob'] } })}\r\n`;
      const n = Math.max(1, this.opts.greetingPieces ?? 1);
      const size = Math.ceil(greeting.length / n);
      for (let i = 0; i < n; i++) {
        const piece = greeting.slice(i * size, (i + 1) * size);
        setTimeout(() => socket.write(piece), i * 5);
      }
    }
    let buf = '';
    socket.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const cmd = JSON.parse(buf.slice(0, nl)) as FakeQmpCommand;
        buf = buf.slice(nl + 1);
        this.received.push(cmd);
        const answer = cmd.execute === 'qmp_capabilities' ? { return: {} } : this.handler(cmd);
        if (answer) socket.write(`${JSON.stringify({ ...answer, id: cmd.id })}\r\n`);
      }
    });
  }
}
