// What a pipeline declares and what the engine hands it. A pipeline knows its
// source layout, column mapping, normalisation SQL and quality facts; the engine
// owns the ledger, snapshots, the gate and publication.
import type pg from 'pg';
import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import type { FetchedFile } from './download.ts';
import type { Overlay } from './overlaps.ts';
import type { QualityFacts } from './quality.ts';

export interface RunOptions {
  source?: string;
  uf?: string;
  asOf?: string;
  force?: boolean;
  /** backfill: publish only when newer than the current snapshot. */
  backfill?: boolean;
  /**
   * Load the source even when its bytes are a snapshot's (`unchanged` otherwise): after an
   * upgrade whose migrations read a source better (a date layout, an encoding rule), the
   * snapshot of bytes that did not change keeps what the older release made of them.
   */
  reload?: boolean;
}

export interface StageRunner {
  /** Runs one named stage, recording timing, rows and detail in the ledger. */
  <T>(name: string, fn: () => Promise<T>, rowsOf?: (r: T) => number | null, detailOf?: (r: T) => object): Promise<T>;
}

export interface RunContext {
  cfg: Config;
  pool: pg.Pool;
  log: Logger;
  runId: number;
  options: RunOptions;
  /** The source to load, resolved once: --source, else the configured AGRO_SOURCE_<PIPELINE>; undefined when neither. */
  source: string | undefined;
  /** UF for per-state datasets, '' for national ones. */
  scope: string;
  /** Raw store folder for this pipeline and scope. */
  rawDir: string;
  /** Scratch folder for this run (extracted archives), removed at the end. */
  workDir: string;
  stage: StageRunner;
  /** Names a per-run staging table (schema stage), recorded for cleanup. */
  stagingTable(name: string): string;
}

export interface SnapshotTarget {
  snapshotId: number;
  /** The snapshot's as_of (yyyy-mm-dd), resolved once: --as-of, else the publisher's release date, else today. */
  asOf: string;
  /** Qualified name of the snapshot table of a relation, registered with the catalogue. */
  table(relation: string): Promise<string>;
  /** The current snapshot table of a relation for the same scope, when there is one. */
  previousTable(relation: string): string | null;
}

export interface LoadResult {
  /** Rows read, loaded and rejected over every relation the load fills: read = loaded + rejected. */
  rowsRead: number;
  rowsLoaded: number;
  rowsRejected: number;
  /** Rows dropped by design among those `rowsRead` counts; sum(facts.dropped) when absent (facts may also list other inputs' drops). */
  rowsDropped?: number;
  /** Rows of the main relation (the snapshot's `rows`, compared with the previous snapshot's); rowsLoaded when absent. */
  mainRows?: number;
  facts: QualityFacts;
  fingerprint: string | null;
}

/** A part of the source that is not a fetched file (Pipeline.sourceParts). */
export interface SourcePart {
  name: string;
  uri: string;
  /** SHA-256 of a canonical form (what the load uses, not how it was written or sent); null: it could not be read this run. */
  sha256: string | null;
  /** Bytes of that canonical form. */
  size: number;
}

export interface Pipeline {
  name: string;
  /** Snapshots are kept per UF (sicar) or nationally. */
  scopedByUf: boolean;
  /** Relations (snap.<rel>__template / current.<rel>) a snapshot of this pipeline fills. */
  relations: string[];
  /** The relation whose row count is the snapshot's `rows`. */
  mainRelation: string;
  /** Key column of the main relation: the quality report counts keys added and removed. */
  key?: string;
  /** Download stage: fetch and validate the source files into the raw store. */
  fetch(ctx: RunContext): Promise<FetchedFile[]>;
  /** Facts about how the source was obtained (e.g. sicar's route), merged into etl.snapshots.source. */
  sourceInfo?(files: FetchedFile[]): Promise<Record<string, unknown>>;
  /**
   * What the load reads besides the files (ibge-municipios: the official list joined with the
   * mesh), read once in the download stage: part of the source's SHA-256, so that a change in it
   * alone loads a new snapshot (contract §2), and listed in etl.snapshots.source (`parts`).
   */
  sourceParts?(ctx: RunContext, files: FetchedFile[]): Promise<SourcePart[]>;
  /** The publisher's release date when the files carry one (yyyy-mm-dd). */
  releaseDate?(ctx: RunContext, files: FetchedFile[]): Promise<string | null>;
  /** Read, normalise and load into the snapshot tables (indexes and ANALYZE included). */
  load(ctx: RunContext, files: FetchedFile[], target: SnapshotTarget): Promise<LoadResult>;
  /** The overlay this layer is for CAR properties (derived.car_overlaps), declared by the layer itself. */
  overlay?: Overlay;
}
