/**
 * A fake systemd NOTIFY_SOCKET: a unix datagram socket (Node cannot open one, so a tiny python3
 * process binds it) that collects every message sent to it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const RECEIVER = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("listening", flush=True)
while True:
    data = s.recv(65536)
    print(data.decode().replace("\\n", "|"), flush=True)
`;

export interface NotifySocket {
  readonly path: string;
  /** Every message so far, each as its assignments, e.g. ['READY=1', 'STATUS=up']. */
  messages(): string[][];
  waitFor(pred: (m: string[]) => boolean, ms?: number): Promise<string[]>;
  close(): void;
}

export async function fakeNotifySocket(): Promise<NotifySocket> {
  const path = join(mkdtempSync(join(tmpdir(), 'ca-notify-')), 'notify.sock');
  const child: ChildProcess = spawn('/usr/bin/python3', ['-c', RECEIVER, path], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  let buf = '';
  child.stdout?.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop() ?? '';
    lines.push(...parts);
  });
  const deadline = Date.now() + 5000;
  while (!lines.includes('listening')) {
    if (Date.now() > deadline) throw new Error('fake notify socket did not start');
    await new Promise((r) => setTimeout(r, 20));
  }
  const messages = (): string[][] => lines.filter((l) => l !== 'listening').map((l) => l.split('|'));
  return {
    path,
    messages,
    async waitFor(pred, ms = 10000) {
      const end = Date.now() + ms;
      for (;;) {
        const found = messages().find(pred);
        if (found) return found;
        if (Date.now() > end) throw new Error(`no matching notify message; got ${JSON.stringify(messages())}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close: () => {
      child.kill();
    },
  };
}
