/**
 * Versioned notifications in oslo.messaging's format (the compute manager's `Notifier` port):
 * published on the control exchange with routing key `versioned_notifications.<priority>`, the
 * oslo envelope around `{message_id, publisher_id, event_type, priority, payload, timestamp}` and
 * the request context as `_context_*` keys, so tools that read nova's notifications read ours.
 *
 * Publishing waits for the broker's confirm but never throws: casts have no reply, a notification
 * is the only outcome a caller sees, and a failure to send one is logged, not fatal.
 */
import { randomUUID } from 'node:crypto';
import type { Notification, Notifier, RequestContext } from '../ports';
import type { Logger } from '../../../lib/logging/logger';
import type { Broker } from '../../rpc/amqp/broker';
import { encodeEnvelope } from '../../rpc/oslo/envelope';
import { osloProperties } from '../../rpc/oslo/properties';

export const NOTIFICATION_TOPIC = 'versioned_notifications';

/** `2026-01-02 03:04:05.678901`, oslo's notification timestamp. */
function timestamp(d: Date): string {
  return `${d.toISOString().replace('T', ' ').replace('Z', '').slice(0, 23)}000`;
}

export class RpcNotifier implements Notifier {
  constructor(
    private readonly broker: Broker,
    private readonly exchange: string,
    private readonly host: string,
    private readonly logger: Logger,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async notify(n: Notification, ctx: RequestContext): Promise<void> {
    const message: Record<string, unknown> = {
      message_id: randomUUID(),
      publisher_id: `nova-compute:${this.host}`,
      event_type: n.event_type,
      priority: n.priority,
      payload: n.payload,
      timestamp: timestamp(this.now()),
    };
    for (const [k, v] of Object.entries(ctx)) message[`_context_${k}`] = v;
    try {
      await this.broker.publish({
        exchange: this.exchange,
        routingKey: `${NOTIFICATION_TOPIC}.${n.priority.toLowerCase()}`,
        body: encodeEnvelope(message),
        properties: osloProperties(),
      });
    } catch (e) {
      this.logger.warn({ event: n.event_type, reason: (e as Error).message }, 'notification not published');
    }
  }
}
