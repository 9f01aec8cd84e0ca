// Names of physical snapshot tables: snap.<relation>__s<snapshot_id>.
import { ident } from '../db/pool.ts';

export const snapshotTableName = (relation: string, snapshotId: number) => `${relation}__s${snapshotId}`;
export const qualifiedSnapshotTable = (relation: string, snapshotId: number) => `snap.${ident(snapshotTableName(relation, snapshotId))}`;
