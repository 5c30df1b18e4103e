/**
 * The AMQP properties oslo.messaging (kombu) puts on every RPC message, verified on the wire
 * (`test/fixtures/oslo/*.json`): JSON, UTF-8, persistent delivery mode, priority 0, empty headers;
 * a call adds `expiration`, its timeout in milliseconds as a string. No `reply_to` or
 * `correlation_id`: the reply address travels in the body.
 */
import type { MessageProperties } from '../amqp/broker';

export function osloProperties(expirationMs?: number, headers: Readonly<Record<string, unknown>> = {}): MessageProperties {
  const p: MessageProperties = {
    contentType: 'application/json',
    contentEncoding: 'utf-8',
    deliveryMode: 2,
    priority: 0,
    headers,
  };
  return expirationMs === undefined ? p : { ...p, expiration: String(Math.max(0, Math.round(expirationMs))) };
}
