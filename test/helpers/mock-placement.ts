/**
 * A Placement stand-in on nock for fast tests of the tracker and of drivers ("driver tests with
 * mocked placement"). It keeps providers, inventories, traits, aggregates and allocations in memory
 * with Placement's generation rules (a change bumps the provider, but removing allocations from it
 * may not: see `allocationRoutes`; a stale generation is a 409),
 * and answers errors with the bodies of the real exchanges in `test/fixtures/placement/`. Behaviour
 * the agent relies on is also proven against the real server in `test/integration/`.
 */
import nock from 'nock';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

type Inv = Record<string, { total: number; reserved: number; min_unit: number; max_unit: number; step_size: number; allocation_ratio: number }>;
interface Rp {
  uuid: string;
  name: string;
  parent: string | null;
  generation: number;
  inventories: Inv;
  traits: string[];
  aggregates: string[];
}
interface Consumer {
  generation: number;
  project_id: string;
  user_id: string;
  allocations: Record<string, Record<string, number>>;
}

/** os-resource-classes' standard classes (Placement 8.0 knows these 21). */
const STANDARD_CLASSES = new Set(
  'VCPU MEMORY_MB DISK_GB PCI_DEVICE SRIOV_NET_VF NUMA_SOCKET NUMA_CORE NUMA_THREAD NUMA_MEMORY_MB IPV4_ADDRESS VGPU VGPU_DISPLAY_HEAD NET_BW_EGR_KILOBIT_PER_SEC NET_BW_IGR_KILOBIT_PER_SEC PCPU MEM_ENCRYPTION_CONTEXT FPGA PGPU NET_PACKET_RATE_KILOPACKET_PER_SEC NET_PACKET_RATE_EGR_KILOPACKET_PER_SEC NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC'.split(' '),
);

const FIXTURES = join(__dirname, '..', 'fixtures', 'placement');
const fixtureBody = (name: string): { errors: Array<Record<string, unknown>> } =>
  (JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), 'utf8')) as { response_body: { errors: Array<Record<string, unknown>> } }).response_body;

/** A real error body with its detail replaced. */
function error(fixture: string, detail?: string): { errors: Array<Record<string, unknown>> } {
  const body = fixtureBody(fixture);
  const e = { ...body.errors[0] };
  if (detail) e.detail = `There was a conflict when trying to complete your request.\n\n ${detail}  `;
  return { errors: [e] };
}

export interface RecordedRequest {
  method: string;
  path: string;
  microversion: string | undefined;
  body: unknown;
}

export class MockPlacement {
  readonly base: string;
  readonly providers = new Map<string, Rp>();
  readonly consumers = new Map<string, Consumer>();
  readonly classes = new Set<string>();
  readonly customTraits = new Set<string>();
  /** Standard traits this mock Placement does not know (to test older-os-traits handling). */
  readonly unknownStandardTraits = new Set<string>();
  readonly requests: RecordedRequest[] = [];

  constructor(base = 'http://placement.mock:8778') {
    this.base = base;
  }

  writes(): RecordedRequest[] {
    return this.requests.filter((r) => r.method !== 'GET');
  }

  /** Installs the interceptors (persisting until `nock.cleanAll()`). */
  install(): this {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- nock calls the reply with its own `this`
    const mock = this;
    const scope = nock(this.base).persist();
    for (const m of ['GET', 'PUT', 'POST', 'DELETE'] as const) {
      scope.intercept(/.*/, m).reply(function (this: nock.ReplyFnContext, uri: string, body: nock.Body) {
        return mock.handle(m, uri, body, this.req.headers);
      });
    }
    return this;
  }

