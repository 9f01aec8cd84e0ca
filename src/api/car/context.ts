// Which snapshots a CAR answer reads: the published ones, the ones of an `as_of` date, or
// the ones a cursor pinned. A SICAR snapshot is per state; the other datasets are national.
//
// as_of=D: per dataset (and state), the readable snapshot with the greatest as-of date ≤ D
// (published, superseded, rolled back or loaded as a backfill, tables still kept).
// Overlap figures of a historical CAR snapshot come from the precomputed pairs: the pair
// with the layer snapshot chosen for D when it was computed, otherwise the answer says so
// in `avisos` and the overlap fields are null.
import type pg from 'pg';
import { AgroError } from '../../errors.ts';
import { asOfSnapshots, overlapPairs, type SnapshotInfo } from './sql.ts';

export const CAR_DATASET = 'sicar';
const RECEITA_DATASET = 'receita-cnpj';
export const LAYER_DATASETS = ['car-titulares', 'ibama-embargos', 'cnuc-ucs', 'funai-tis', 'incra-quilombos', 'zarc', 'icmbio-embargos'] as const;
export type LayerDataset = (typeof LAYER_DATASETS)[number];

export interface ReadContext {
  mode: 'current' | 'as_of' | 'pinned';
  asOf: string | null;
  /** SICAR snapshot per state. */
  sicar: Map<string, SnapshotInfo>;
  layers: Map<LayerDataset, SnapshotInfo>;
  /** Every readable snapshot of the datasets read (the dates a 404 or a note offers). */
  readable: SnapshotInfo[];
  /**
   * as_of: the snapshots of that date that retention dropped, by pin key (`sicar:UF`, a layer,
   * `receita-cnpj`): their dataset is not read at all, never answered from an older kept one.
   */
  dropped: Map<string, SnapshotInfo>;
  /** The Receita CNPJ month of the read (asked for with `receita`): the published one, or the one current on `asOf`; never pinned. */
  receita?: SnapshotInfo | null;
}

const pinKey = (s: SnapshotInfo) => (s.dataset === CAR_DATASET ? `${CAR_DATASET}:${s.uf}` : s.dataset);

export function pins(ctx: ReadContext): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of [...ctx.sicar.values(), ...ctx.layers.values()]) out[pinKey(s)] = s.snapshot_id;
  return out;
}

function emptyContext(mode: ReadContext['mode'], asOf: string | null, readable: SnapshotInfo[]): ReadContext {
  return { mode, asOf, sicar: new Map(), layers: new Map(), readable, dropped: new Map() };
}

/** Adds a snapshot unless its dataset (SICAR: its state) has one already (the first wins). */
function take(ctx: ReadContext, s: SnapshotInfo): void {
  if (s.dataset === CAR_DATASET) {
    if (s.uf && !ctx.sicar.has(s.uf)) ctx.sicar.set(s.uf, s);
  } else if ((LAYER_DATASETS as readonly string[]).includes(s.dataset) && !ctx.layers.has(s.dataset as LayerDataset)) ctx.layers.set(s.dataset as LayerDataset, s);
}

/**
 * The context of a current read from the published snapshots a statement returned along with
 * its rows (carCurrent): later statements read those snapshots by id, so one answer never
 * shows two snapshots of a layer when a publish lands between its statements.
 */
export function publishedContext(published: SnapshotInfo[]): ReadContext {
  const ctx = emptyContext('current', null, published);
  for (const s of published) take(ctx, s);
  return ctx;
}

/** The ids an answer reads by: the given SICAR snapshots and the context's snapshots of the given layers. */
export function readIds(ctx: ReadContext, sicarIds: number[], datasets: LayerDataset[]): number[] {
  return [...sicarIds, ...datasets.flatMap((d) => ctx.layers.get(d)?.snapshot_id ?? [])];
}

/**
 * Resolves the snapshots of a read in one statement; every later statement of the answer reads
 * them by id. `pinned` (from a cursor) wins over `asOf`.
 */
