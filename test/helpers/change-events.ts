// Shared by the change-events tests: SICAR fixture rows by id, a row with another status, and
// real pipeline runs on a test database.
import { SICAR_FIXTURES, type SicarPropertyRow } from '../../fixtures/sicar.ts';
import { findPipeline } from '../../pipelines/registry.ts';
import { runPipeline, type RunOutcome } from '../../src/etl/run.ts';
import type { TestDb } from './db.ts';

const ROWS = Object.values(SICAR_FIXTURES).flatMap((f) => f.areaImovel);
export const sicarRow = (id: string): SicarPropertyRow => ROWS.find((r) => r.id === id)!;
export const carOf = (id: string): string => sicarRow(id).attributes.cod_imovel;

/** The row with another status, under a new id (the builder's filter applies to the appended rows too). */
export const withStatus = (r: SicarPropertyRow, s: SicarPropertyRow['attributes']['ind_status']): SicarPropertyRow => ({ ...r, id: `${r.id}-${s}`, attributes: { ...r.attributes, ind_status: s } });

/** Runs a pipeline on the test database (`db` read at call time: it is set in beforeAll). */
export const pipelineRunner = (db: () => TestDb) => async (pipeline: string, source: string, extra: object = {}): Promise<RunOutcome> =>
  runPipeline({ cfg: db().cfg, pool: db().pool, log: db().log }, findPipeline(pipeline)!, { source, ...extra });