  private handle(method: string, uri: string, rawBody: nock.Body, headers: Record<string, string | string[]>): nock.ReplyFnResult {
    const body: unknown = typeof rawBody === 'string' && rawBody !== '' ? JSON.parse(rawBody) : rawBody === '' ? undefined : rawBody;
    const mv = String(headers['openstack-api-version'] ?? '').replace('placement ', '') || undefined;
    this.requests.push({ method, path: uri, microversion: mv, body });
    if (uri === '/' && method === 'GET') return [200, fixtureBody('01-version-root')];
    if (headers['x-auth-token'] !== 'admin') return [401, fixtureBody('02-no-token-401')];
    const [path = '', query = ''] = uri.split('?');
    const params = new URLSearchParams(query);
    const seg = path.split('/').filter(Boolean);
    try {
      return this.route(method, seg, params, body);
    } catch (e) {
      return [500, { message: (e as Error).message }];
    }
  }

  private bump(rp: Rp): void {
    rp.generation++;
  }

  private stale(rp: Rp, given: unknown): nock.ReplyFnResult | undefined {
    return given === rp.generation ? undefined : [409, error('11-put-root-inventories-stale-generation-409')];
  }

  private usage(rp: string): Record<string, number> {
    const u: Record<string, number> = {};
    for (const c of this.consumers.values()) for (const [rc, n] of Object.entries(c.allocations[rp] ?? {})) u[rc] = (u[rc] ?? 0) + n;
    return u;
  }

