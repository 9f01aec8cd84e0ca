// Whether a report's snapshot is served, and what its reader can do about it. The report is
// read the morning after a load: a blocked snapshot or one kept beside the current one (a
// backfill, a publish that gave up on locks) needs a decision, and the gate's verdict alone
// ("passed", "blocked") says neither whether readers see it nor which command changes that.
import type { SnapshotRow, SnapshotStatus } from './catalog.ts';
import { unforceable, type QualityReport } from './quality.ts';

export interface Publication {
  /** The snapshot's catalogue status when the report was asked for; `current` when it is the one served. */
  status: SnapshotStatus | 'current';
  /** The snapshot served for the dataset (and state) then; null when none is. */
  current_snapshot_id: number | null;
  /** One sentence: served or not, and the command that changes it. */
  says: string;
}

const servedInstead = (id: number | null) => (id ? `snapshot ${id} is current, untouched` : 'none of this dataset is current yet');

/** What to do about a snapshot the gate blocked: `currentId` is the snapshot served instead. */
export function blockedSays(r: QualityReport, currentId: number | null): string {
  const rules = r.gate.failures.map((f) => f.rule).join(', ');
  const hard = unforceable(r.gate.failures);
  if (hard.length) {
    return `Not served (${servedInstead(currentId)}): ${hard.map((f) => f.rule).join(', ')} cannot be overridden, not even by --force, since no row could be loaded; fix the source and run again.`;
  }
  return `Not served (${servedInstead(currentId)}): the quality gate blocked it (${rules}). Check the failed rules and the rows below: if the source is right, agro publish ${r.snapshot_id} --force publishes it as it is; otherwise fix the source and run again.`;
}

/**
 * The snapshot's standing in the catalogue now, in the report's words. `answering`: the snapshot
 * as_of reads of its date answer from (catalog.answeringOn): within a date the current one comes
 * first, so a snapshot loaded beside a current one of the same date answers nothing.
 */
export function publicationOf(r: QualityReport, snap: SnapshotRow, current: SnapshotRow | null, answering: number | null): Publication {
  const cur = current?.snapshot_id ?? null;
  const id = snap.snapshot_id;
  const other = cur && cur !== id ? ` (snapshot ${cur}, as of ${current!.as_of}, is)` : '';
  if (cur === id) return { status: 'current', current_snapshot_id: cur, says: `Served: snapshot ${id} is current${snap.forced ? ', published past the quality gate with --force' : ''}.` };
  const says: Record<SnapshotStatus, string> = {
    blocked: blockedSays(r, cur),
    loaded: `Loaded, not current${other}: as_of reads of ${snap.as_of} answer from ${answering === id ? 'it' : answering ? `snapshot ${answering}` : 'none'}; agro publish ${id} makes it current.`,
    published: `Published, not current${other}.`,
    superseded: `No longer current: published, then replaced${other}.`,
    rolled_back: `Rolled back by an operator${other}: agro publish ${id} makes it current again.`,
    dropped: `Not served: its tables were dropped by retention, only this report remains${other}.`,
    failed: `Not served: its run failed after the quality stage${other}.`,
    loading: `Not served yet: its run is still loading${other}.`,
  };
  return { status: snap.status, current_snapshot_id: cur, says: says[snap.status] };
}
