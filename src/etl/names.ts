// Names of physical snapshot tables: snap.<relation>__s<snapshot_id>.
import { ident } from '../db/pool.ts';

export const snapshotTableName = (relation: string, snapshotId: number) => `${relation}__s${snapshotId}`;
export const qualifiedSnapshotTable = (relation: string, snapshotId: number) => `snap.${ident(snapshotTableName(relation, snapshotId))}`;

/**
 * A SICAR snapshot's properties whose rows the load rejected (a polygon missing, unrepairable
 * or outside Brazil), with their status: still in the registry, not in car_imovel. A snapshot
 * table beside the relations (dropped with the snapshot), read by the change events as part of
 * the snapshot's registry, so that a rejected row is not announced as a property gone from it.
 */
export const REJECTED_PROPERTIES = 'car_imovel_rejeitados';