export async function resolveContext(db: pg.Pool, o: { asOf?: string | null; pinned?: Record<string, number> | null; receita?: boolean }): Promise<ReadContext> {
  const answering = await asOfSnapshots(db, [CAR_DATASET, ...LAYER_DATASETS, ...(o.receita ? [RECEITA_DATASET] : [])]);
  const all = answering.filter((s) => s.legivel);
  const ctx = emptyContext('current', o.asOf ?? null, all);
  if (o.receita) {
    const month = o.asOf ? answering.find((s) => s.dataset === RECEITA_DATASET && s.as_of <= o.asOf!) : all.find((s) => s.dataset === RECEITA_DATASET && s.is_current);
    if (month && !month.legivel) ctx.dropped.set(RECEITA_DATASET, month);
    ctx.receita = month?.legivel ? month : null;
  }
  if (o.pinned) {
    ctx.mode = 'pinned';
    const byId = new Map(all.map((s) => [s.snapshot_id, s]));
    for (const [k, id] of Object.entries(o.pinned)) {
      const s = byId.get(id);
      if (!s || pinKey(s) !== k) throw new AgroError('invalid_request', `cursor: snapshot ${id} it pages through is no longer kept; start again without cursor`);
      take(ctx, s);
    }
  } else if (o.asOf) {
    ctx.mode = 'as_of';
    for (const s of answering) if (s.as_of <= o.asOf) take(ctx, s); // newest as-of first
    // The snapshot of that date is gone: its dataset is not read (an older one is another date's data).
    for (const [uf, s] of ctx.sicar) if (!s.legivel) (ctx.sicar.delete(uf), ctx.dropped.set(pinKey(s), s));
    for (const [d, s] of ctx.layers) if (!s.legivel) (ctx.layers.delete(d), ctx.dropped.set(pinKey(s), s));
  } else {
    for (const s of all) if (s.is_current) take(ctx, s);
  }
  return ctx;
}

/** The as-of dates of the readable snapshots `keep` selects, oldest first. */
const readableDates = (ctx: ReadContext, keep: (s: SnapshotInfo) => boolean): string[] => [...new Set(ctx.readable.filter(keep).map((s) => s.as_of))].sort();

/** Dates a dataset (a SICAR state: `sicar:UF`) can be read at, oldest first. */
const keptDates = (ctx: ReadContext, key: string): string[] => readableDates(ctx, (s) => pinKey(s) === key);

/**
 * Why an as_of read has no snapshot of a dataset (a layer, `sicar:UF`, `receita-cnpj`): the one
 * of that date was dropped by retention (naming it and the dates kept), or none is that old.
 */
export function missingReason(ctx: ReadContext, key: string): string {
  const gone = ctx.dropped.get(key);
  if (!gone) return `no snapshot ${ctx.mode === 'as_of' ? `as of ${ctx.asOf} or earlier` : 'pinned'}`;
  const dates = keptDates(ctx, key);
  return `snapshot ${gone.snapshot_id} (as of ${gone.as_of}), the one for ${ctx.asOf}, was dropped by retention (kept as-of dates: ${dates.length ? dates.join(', ') : 'none'})`;
}

/** Dates a state can be read at (for 404 messages). */
export function availableDates(ctx: ReadContext, uf: string | null): string[] {
  return readableDates(ctx, (s) => s.dataset === CAR_DATASET && (uf === null || s.uf === uf));
}

/**
 * The layer snapshot whose overlaps with a CAR snapshot can be shown, or null with a note.
 * Current reads always have their pairs (computed before publishing).
 */
export async function overlapLayer(
  db: pg.Pool,
  ctx: ReadContext,
  carSnapshotIds: number[],
  dataset: LayerDataset,
  notes: string[],
): Promise<SnapshotInfo | null> {
  const layer = ctx.layers.get(dataset) ?? null;
  if (!layer) {
    if (ctx.mode === 'current') throw new AgroError('upstream_unavailable', `no published ${dataset} snapshot`);
    notes.push(`${dataset}: ${missingReason(ctx, dataset)}; its fields are null`);
    return null;
  }
  if (ctx.mode === 'current' || carSnapshotIds.length === 0) return layer;
  const done = await overlapPairs(db, carSnapshotIds, [layer.snapshot_id]);
  const missing = carSnapshotIds.filter((id) => !done.some((p) => p.car_snapshot_id === id));
  if (missing.length) {
    notes.push(`${dataset}: overlaps of SICAR snapshot ${missing.join(', ')} with ${dataset} snapshot ${layer.snapshot_id} (as of ${layer.as_of}) were not computed; its fields are null`);
    return null;
  }
  return layer;
}