  private route(method: string, seg: string[], params: URLSearchParams, body: unknown): nock.ReplyFnResult {
    const b = (body ?? {}) as Record<string, unknown>;
    if (seg[0] === 'resource_providers' && seg.length === 1) {
      if (method === 'GET') {
        const inTree = params.get('in_tree');
        const root = (u: string): string => {
          let p = this.providers.get(u);
          while (p?.parent) p = this.providers.get(p.parent);
          return p?.uuid ?? u;
        };
        const memberOf = (params.get('member_of') ?? '').replace(/^in:/, '').split(',').filter(Boolean);
        const required = (params.get('required') ?? '').split(',').filter(Boolean);
        const list = [...this.providers.values()].filter(
          (p) =>
            (!inTree || (this.providers.has(inTree) && root(p.uuid) === root(inTree))) &&
            (memberOf.length === 0 || p.aggregates.some((a) => memberOf.includes(a))) &&
            required.every((t) => p.traits.includes(t)),
        );
        return [200, { resource_providers: list.map((p) => ({ uuid: p.uuid, name: p.name, generation: p.generation, parent_provider_uuid: p.parent, root_provider_uuid: root(p.uuid) })) }];
      }
      const uuid = String(b.uuid);
      const name = String(b.name);
      if ([...this.providers.values()].some((p) => p.name === name || p.uuid === uuid)) return [409, fixtureBody('07-create-duplicate-name-409')];
      const parent = (b.parent_provider_uuid as string | undefined) ?? null;
      if (parent && !this.providers.has(parent)) return [400, fixtureBody('08-create-child-unknown-parent-400')];
      this.providers.set(uuid, { uuid, name, parent, generation: 0, inventories: {}, traits: [], aggregates: [] });
      return [200, { uuid, name, generation: 0, parent_provider_uuid: parent, root_provider_uuid: parent ?? uuid }];
    }
    if (seg[0] === 'resource_providers' && seg[1]) {
      const rp = this.providers.get(seg[1]);
      if (!rp) return [404, { errors: [{ status: 404, code: 'placement.undefined_code', detail: 'not found' }] }];
      const aspect = seg[2];
      if (!aspect && method === 'DELETE') {
        if ([...this.providers.values()].some((p) => p.parent === rp.uuid)) return [409, fixtureBody('31-delete-root-with-child-409')];
        if (Object.keys(this.usage(rp.uuid)).length) {
          return [409, { errors: [{ status: 409, code: 'placement.resource_provider.inuse', detail: 'Unable to delete resource provider: Resource provider has allocations.' }] }];
        }
        this.providers.delete(rp.uuid);
        return [204, ''];
      }
      if (!aspect && method === 'PUT') {
        const name = String(b.name);
        if ([...this.providers.values()].some((p) => p.name === name && p.uuid !== rp.uuid)) return [409, fixtureBody('07-create-duplicate-name-409')];
        rp.name = name;
        if ('parent_provider_uuid' in b) rp.parent = (b.parent_provider_uuid as string | null) ?? null;
        return [200, { uuid: rp.uuid, name: rp.name, generation: rp.generation, parent_provider_uuid: rp.parent }];
      }
      if (aspect === 'allocations') {
        const allocations: Record<string, { resources: Record<string, number> }> = {};
        for (const [c, v] of this.consumers) if (v.allocations[rp.uuid]) allocations[c] = { resources: v.allocations[rp.uuid] ?? {} };
        return [200, { resource_provider_generation: rp.generation, allocations }];
      }
      if (aspect === 'inventories') {
        if (method === 'GET') return [200, { resource_provider_generation: rp.generation, inventories: rp.inventories }];
        const s = this.stale(rp, b.resource_provider_generation);
        if (s) return s;
        const inv = b.inventories as Inv;
        for (const rc of Object.keys(inv)) if (!STANDARD_CLASSES.has(rc) && !this.classes.has(rc)) return [400, fixtureBody('15-put-inventory-bad-rc-400')];
        const used = Object.keys(this.usage(rp.uuid)).filter((rc) => !inv[rc]);
        if (used.length) return [409, fixtureBody('30-put-root-inventories-remove-inuse-409')];
        rp.inventories = inv;
        this.bump(rp);
        return [200, { resource_provider_generation: rp.generation, inventories: rp.inventories }];
      }
      if (aspect === 'traits' || aspect === 'aggregates') {
        if (method === 'GET') return [200, { resource_provider_generation: rp.generation, [aspect]: rp[aspect] }];
        const s = this.stale(rp, b.resource_provider_generation);
        if (s) return aspect === 'aggregates' ? [409, fixtureBody('19-put-root-aggregates-stale-409')] : s;
        const values = b[aspect] as string[];
        if (aspect === 'traits') {
          const bad = values.filter((t) => (/^CUSTOM_/.test(t) ? !this.customTraits.has(t) : this.unknownStandardTraits.has(t)));
          if (bad.length) return [400, { errors: [{ status: 400, code: 'placement.undefined_code', detail: `No such trait(s): ${bad.join(', ')}` }] }];
        }
        const changed = [...values].sort().join() !== [...rp[aspect]].sort().join();
        rp[aspect] = [...values];
        if (changed) this.bump(rp);
        return [200, { resource_provider_generation: rp.generation, [aspect]: rp[aspect] }];
      }
    }
    if (seg[0] === 'traits' && seg.length === 1) {
      const names = (params.get('name') ?? '').replace(/^in:/, '').split(',').filter(Boolean);
      return [200, { traits: names.filter((t) => (/^CUSTOM_/.test(t) ? this.customTraits.has(t) : !this.unknownStandardTraits.has(t))) }];
    }
    if (seg[0] === 'traits' && seg[1] && method === 'PUT') {
      const existed = this.customTraits.has(seg[1]);
      this.customTraits.add(seg[1]);
      return [existed ? 204 : 201, ''];
    }
    if (seg[0] === 'resource_classes' && seg[1] && method === 'PUT') {
      const existed = this.classes.has(seg[1]);
      this.classes.add(seg[1]);
      return [existed ? 204 : 201, ''];
    }
    return this.allocationRoutes(method, seg, b);
  }

