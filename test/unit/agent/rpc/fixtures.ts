// Real oslo.messaging 14.0.3 messages captured on RabbitMQ 3.10.8 (test/fixtures/oslo/README.md).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface OsloFixture {
  readonly kind: string;
  readonly exchange: string;
  readonly routing_key: string;
  readonly properties: Record<string, unknown>;
  readonly body_raw: string;
  readonly oslo_message: Record<string, unknown>;
  readonly failure_decoded?: Record<string, unknown>;
}

export function osloFixture(name: string): OsloFixture {
  return JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'fixtures', 'oslo', `${name}.json`), 'utf8')) as OsloFixture;
}

export const rawBody = (name: string): Buffer => Buffer.from(osloFixture(name).body_raw, 'utf8');
