/**
 * NovaObject primitives as nova-conductor reads and writes them: `nova_object.name`, `.namespace`,
 * `.version`, `.data` and `.changes`. The conductor saves exactly the fields named in `.changes`,
 * so every write here names the fields it changed and nothing else.
 *
 * A field nova added in a later object version (`Instance.compute_id` in 2.8, `Migration.dest_compute_id`
 * in 1.8) is written only to a primitive at that version or later: the control plane that sent an
 * older one does not have the field.
 *
 * Not here: what to write when (the service and control-plane modules decide that).
 */
import type { ObjectVersions } from './releases';

/** An object primitive (`nova_object.*` keys). */
export type Primitive = Readonly<Record<string, unknown>>;

/** A value is not the NovaObject primitive expected; names what was expected. */
export class PrimitiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PrimitiveError';
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function isPrimitive(v: unknown, name?: string): v is Primitive {
  return isRecord(v) && typeof v['nova_object.name'] === 'string' && isRecord(v['nova_object.data']) && (name === undefined || v['nova_object.name'] === name);
}

/** The fields nova added after an object's first version, and the version that added each. */
const FIELD_SINCE: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  Instance: { compute_id: '2.8' },
  Migration: { dest_compute_id: '1.8' },
};

function versionTuple(v: unknown): [number, number] {
  const m = typeof v === 'string' ? /^(\d+)\.(\d+)/.exec(v) : null;
  return m ? [Number(m[1]), Number(m[2])] : [0, 0];
}

/** Whether the object `p` is (by its name and version) has `field`. Fields not in FIELD_SINCE: yes. */
export function hasField(p: Primitive, field: string): boolean {
  const since = FIELD_SINCE[String(p['nova_object.name'])]?.[field];
  if (since === undefined) return true;
  const [a, b] = versionTuple(p['nova_object.version']);
  const [x, y] = versionTuple(since);
  return a > x || (a === x && b >= y);
}

/** A new primitive of `name` at the version `versions` (a release's manifest) names, with `changes` (default: every field in `data`). */
export function primitive(name: string, data: Readonly<Record<string, unknown>>, versions: ObjectVersions, changes: readonly string[] = Object.keys(data)): Primitive {
  const version = versions[name];
  if (!version) throw new PrimitiveError(`no nova object named ${name}`);
  return { 'nova_object.name': name, 'nova_object.namespace': 'nova', 'nova_object.version': version, 'nova_object.data': { ...data }, 'nova_object.changes': [...changes] };
}

/** The data of a primitive of `name`. @throws PrimitiveError */
export function dataOf(v: unknown, name: string): Readonly<Record<string, unknown>> {
  if (!isPrimitive(v, name)) throw new PrimitiveError(`expected a ${name} object, got ${JSON.stringify(v)?.slice(0, 120) ?? String(v)}`);
  return v['nova_object.data'] as Record<string, unknown>;
}

/**
 * `base` with `updates` applied and `.changes` naming exactly the updated fields: the form a
 * `save()` sends. The other fields stay as the conductor last gave them; a field `base`'s version
 * does not have is left out.
 */
export function withChanges(base: Primitive, updates: Readonly<Record<string, unknown>>): Primitive {
  // undefined: a value this agent does not have (a field nova did not send); never written.
  const set = Object.fromEntries(Object.entries(updates).filter(([k, v]) => v !== undefined && hasField(base, k)));
  const data = { ...(base['nova_object.data'] as Record<string, unknown>), ...set };
  return { ...base, 'nova_object.data': data, 'nova_object.changes': Object.keys(set) };
}

/** `base` after the conductor's `updates` (the first element of an `object_action` reply), with no pending changes. */
export function applyUpdates(base: Primitive, updates: Readonly<Record<string, unknown>>): Primitive {
  const data: Record<string, unknown> = { ...(base['nova_object.data'] as Record<string, unknown>) };
  for (const [k, v] of Object.entries(updates)) if (k !== 'obj_what_changed') data[k] = v;
  return { ...base, 'nova_object.data': data, 'nova_object.changes': [] };
}

/** nova's DateTimeField form: ISO 8601 UTC, seconds precision, `Z`. */
export function novaTime(d: Date): string {
  return `${d.toISOString().slice(0, 19)}Z`;
}