  private allocationRoutes(method: string, seg: string[], b: Record<string, unknown>): nock.ReplyFnResult {
    // Placement writes several consumers in one transaction: check every generation first.
    const check = (consumer: string, w: Record<string, unknown>): nock.ReplyFnResult | undefined => {
      const cur = this.consumers.get(consumer);
      const given = w.consumer_generation;
      if ((cur ? cur.generation : null) !== given) {
        return [409, error('23-put-allocations-stale-generation-409', `consumer generation conflict - expected ${String(given)} but got ${cur ? cur.generation : 'None'}`)];
      }
      return undefined;
    };
    // As Placement moves provider generations on allocation writes: the providers the consumer now
    // uses (or, when a PUT or POST empties it, those it used); a provider the consumer merely left,
    // and every provider on DELETE /allocations, keeps its generation.
    const write = (consumer: string, w: Record<string, unknown>, bumps = true): nock.ReplyFnResult | undefined => {
      const conflict = check(consumer, w);
      if (conflict) return conflict;
      const cur = this.consumers.get(consumer);
      const allocs: Record<string, Record<string, number>> = {};
      for (const [rp, v] of Object.entries(w.allocations as Record<string, { resources: Record<string, number> }>)) allocs[rp] = v.resources;
      const moved = !bumps ? [] : Object.keys(allocs).length > 0 ? Object.keys(allocs) : Object.keys(cur?.allocations ?? {});
      for (const rp of moved) {
        const p = this.providers.get(rp);
        if (p) this.bump(p);
      }
      if (Object.keys(allocs).length === 0) this.consumers.delete(consumer);
      else this.consumers.set(consumer, { generation: (cur?.generation ?? 0) + 1, project_id: String(w.project_id), user_id: String(w.user_id), allocations: allocs });
      return undefined;
    };
    if (seg[0] === 'allocations' && seg[1]) {
      const c = this.consumers.get(seg[1]);
      if (method === 'GET') {
        if (!c) return [200, { allocations: {} }];
        const allocations = Object.fromEntries(Object.entries(c.allocations).map(([rp, r]) => [rp, { resources: r, generation: this.providers.get(rp)?.generation }]));
        return [200, { allocations, consumer_generation: c.generation, project_id: c.project_id, user_id: c.user_id }];
      }
      if (method === 'DELETE') {
        if (!c) return [404, { errors: [{ status: 404, detail: 'no allocations' }] }];
        return write(seg[1], { allocations: {}, consumer_generation: c.generation }, false) ?? [204, ''];
      }
      return write(seg[1], b) ?? [204, ''];
    }
    if (seg[0] === 'allocations' && method === 'POST') {
      for (const [c, w] of Object.entries(b)) {
        const r = check(c, w as Record<string, unknown>);
        if (r) return r;
      }
      for (const [c, w] of Object.entries(b)) {
        const r = write(c, w as Record<string, unknown>);
        if (r) return r;
      }
      return [204, ''];
    }
    if (seg[0] === 'reshaper' && method === 'POST') {
      const inv = b.inventories as Record<string, { resource_provider_generation: number; inventories: Inv }>;
      for (const [u, v] of Object.entries(inv)) {
        const p = this.providers.get(u);
        if (!p || p.generation !== v.resource_provider_generation) return [409, fixtureBody('33-post-reshaper-stale-provider-generation-409')];
      }
      const unknown = Object.values(inv).flatMap((v) => Object.keys(v.inventories)).find((rc) => !STANDARD_CLASSES.has(rc) && !this.classes.has(rc));
      if (unknown) return [400, { errors: [{ status: 400, code: 'placement.undefined_code', detail: `malformed reshaper data: No such resource class ${unknown}.` }] }];
      const allocs = Object.entries(b.allocations as Record<string, Record<string, unknown>>);
      if (allocs.some(([c, w]) => check(c, w))) return [409, fixtureBody('34-post-reshaper-stale-consumer-generation-409')];
      // As Placement's reshaper moves generations: an interim inventory (skipped for an empty
      // list), then the allocations, then the final inventory, each a step.
      for (const [u, v] of Object.entries(inv)) {
        const p = this.providers.get(u);
        if (p && Object.keys(v.inventories).length > 0) this.bump(p);
      }
      for (const [c, w] of allocs) write(c, w);
      for (const [u, v] of Object.entries(inv)) {
        const p = this.providers.get(u);
        if (p) {
          p.inventories = v.inventories;
          this.bump(p);
        }
      }
      return [204, ''];
    }
    return [404, { errors: [{ status: 404, detail: `mock has no route ${method} /${seg.join('/')}` }] }];
  }
}
