/**
 * The compute manager's control-plane port: who is told about each step of a flow, and in what
 * form instances and migrations travel between compute hosts. Every flow (build, terminate, cold
 * migration, live migration) calls it at the same points whatever the deployment, so standalone
 * mode and nova mode share the flows:
 *
 * - standalone (`NotifierControlPlane`): each step is an oslo versioned notification at the
 *   priority the step's row in the transition table (`transitions.ts`) gives, or none where it
 *   gives none;
 * - nova (`agent/nova/control-plane.ts`): each step is the save nova-compute makes through
 *   nova-conductor (Instance, Migration, InstanceActionEvent, the scheduler fanout).
 */
import { randomUUID } from 'node:crypto';
import type { LiveMigrateData } from '../../virt-drivers/types';
import type { MigrationRecord, InstanceRecord, Flavor } from '../../model/instance';
import type { Notifier, RequestContext } from './ports';
import { payloadOf } from './payload';
import type { DecodedMigration } from './decode';
import { rowOf, stateAfter, type FlowStep } from './transitions';
import type { NetworkInfo, Vif } from '../../model/network';
import type { BlockDevice } from '../../model/block-device';
import { consoleAccessUrl } from './console-url';

/** What a volume step changed in a block device mapping (`ControlPlane.blockDevice`): nova's field names. */
export interface BlockDeviceChange {
  readonly volume_id?: string;
  readonly attachment_id?: string | null;
  readonly device_name?: string;
  /** nova's JSON string of the connection info (`{driver_volume_type, data, serial}`); null: disconnected. */
  readonly connection_info?: string | null;
}

/** What happened to an instance's network (`ControlPlane.network`). */
export type NetworkChange =
  | { readonly kind: 'allocated'; readonly info: NetworkInfo; readonly added: NetworkInfo }
  | { readonly kind: 'refreshed'; readonly info: NetworkInfo }
  /** One interface detached: `info` without it. */
  | { readonly kind: 'detached'; readonly info: NetworkInfo; readonly removed: Vif }
  | { readonly kind: 'released' };

/** What a console's token is for (nova's ConsoleAuthToken fields). */
export interface ConsoleAuthorization {
  readonly instanceUuid: string;
  /** nova's console type: `novnc`, `serial`. */
  readonly consoleType: string;
  /** Where the proxy connects. */
  readonly host: string;
  readonly port: number;
  /** The proxy's URL the token is added to. */
  readonly accessUrlBase: string;
}

export interface ControlPlane {
  /** The scheduler claimed before builds and moves: flows verify its claims instead of claiming. */
  readonly schedulerClaims: boolean;
  /**
   * A failed build leaves this host: the control plane takes the instance back (nova: its host is
   * cleared at `create.error`, so nova-api deletes it without asking this host), and the agent
   * drops its record. False: the record stays in ERROR until a delete.
   */
  readonly releasesFailedBuilds: boolean;
  /** A request arrived (raw arguments, before decoding): nova mode keeps the objects it must save. */
  received(args: Readonly<Record<string, unknown>>): void;
  /** `rec` (its new state) reached `step`. Never throws: a failed report is logged. */
  step(rec: InstanceRecord, step: FlowStep, ctx: RequestContext, fault?: string): Promise<void>;
  /** `terminate_instance` finished: the instance is gone from this host (`rec`: what was known). Never throws. */
  deleted(uuid: string, rec: InstanceRecord | undefined, ctx: RequestContext): Promise<void>;
  /**
   * A cast of `method` named `uuid`, an instance this host has no record of, and was not done: a
   * control plane that set a task state before casting must not keep it (nova mode: ERROR with a
   * fault saying so). Never throws.
   */
  lost(uuid: string, method: string, ctx: RequestContext): Promise<void>;
  /**
   * The instance's network changed: ports bound to it (`allocated`, with the VIFs new to it), read
   * again (`refreshed`), one detached (`detached`), or all given back (`released`). nova mode writes the VirtualInterface rows and
   * the info cache nova-api shows the server's addresses from. Never throws.
   */
  network(uuid: string, change: NetworkChange, ctx: RequestContext): Promise<void>;
  /**
   * A volume step changed the block device mapping nova keeps as row `bdmId` of instance `uuid`
   * (the volume a build created, its attachment, its connection info). nova mode saves the row
   * through the conductor (`BlockDeviceMapping.save`), as nova-compute does. Never throws.
   */
  blockDevice(uuid: string, bdmId: number, change: BlockDeviceChange, ctx: RequestContext): Promise<void>;
  /**
   * A new block device mapping of instance `uuid` (`reserve_block_device_name`): nova mode creates
   * nova's row through the conductor and answers its primitive; standalone answers the fields.
   * @throws what the conductor threw (the reservation fails: nothing is kept)
   */
  createBlockDevice(uuid: string, fields: Readonly<Record<string, unknown>>, ctx: RequestContext): Promise<{ readonly id: number | null; readonly reply: unknown }>;
  /**
   * Every block device mapping the control plane keeps for instance `uuid` (nova-compute's
   * `BlockDeviceMappingList.get_by_instance_uuid`, read by an unshelve: volumes attached while the
   * server was offloaded are only there). Standalone keeps none: [].
   * @throws what the conductor threw, Error naming the field of a mapping that cannot be read
   */
  blockDevicesOf(uuid: string, ctx: RequestContext): Promise<readonly BlockDevice[]>;
  /** Block device mapping row `bdmId` of instance `uuid` is gone (a detach, a failed attach). Never throws. */
  destroyBlockDevice(uuid: string, bdmId: number, ctx: RequestContext): Promise<void>;
  /**
   * A token for a console of an instance, and the URL the user opens with it. nova mode:
   * `ConsoleAuthToken.authorize` through the conductor, which keeps the token's hash in nova's
   * database for `ttlS` seconds, where nova's proxies check it. Standalone: a fresh token that
   * nothing checks (there is no nova proxy).
   * @throws what the conductor threw (no token: the caller gets no console)
   */
  authorizeConsole(console: ConsoleAuthorization, ttlS: number, ctx: RequestContext): Promise<{ readonly token: string; readonly accessUrl: string }>;
  /** The instance argument of a message to another compute host. */
  instanceArg(rec: InstanceRecord, flavor?: Flavor): Record<string, unknown>;
  /** The instance argument for an instance this host no longer has a record of. */
  instanceRef(uuid: string): Record<string, unknown>;
  /** The migration argument of a message to another compute host. */
  migrationArg(m: MigrationRecord | DecodedMigration): Record<string, unknown>;
  /** check_can_live_migrate_destination's answer: `data` as the control plane reads it (nova: a LibvirtLiveMigrateData with the ports' `vifs`). */
  liveMigrateData(rec: InstanceRecord, data: LiveMigrateData): unknown;
}

