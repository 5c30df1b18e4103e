/**
 * The instance methods the agent serves, one row each (`method-table.ts`): nova's compute RPC
 * 6.x methods with nova's argument names (nova `compute/rpcapi.py`), and the agent's own under
 * `compute_agent` 1.0. A row names the arguments the agent reads with their decoders (`decode.ts`)
 * and accepts the rest of nova's arguments unread; the handler calls one flow.
 *
 * Required are the arguments the flow cannot do without; nova's rpcapi sends every other one too,
 * and the agent's peers in standalone mode, its CLI and tests may leave them out.
 *
 * nova's other instance methods are answered at once with a clear failure (`unsupported.ts`).
 *
 * Every request is ordered by its instance, and the control plane sees the arguments as sent
 * before the flow runs (nova mode saves back the objects nova sent).
 */
import type { ArgsOf, ArgsSpec } from '../rpc/endpoint/args';
import { ArgumentError, computeArgs as A, unread, type UnplacedMigration, type DecodedMigration } from './decode';
import { attachRequest, interfaceArgs as I, networkArgs as N } from './decode-network';
import { volumeArgs as V } from './decode-volume';
import { setAdminPassword } from './admin-password';
import { getDiagnostics, getInstanceDiagnostics } from './diagnostics';
import type { ComputeManager } from './manager';
import { instanceKey, method, NOVA_COMPUTE_API, type ComputeMethod, type MethodVersions } from './method-table';
import type { RequestContext } from './ports';
import { AGENT_NAMESPACE } from './resize';
import { rebuild } from './rebuild';
import { unsupportedMethods } from './unsupported';

const AGENT_API = { namespace: AGENT_NAMESPACE, versions: { min: '1.0' } } as const;

interface RowOptions {
  readonly api?: { readonly namespace: string | null; readonly versions: MethodVersions };
  readonly journaled?: boolean;
  /** Not ordered behind the instance's other requests (a read that must answer while a long operation runs). */
  readonly unordered?: boolean;
}

/** A migration sent to its destination before the scheduler picked it: the destination is this host. */
function placedHere(mig: UnplacedMigration, host: string): DecodedMigration {
  return { ...mig, dest_compute: mig.dest_compute ?? host };
}

