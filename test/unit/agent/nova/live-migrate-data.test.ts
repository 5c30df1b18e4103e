// check_can_live_migrate_destination's answer in nova mode: the LibvirtLiveMigrateData nova's
// conductor binds the instance's ports from (its `vifs`), carrying only fields of that class.
import { libvirtLiveMigrateData } from '../../../../agent/nova/live-migrate-data';
import { EPOXY } from '../../../../agent/nova/releases';
import type { InstanceRecord } from '../../../../model/instance';
import type { Vif } from '../../../../model/network';

const vif = (id: string): Vif => ({ id, address: 'fa:16:3e:00:00:01', devname: `tap${id.slice(0, 11)}`, preserve_on_delete: false }) as unknown as Vif;

test('each port is a VIFMigrateData skeleton (port_id, source_vif as the VIF JSON), as nova-compute makes them', () => {
  const rec = { uuid: 'u-1', network_info: [vif('p-1'), vif('p-2')] } as unknown as InstanceRecord;
  const out = libvirtLiveMigrateData(rec, { filename: 'probe', block_migration: true }, EPOXY.objects);
  expect(out['nova_object.name']).toBe('LibvirtLiveMigrateData');
  expect(out['nova_object.version']).toBe('1.13');
  const vifs = (out['nova_object.data'] as { vifs: Array<Record<string, unknown>> }).vifs;
  expect(vifs.map((v) => v['nova_object.name'])).toEqual(['VIFMigrateData', 'VIFMigrateData']);
  expect(vifs.map((v) => (v['nova_object.data'] as Record<string, unknown>).port_id)).toEqual(['p-1', 'p-2']);
  expect(JSON.parse(String((vifs[0]?.['nova_object.data'] as Record<string, unknown>).source_vif))).toEqual(vif('p-1'));
});

test("only fields nova's class has, with its types, go: the driver's own stay in the destination's journal", () => {
  const out = libvirtLiveMigrateData({ uuid: 'u-1' } as unknown as InstanceRecord, { filename: 'probe', is_shared_instance_path: false, block_migration: 'yes', vm: '{}', dest_host: 'b' }, EPOXY.objects);
  expect(out['nova_object.data']).toEqual({ filename: 'probe', is_shared_instance_path: false, vifs: [] });
});