/** The instance as sent between hosts in standalone mode (plain JSON, the form our decoder accepts). */
export function plainInstanceArg(rec: InstanceRecord, flavor: Flavor = rec.flavor): Record<string, unknown> {
  return { uuid: rec.uuid, display_name: rec.name, project_id: rec.project_id, user_id: rec.user_id, flavor, vm_state: rec.vm_state, ...(rec.image_ref ? { image_ref: rec.image_ref } : {}) };
}

export function plainMigrationArg(m: MigrationRecord | DecodedMigration): Record<string, unknown> {
  return { uuid: m.uuid, migration_type: 'type' in m ? m.type : m.migration_type, source_compute: m.source_compute, dest_compute: m.dest_compute };
}

/** Standalone: steps are versioned notifications; hosts exchange plain JSON. */
export class NotifierControlPlane implements ControlPlane {
  readonly schedulerClaims: boolean;
  readonly releasesFailedBuilds = false;

  constructor(
    private readonly notifier: Notifier,
    private readonly host: string,
    private readonly onError: (event: string, uuid: string, reason: string) => void,
    opts: { schedulerClaims?: boolean } = {},
  ) {
    this.schedulerClaims = opts.schedulerClaims ?? false;
  }

  received(): void {}

  async step(rec: InstanceRecord, step: FlowStep, ctx: RequestContext, fault?: string): Promise<void> {
    const priority = rowOf(step).notify;
    if (priority === 'none') return;
    try {
      await this.notifier.notify({ event_type: `instance.${step}`, priority, payload: payloadOf(rec, this.host, fault) }, ctx);
    } catch (e) {
      this.onError(step, rec.uuid, (e as Error).message);
    }
  }

  async deleted(_uuid: string, rec: InstanceRecord | undefined, ctx: RequestContext): Promise<void> {
    if (rec) await this.step({ ...rec, ...stateAfter('delete.end', rec) }, 'delete.end', ctx);
  }

  /** Standalone peers read addresses from Neutron itself; there is no info cache to keep. */
  network(): Promise<void> {
    return Promise.resolve();
  }

  /** Standalone peers keep no block device rows. */
  blockDevice(): Promise<void> {
    return Promise.resolve();
  }

  createBlockDevice(_uuid: string, fields: Readonly<Record<string, unknown>>): Promise<{ id: number | null; reply: unknown }> {
    return Promise.resolve({ id: null, reply: { ...fields } });
  }

  destroyBlockDevice(): Promise<void> {
    return Promise.resolve();
  }

  blockDevicesOf(): Promise<readonly BlockDevice[]> {
    return Promise.resolve([]);
  }

  authorizeConsole(console: ConsoleAuthorization): Promise<{ token: string; accessUrl: string }> {
    const token = randomUUID();
    return Promise.resolve({ token, accessUrl: consoleAccessUrl(console.consoleType, console.accessUrlBase, token) });
  }

  /** Standalone casters set no task state; the RPC server logs the cast's failure. */
  lost(): Promise<void> {
    return Promise.resolve();
  }

  instanceArg(rec: InstanceRecord, flavor?: Flavor): Record<string, unknown> {
    return plainInstanceArg(rec, flavor);
  }

  instanceRef(uuid: string): Record<string, unknown> {
    return { uuid };
  }

  migrationArg(m: MigrationRecord | DecodedMigration): Record<string, unknown> {
    return plainMigrationArg(m);
  }

  /** Standalone hosts hand the driver's data on as it is. */
  liveMigrateData(_rec: InstanceRecord, data: LiveMigrateData): unknown {
    return data;
  }
}
