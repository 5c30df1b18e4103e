/**
 * `compute-agent rpc call|cast <host> <method> [json-args]`: the operator's oslo.messaging client,
 * speaking to any RPC server on the configured broker (an agent, a nova-compute, a conductor with
 * `--topic conductor`) exactly as nova would.
 *
 * Exit codes: `call` prints the JSON result and exits 0, or prints the remote failure (class,
 * module, message; no traceback) and exits 1; `cast` exits 0 once the broker confirmed the publish.
 * A broker that cannot be reached or a call without answer exits 1; bad arguments exit 2 before
 * anything is sent.
 */
import { Option, type Command } from 'commander';
import { silentLogger } from '../../../lib/logging/logger';
import { AmqpBroker } from '../../rpc/amqp/amqp-broker';
import { RpcClient } from '../../rpc/endpoint/client';
import { RemoteError, RpcTimeoutError } from '../../rpc/oslo/errors';
import { parseVersion } from '../../rpc/oslo/versions';
import type { CliContext, CommandModule } from '../context';

interface RpcOptions {
  topic: string;
  apiVersion: string;
  namespace?: string;
  timeout?: string;
  callMonitorTimeout?: string;
}

/** The argument object, or a message explaining why it is not one. */
export function parseJsonArgs(text: string | undefined): { args: Record<string, unknown> } | { error: string } {
  if (text === undefined || text.trim() === '') return { args: {} };
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return { error: `json-args: not valid JSON (${e instanceof Error ? e.message : String(e)})` };
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return { error: 'json-args: must be a JSON object of keyword arguments, e.g. \'{"instance_uuid": "..."}\'' };
  return { args: v as Record<string, unknown> };
}

function positiveSeconds(name: string, text: string | undefined): number | undefined | string {
  if (text === undefined) return undefined;
  const n = Number(text);
  return Number.isFinite(n) && n > 0 && n <= 2_000_000 ? n : `--${name} = ${JSON.stringify(text)}: expected a number of seconds > 0`;
}

async function send(kind: 'call' | 'cast', ctx: CliContext, host: string, method: string, json: string | undefined, opts: RpcOptions, cmd: Parameters<CliContext['load']>[0]): Promise<void> {
  const fail = (code: number, line: string): void => {
    ctx.io.err(line);
    ctx.setExitCode(code);
  };
  const parsed = parseJsonArgs(json);
  if ('error' in parsed) return fail(2, parsed.error);
  if (!parseVersion(opts.apiVersion)) return fail(2, `--api-version = ${JSON.stringify(opts.apiVersion)}: expected X.Y`);
  const timeout = positiveSeconds('timeout', opts.timeout);
  const monitor = positiveSeconds('call-monitor-timeout', opts.callMonitorTimeout);
  if (typeof timeout === 'string') return fail(2, timeout);
  if (typeof monitor === 'string') return fail(2, monitor);

  const { config } = ctx.load(cmd);
  const d = config.DEFAULT;
  const logger = silentLogger();
  const broker = new AmqpBroker({ transport: d.transport_url, rabbit: config.oslo_messaging_rabbit, logger, initialAttempts: 2, connectionName: `compute-agent-cli:${process.pid}` });
  const client = new RpcClient({ broker, logger, rabbit: config.oslo_messaging_rabbit, controlExchange: d.control_exchange, defaultTimeoutMs: d.rpc_response_timeout * 1000 });
  const target = { topic: opts.topic, server: host, version: opts.apiVersion, namespace: opts.namespace ?? null };
  const timeoutMs = (timeout ?? d.rpc_response_timeout) * 1000;
  try {
    await broker.start();
    if (kind === 'cast') {
      await client.cast(target, method, parsed.args, { signal: AbortSignal.timeout(timeoutMs) });
      ctx.io.out(`cast ${method} to ${opts.topic}.${host} confirmed by the broker`);
    } else {
      const result = await client.call(target, method, parsed.args, { timeoutMs, callMonitorTimeout: monitor ?? null });
      ctx.io.out(JSON.stringify(result === undefined ? null : result, null, 2));
    }
  } catch (e) {
    if (e instanceof RemoteError) return fail(1, `remote error: ${e.module ? `${e.module}.` : ''}${e.className}: ${e.remoteMessage}`);
    if (e instanceof RpcTimeoutError) return fail(1, `no reply from ${opts.topic}.${host} within ${timeoutMs / 1000} s (${method})`);
    fail(1, `compute-agent: ${e instanceof Error ? e.message : String(e)}`);
  } finally {
    await client.close().catch(() => undefined);
    await broker.close().catch(() => undefined);
  }
}

export const rpcCommand: CommandModule = (program, ctx) => {
  const rpc = program.command('rpc').description('send oslo.messaging RPC to a host (as nova does), for diagnosis');
  for (const kind of ['call', 'cast'] as const) {
    const c = rpc
      .command(`${kind} <host> <method> [json-args]`)
      .description(kind === 'call' ? 'call a method and print its JSON result (exit 1 on a remote failure)' : 'cast a method; exit 0 once the broker confirmed it')
      .addOption(new Option('--topic <topic>', 'RPC topic').default('compute'))
      .addOption(new Option('--api-version <x.y>', 'API version requested').default('6.0'))
      .addOption(new Option('--namespace <ns>', 'target namespace'))
      .addOption(new Option('--timeout <seconds>', 'give up after this long (default: rpc_response_timeout)'));
    if (kind === 'call') c.addOption(new Option('--call-monitor-timeout <seconds>', 'ask the server for heartbeats (oslo call_monitor_timeout)'));
    c.action((host: string, method: string, json: string | undefined, opts: RpcOptions, cmd: Command) => send(kind, ctx, host, method, json, opts, cmd));
  }
};
