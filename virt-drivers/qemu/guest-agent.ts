/**
 * The QEMU guest agent (qemu-ga) of one guest, reached through the virtio-serial channel
 * `org.qemu.guest_agent.0` whose host end is a unix socket QEMU listens on.
 *
 * Protocol (QEMU's qga/qapi-schema.json): JSON objects, one per line, `{"execute", "arguments"}`
 * answered by `{"return"}` or `{"error": {"class", "desc"}}`, with no ids. The channel outlives its
 * clients: a reply that a previous client gave up on may still be waiting in it, and the agent may
 * not run at all (the socket accepts; nothing answers). So each call connects, sends
 * `guest-sync-delimited` with a random id, skips everything up to the 0xFF byte the agent writes
 * before that reply and up to the reply carrying the id, and only then sends its command; the
 * whole exchange has one deadline.
 *
 * It is: one command per connection, for the rare calls nova makes (a password, a filesystem
 * freeze and thaw). It is not: a connection pool, nor a serializer of callers (QEMU serves one
 * client per socket at a time: the driver orders calls per instance).
 */
import { randomInt } from 'node:crypto';
import { createConnection } from 'node:net';
import { DriverError } from '../errors';

/** The guest agent did not answer in time, or its channel could not be opened. */
export class GuestAgentUnavailableError extends DriverError {
  constructor(
    readonly instance: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(`the guest agent of instance ${instance} is not answering: ${reason}`, options);
    this.name = 'GuestAgentUnavailableError';
  }
}

/** The guest agent refused a command, with its error class and words. */
export class GuestAgentCommandError extends DriverError {
  constructor(
    readonly instance: string,
    readonly command: string,
    readonly errorClass: string,
    readonly desc: string,
  ) {
    super(`the guest agent of instance ${instance} refused ${command}: ${desc} (${errorClass})`);
    this.name = 'GuestAgentCommandError';
  }
}

const DELIMITER = 0xff;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Runs `command` with `args` on the guest agent behind `socketPath` and resolves its `return`.
 * @throws GuestAgentUnavailableError (no socket, no answer within `timeoutMs`, the channel
 * closed), GuestAgentCommandError (the agent answered with an error)
 */
export function guestAgentCall(instance: string, socketPath: string, command: string, args: Readonly<Record<string, unknown>> | undefined, timeoutMs: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const syncId = randomInt(1, 2 ** 31);
    const sock = createConnection(socketPath);
    let buffer = Buffer.alloc(0);
    let synced = false;
    let sawDelimiter = false;
    let settled = false;
    const finish = (err: Error | undefined, value?: unknown): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(value);
    };
    const timer = setTimeout(() => finish(new GuestAgentUnavailableError(instance, `no answer to ${synced ? command : 'guest-sync-delimited'} within ${timeoutMs} ms (is qemu-ga running in the guest?)`)), timeoutMs);
    const send = (execute: string, a?: Readonly<Record<string, unknown>>): void => void sock.write(`${JSON.stringify(a === undefined ? { execute } : { execute, arguments: a })}\n`);

    const onMessage = (msg: unknown): void => {
      if (!isObject(msg)) return;
      if (!synced) {
        // Anything before our sync's reply is a stale answer to an earlier client.
        if (msg.return === syncId) {
          synced = true;
          send(command, args);
        }
        return;
      }
      if (isObject(msg.error)) {
        const e = msg.error;
        finish(new GuestAgentCommandError(instance, command, typeof e.class === 'string' ? e.class : 'GenericError', typeof e.desc === 'string' ? e.desc : JSON.stringify(e)));
      } else if ('return' in msg) finish(undefined, msg.return);
    };

    // A 0xFF first resets the agent's parser, in case a client before us left half a command.
    sock.on('connect', () => {
      sock.write(Buffer.from([DELIMITER]));
      send('guest-sync-delimited', { id: syncId });
    });
    sock.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      if (!synced) {
        // Until our sync's reply, whatever precedes the latest sentinel is older than it.
        const at = buffer.lastIndexOf(DELIMITER);
        if (at >= 0) {
          sawDelimiter = true;
          buffer = buffer.subarray(at + 1);
        } else if (!sawDelimiter) {
          buffer = Buffer.alloc(0);
          return;
        }
      }
      for (let nl = buffer.indexOf(0x0a); nl >= 0 && !settled; nl = buffer.indexOf(0x0a)) {
        const line = buffer.subarray(0, nl).toString('utf8').trim();
        buffer = buffer.subarray(nl + 1);
        if (!line) continue;
        try {
          onMessage(JSON.parse(line));
        } catch {
          // Not JSON: noise from the guest's side of the channel, skipped.
        }
      }
    });
    sock.on('error', (e: NodeJS.ErrnoException) => finish(new GuestAgentUnavailableError(instance, `cannot open its channel ${socketPath} (${e.code ?? e.message})`, { cause: e })));
    sock.on('close', () => finish(new GuestAgentUnavailableError(instance, 'its channel closed before it answered')));
  });
}

/** `guest-set-user-password` for `user`, the password in clear (qemu-ga takes it base64-encoded, not crypted). */
export async function setUserPassword(instance: string, socketPath: string, user: string, password: string, timeoutMs: number): Promise<void> {
  await guestAgentCall(instance, socketPath, 'guest-set-user-password', { username: user, password: Buffer.from(password, 'utf8').toString('base64'), crypted: false }, timeoutMs);
}

/** `guest-fsfreeze-freeze`: the guest's filesystems frozen; resolves how many. */
export async function freezeFilesystems(instance: string, socketPath: string, timeoutMs: number): Promise<number> {
  return Number(await guestAgentCall(instance, socketPath, 'guest-fsfreeze-freeze', undefined, timeoutMs));
}

/** `guest-fsfreeze-thaw`: the guest's filesystems thawed; resolves how many. */
export async function thawFilesystems(instance: string, socketPath: string, timeoutMs: number): Promise<number> {
  return Number(await guestAgentCall(instance, socketPath, 'guest-fsfreeze-thaw', undefined, timeoutMs));
}