export function computeMethods(m: ComputeManager): ComputeMethod[] {
  const { resize, live, host } = m;
  const row = <S extends ArgsSpec>(name: string, args: S, handle: (a: ArgsOf<S>, ctx: RequestContext) => Promise<unknown>, opts: RowOptions = {}): ComputeMethod<S> =>
    method({
      name,
      ...(opts.api ?? NOVA_COMPUTE_API),
      journaled: opts.journaled ?? true,
      args,
      ...(opts.unordered ? {} : { key: instanceKey }),
      handle: (a, call) => {
        m.controlPlane.received(call.sent);
        return handle(a, call.context);
      },
    });
  const agent: RowOptions = { api: AGENT_API };
  const read: RowOptions = { journaled: false };
  const console: RowOptions = { journaled: false, unordered: true };

  return [
    row(
      'build_and_run_instance',
      {
        instance: A.instance,
        request_spec: A.requestSpec,
        host_list: A.selections,
        requested_networks: N.requestedNetworks,
        security_groups: N.securityGroups,
        block_device_mapping: V.blockDeviceMapping,
        image: A.imageMeta,
        ...unread('filter_properties', 'admin_password', 'injected_files', 'node', 'limits', 'accel_uuids'),
      },
      (a, ctx) => {
        const flavor = a.instance.flavor ?? a.request_spec.flavor;
        if (!flavor) throw new ArgumentError('invalid argument instance: instance.flavor: missing (and no request_spec.flavor)');
        // A scheduler claimed when the Selection for this host carries an allocation request.
        const claimed = a.host_list.some((s) => s.service_host === host && !!s.allocation_request);
        const mapping = a.request_spec.providerMapping;
        const blockDevices = a.block_device_mapping ?? [];
        // nova-compute builds from the `image` argument's properties; the Instance's system metadata has the same.
        const imageMeta = a.image ?? a.instance.image_meta;
        const instance = imageMeta ? { ...a.instance, image_meta: imageMeta } : a.instance;
        return m.build(instance, flavor, { claimed, networks: a.requested_networks, securityGroups: a.security_groups, ...(mapping ? { providerMapping: mapping } : {}), ...(blockDevices.length ? { blockDevices } : {}) }, ctx);
      },
    ),
    row('terminate_instance', { instance: A.instanceRef, ...unread('bdms') }, (a, ctx) => m.terminate(a.instance.uuid, ctx)),
    row('soft_delete_instance', { instance: A.instanceRef }, (a, ctx) => m.softDeletes.softDelete(a.instance.uuid, ctx)),
    row('restore_instance', { instance: A.instanceRef }, (a, ctx) => m.softDeletes.restore(a.instance.uuid, ctx)),
    row(
      'prep_resize',
      { instance: A.instance, flavor: A.flavor, migration: A.unplacedMigration, ...unread('image', 'request_spec', 'filter_properties', 'node', 'clean_shutdown', 'host_list') },
      (a, ctx) => resize.prepResize(a.instance, a.flavor, placedHere(a.migration, host), ctx, a.instance.vm_state),
    ),
    row('resize_instance', { instance: A.instanceRef, migration: A.migration, flavor: A.flavor, ...unread('image', 'clean_shutdown', 'request_spec') }, (a, ctx) =>
      resize.resizeInstance(a.instance.uuid, a.migration, a.flavor, ctx),
    ),
    row('finish_resize', { instance: N.instanceWithPorts, migration: A.migration, disk_info: A.optionalString, bdms: V.blockDeviceMapping, ...unread('image', 'request_spec') }, (a, ctx) =>
      resize.finishResize(a.instance, a.migration, a.disk_info ?? '', ctx, a.bdms),
    ),
    row('confirm_resize', { instance: A.instanceRef, migration: A.migration }, (a, ctx) => resize.confirmResize(a.instance.uuid, a.migration, ctx)),
    row('revert_resize', { instance: A.instanceRef, migration: A.migration, ...unread('request_spec') }, (a, ctx) => resize.revertResize(a.instance.uuid, a.migration, ctx)),
    row('finish_revert_resize', { instance: A.instanceRef, migration: A.migration, bdms: V.blockDeviceMapping, ...unread('request_spec') }, (a, ctx) =>
      resize.finishRevertResize(a.instance.uuid, a.migration, ctx, a.bdms),
    ),
    row('check_can_live_migrate_destination', { instance: A.instance, migration: A.unplacedMigration, ...unread('block_migration', 'disk_over_commit', 'limits') }, (a, ctx) =>
      live.checkDestination(a.instance, placedHere(a.migration, host), ctx),
    ),
    row('check_can_live_migrate_source', { instance: A.instanceRef, dest_check_data: A.migrateData }, (a) => live.checkSource(a.instance.uuid, a.dest_check_data), read),
    row('live_migration', { instance: A.instanceRef, dest: A.optionalString, migration: A.unplacedMigration, migrate_data: A.migrateData, ...unread('block_migration') }, (a, ctx) => {
      const dest = a.dest ?? a.migration.dest_compute;
      if (!dest) throw new ArgumentError('invalid argument migration: migration.dest_compute: missing (and no dest)');
      return live.liveMigration(a.instance.uuid, { ...a.migration, dest_compute: dest }, a.migrate_data, ctx);
    }),
    row('pre_live_migration', { instance: N.instanceWithPorts, migrate_data: A.migrateData, bdms: V.blockDeviceMapping, ...unread('disk', 'block_migration') }, (a, ctx) =>
      live.preLiveMigration(a.instance, a.migrate_data, ctx, a.bdms),
    ),
    row('post_live_migration_at_destination', { instance: A.instanceRef, ...unread('block_migration') }, (a, ctx) => live.postAtDestination(a.instance.uuid, ctx)),
    row('rollback_live_migration_at_destination', { instance: A.instanceRef, migrate_data: A.migrateData, ...unread('destroy_disks') }, (a, ctx) =>
      live.rollbackAtDestination(a.instance.uuid, a.migrate_data, ctx),
    ),
    row('drop_move_claim_at_destination', { instance: A.instanceRef, ...unread('migration') }, (a) => resize.dropMoveClaim(a.instance.uuid)),
    row('stop_instance', { instance: A.instanceRef, clean_shutdown: A.cleanShutdown }, (a, ctx) => m.power.stop(a.instance.uuid, a.clean_shutdown !== false, ctx)),
    // A SHELVED server still on this host is unshelved by starting it (nova's conductor casts start_instance).
    row('start_instance', { instance: A.instanceRef }, (a, ctx) => (m.record(a.instance.uuid)?.vm_state === 'shelved' ? m.shelving.startShelved(a.instance.uuid, ctx) : m.power.start(a.instance.uuid, ctx))),
    row('pause_instance', { instance: A.instanceRef }, (a, ctx) => m.power.pause(a.instance.uuid, ctx)),
    row('unpause_instance', { instance: A.instanceRef }, (a, ctx) => m.power.unpause(a.instance.uuid, ctx)),
    row('suspend_instance', { instance: A.instanceRef }, (a, ctx) => m.power.suspend(a.instance.uuid, ctx)),
    row('resume_instance', { instance: A.instanceRef }, (a, ctx) => m.power.resume(a.instance.uuid, ctx)),
    row('trigger_crash_dump', { instance: A.instanceRef }, (a, ctx) => m.power.crashDump(a.instance.uuid, ctx)),
    // A call with a password: never journaled (the password stays off the disk; the caller does not outlive a restart).
    // Around a volume-backed server's snapshot (nova's API calls the first, casts the second).
    // The freeze is never journaled: replayed after a restart, it would freeze a guest nobody thaws.
    row('quiesce_instance', { instance: A.instanceRef }, (a) => m.quiescing.quiesce(a.instance.uuid), read),
    row('unquiesce_instance', { instance: A.instanceRef, mapping: A.quiesceMapping }, (a, ctx) => m.quiescing.unquiesce(a.instance.uuid, a.mapping, ctx)),
    row('set_admin_password', { instance: A.instanceRef, new_pass: A.password }, (a, ctx) => setAdminPassword(m.context, a.instance.uuid, a.new_pass, ctx), read),
    row('snapshot_instance', { instance: A.instanceRef, image_id: A.imageId }, (a, ctx) => m.snapshots.snapshot(a.instance.uuid, a.image_id, ctx)),
    row('backup_instance', { instance: A.instanceRef, image_id: A.imageId, backup_type: A.backupType, rotation: A.rotation }, (a, ctx) =>
      m.snapshots.backup(a.instance.uuid, a.image_id, { type: a.backup_type, rotation: a.rotation }, ctx),
    ),
    row('shelve_instance', { instance: A.instanceRef, image_id: A.imageId, clean_shutdown: A.cleanShutdown, ...unread('accel_uuids') }, (a, ctx) =>
      m.shelving.shelve(a.instance.uuid, a.image_id, a.clean_shutdown !== false, ctx),
    ),
    row('shelve_offload_instance', { instance: A.instanceRef, ...unread('clean_shutdown', 'accel_uuids') }, (a, ctx) => m.shelving.shelveOffload(a.instance.uuid, ctx)),
    row('unshelve_instance', { instance: N.arrivingWithPorts, image: A.shelvedImage, ...unread('filter_properties', 'node', 'request_spec', 'accel_uuids') }, (a, ctx) => {
      const flavor = a.instance.flavor;
      if (!flavor) throw new ArgumentError('invalid argument instance: instance.flavor: missing');
      const { ports, ...instance } = a.instance;
      return m.shelving.unshelve({ instance, flavor, imageId: a.image, portIds: ports.port_ids, preservedPortIds: ports.preserved_port_ids }, ctx);
    }),
    row('rescue_instance', { instance: A.instanceRef, rescue_image_ref: A.optionalString, clean_shutdown: A.cleanShutdown, ...unread('rescue_password') }, (a, ctx) =>
      m.rescues.rescue(a.instance.uuid, a.rescue_image_ref, a.clean_shutdown !== false, ctx),
    ),
    row('unrescue_instance', { instance: A.instanceRef }, (a, ctx) => m.rescues.unrescue(a.instance.uuid, ctx)),
    row('reboot_instance', { instance: A.instanceRef, reboot_type: A.rebootType, ...unread('block_device_info') }, (a, ctx) => m.power.reboot(a.instance.uuid, a.reboot_type, ctx)),
    row(
      'rebuild_instance',
      {
        instance: A.instanceRef,
        image_ref: A.optionalString,
        recreate: A.recreate,
        ...unread('new_pass', 'injected_files', 'orig_image_ref', 'orig_sys_metadata', 'bdms', 'on_shared_storage', 'preserve_ephemeral', 'migration', 'scheduled_node', 'limits', 'request_spec', 'accel_uuids', 'reimage_boot_volume', 'target_state'),
      },
      (a, ctx) => rebuild(m.context, a.instance.uuid, { imageRef: a.image_ref, recreate: a.recreate === true }, ctx),
    ),
    row('attach_interface', { instance: I.instance, network_id: I.optionalId, port_id: I.optionalId, requested_ip: I.requestedIp, tag: I.tag }, (a, ctx) =>
      m.interfaces.attach(a.instance, attachRequest(a), ctx),
    ),
    row('detach_interface', { instance: A.instanceRef, port_id: I.portId }, (a, ctx) => m.interfaces.detach(a.instance.uuid, a.port_id, ctx)),
    row(
      'reserve_block_device_name',
      { instance: A.instanceRef, volume_id: V.volumeId, device: V.optionalString, disk_bus: V.optionalString, device_type: V.optionalString, tag: V.optionalString, multiattach: V.multiattach },
      (a, ctx) => m.volumeAttach.reserve(a.instance.uuid, { volume_id: a.volume_id, disk_bus: a.disk_bus, device_type: a.device_type, tag: a.tag, multiattach: a.multiattach }, ctx),
    ),
    row('attach_volume', { instance: A.instanceRef, bdm: V.bdm }, (a, ctx) => m.volumeAttach.attach(a.instance.uuid, a.bdm, ctx)),
    row('detach_volume', { instance: A.instanceRef, volume_id: V.volumeId, attachment_id: V.attachmentId }, (a, ctx) => m.volumeAttach.detach(a.instance.uuid, a.volume_id, a.attachment_id, ctx)),
    row('swap_volume', { instance: A.instanceRef, old_volume_id: V.volumeId, new_volume_id: V.volumeId, new_attachment_id: V.newAttachmentId }, (a, ctx) =>
      m.volumeSwap.swap(a.instance.uuid, { old_volume_id: a.old_volume_id, new_volume_id: a.new_volume_id, new_attachment_id: a.new_attachment_id }, ctx),
    ),
    row('remove_volume_connection', { instance: A.instanceRef, volume_id: V.volumeId, delete_attachment: V.deleteAttachment }, (a, ctx) =>
      m.volumeSwap.removeConnection(a.instance.uuid, a.volume_id, a.delete_attachment, ctx),
    ),
    // Asked by nova-api (a user's console URL) and by nova's proxies (before they connect), as
    // nova-compute answers them: at once, not behind the instance's other requests (a proxy's call
    // times out while a migration runs), never journaled (the caller's wait does not outlive a restart).
    row('get_vnc_console', { instance: A.instanceRef, console_type: A.consoleType }, (a, ctx) => m.consoles.vnc(a.instance.uuid, a.console_type, ctx), console),
    row('get_serial_console', { instance: A.instanceRef, console_type: A.consoleType }, (a, ctx) => m.consoles.serial(a.instance.uuid, a.console_type, ctx), console),
    row('validate_console_port', { instance: A.instanceRef, port: A.consolePort, console_type: A.consoleType }, (a) => m.consoles.validatePort(a.instance.uuid, a.port, a.console_type), console),
    row('get_console_output', { instance: A.instanceRef, tail_length: A.tailLength }, (a) => m.power.consoleOutput(a.instance.uuid, a.tail_length), read),
    // nova-compute reads the network and hands it to the driver, whose inject_network_info does
    // nothing under libvirt (nor here): answered, the server left as it is.
    row('inject_network_info', { instance: A.instanceRef }, (a) => {
      m.context.require(a.instance.uuid);
      m.context.log.info({ instance: a.instance.uuid }, 'inject_network_info: nothing to inject (no guest agent); the server is left as it is');
      return Promise.resolve();
    }, read),
    row('get_diagnostics', { instance: A.instanceRef }, (a) => getDiagnostics(m.context, a.instance.uuid), read),
    row('get_instance_diagnostics', { instance: A.instanceRef }, (a) => getInstanceDiagnostics(m.context, a.instance.uuid), read),
    row('confirm_resize_at_destination', { instance: A.instanceRef, migration: A.migration }, (a) => resize.confirmAtDestination(a.instance.uuid, a.migration.uuid), agent),
    row('list_instances', {}, () => Promise.resolve(m.list()), { ...agent, ...read }),
    row('show_instance', { instance: A.instanceRef }, (a) => m.show(a.instance.uuid), { ...agent, ...read }),
    // Neutron's (and Cinder's) events relayed by nova-api: never ordered behind the instance's
    // lock, since a build holds it while it waits for them.
    method({
      name: 'external_instance_event',
      ...NOVA_COMPUTE_API,
      journaled: false,
      args: { events: N.externalEvents, ...unread('instances') },
      handle: (a, call) => {
        // Cinder's volume-extended (tag: the volume); the rest are Neutron's.
        for (const e of a.events) if (e.name === 'volume-extended' && e.tag) void m.volumeAttach.extended(e.instance_uuid, e.tag, call.context);
        m.networking.events(a.events.filter((e) => e.name !== 'volume-extended'), call.context);
        return Promise.resolve();
      },
    }),
    // A call with no instance in 6.x (nova sends only `data`): whether a file the caller made in
    // its instances directory is seen here, i.e. whether the two hosts share instance storage.
    method({
      name: 'check_instance_shared_storage',
      ...NOVA_COMPUTE_API,
      journaled: false,
      args: { data: A.sharedStorageProbe, ...unread('instance') },
      handle: (a) => m.context.driver.instanceFileVisible(a.data.filename),
    }),
    // Asked of the source while its live_migration runs and holds the instance's lock: never
    // ordered behind it, or they would wait for the migration they are about.
    method({
      name: 'live_migration_abort',
      ...NOVA_COMPUTE_API,
      journaled: false,
      args: { instance: A.instanceRef, ...unread('migration_id') },
      handle: (a) => m.liveControl.abort(a.instance.uuid),
    }),
    method({
      name: 'live_migration_force_complete',
      ...NOVA_COMPUTE_API,
      journaled: false,
      args: { instance: A.instanceRef },
      handle: (a) => m.liveControl.forceComplete(a.instance.uuid),
    }),
    ...unsupportedMethods(m.context, (sent) => m.controlPlane.received(sent)),
  ];
}
