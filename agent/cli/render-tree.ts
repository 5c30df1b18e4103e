/**
 * How `compute-agent discover` shows a provider tree: Placement's JSON (`--json`) or a readable
 * tree, plus the host facts behind it (`--facts`).
 *
 * It is: formatting only. Inventory records are shown as Placement would store them if written
 * now to an empty Placement: fields a driver leaves out get Placement's defaults, and an unset
 * allocation ratio shows the `initial_*_allocation_ratio` the tracker would write (marked
 * "initial" in the readable form).
 */
import type { AgentConfig } from '../../config/schema';
import type { ProviderTree } from '../../model/provider-tree';
import { resolveInventory, type FullInventoryRecord, type ProviderSnapshot } from '../../model/provider-types';
import type { HostFacts } from '../../virt-drivers/host/discover';

/** One provider in `discover --json`, with Placement's field names. */
export interface ProviderJson {
  readonly uuid: string;
  readonly name: string;
  readonly parent_provider_uuid: string | null;
  readonly inventories: Readonly<Record<string, FullInventoryRecord>>;
  readonly traits: readonly string[];
  readonly aggregates: readonly string[];
}

/** The ratio the tracker writes for a new inventory whose record has none. */
export function initialRatio(config: AgentConfig, rc: string): number {
  const d = config.DEFAULT;
  if (rc === 'VCPU') return d.initial_cpu_allocation_ratio;
  if (rc === 'MEMORY_MB') return d.initial_ram_allocation_ratio;
  if (rc === 'DISK_GB') return d.initial_disk_allocation_ratio;
  return 1.0;
}

function providerJson(p: ProviderSnapshot, config: AgentConfig): ProviderJson {
  const inventories: Record<string, FullInventoryRecord> = {};
  for (const rc of Object.keys(p.inventories).sort()) {
    const rec = p.inventories[rc];
    if (!rec) continue;
    const r = resolveInventory(rec, undefined, initialRatio(config, rc));
    inventories[rc] = {
      total: r.total,
      reserved: r.reserved,
      min_unit: r.min_unit,
      max_unit: r.max_unit,
      step_size: r.step_size,
      allocation_ratio: r.allocation_ratio,
    };
  }
  return {
    uuid: p.uuid,
    name: p.name,
    parent_provider_uuid: p.parent_provider_uuid,
    inventories,
    traits: [...p.traits],
    aggregates: [...p.aggregates],
  };
}

/** `{"providers": [...]}`, parents before children. */
export function treeJson(tree: ProviderTree, config: AgentConfig): { providers: ProviderJson[] } {
  return { providers: tree.snapshot().map((p) => providerJson(p, config)) };
}

/** The readable tree, one provider per block, children indented under their parent. */
export function treeText(tree: ProviderTree, config: AgentConfig): string[] {
  const snaps = tree.snapshot();
  const depth = new Map<string, number>();
  const lines: string[] = [];
  for (const p of snaps) {
    const d = p.parent_provider_uuid ? (depth.get(p.parent_provider_uuid) ?? 0) + 1 : 0;
    depth.set(p.uuid, d);
    const pad = '    '.repeat(d);
    lines.push(`${pad}${d > 0 ? '└─ ' : ''}${p.name}  (${p.uuid})`);
    const inner = `${pad}${d > 0 ? '   ' : ''}  `;
    const rcs = Object.keys(p.inventories).sort();
    if (rcs.length === 0) lines.push(`${inner}no inventory`);
    for (const rc of rcs) {
      const rec = p.inventories[rc];
      if (!rec) continue;
      const r = resolveInventory(rec, undefined, initialRatio(config, rc));
      const ratio = `${Number.isInteger(r.allocation_ratio) ? r.allocation_ratio.toFixed(1) : r.allocation_ratio}${rec.allocation_ratio === undefined ? ' (initial; Placement keeps its own)' : ''}`;
      lines.push(`${inner}${rc.padEnd(28)} total ${String(r.total).padStart(9)}  reserved ${String(r.reserved).padStart(6)}  ratio ${ratio}`);
    }
    if (p.traits.length > 0) lines.push(`${inner}traits: ${p.traits.join(', ')}`);
    if (p.aggregates.length > 0) lines.push(`${inner}aggregates: ${p.aggregates.join(', ')}`);
  }
  return lines;
}

/** What the facts say that the tree does not show: failed probes, devices without a provider. */
export function factNotes(facts: HostFacts | undefined, tree: ProviderTree, nodename: string): string[] {
  if (!facts) return [];
  const notes: string[] = [];
  for (const [name, outcome] of Object.entries(facts)) {
    if (outcome.status === 'failed') notes.push(`${name} probe failed: ${outcome.error.message}`);
    else if (outcome.status === 'absent') notes.push(`${name}: not present (${outcome.reason})`);
  }
  if (facts.nic.status === 'detected') {
    for (const nic of facts.nic.data) {
      if (tree.exists(`${nodename}:${nic.name}`)) continue;
      const why = nic.role !== 'port' ? `an SR-IOV ${nic.role}` : 'no VFs and no known link speed';
      notes.push(`interface ${nic.name}${nic.address ? ` (${nic.address}${nic.driver ? `, ${nic.driver}` : ''})` : ''}: no provider, ${why}`);
    }
  }
  if (facts.gpu.status === 'detected') {
    for (const gpu of facts.gpu.data) if (gpu.incomplete) notes.push(`GPU ${gpu.address}: ${gpu.incomplete}; left as Placement has it`);
  }
  return notes;
}
