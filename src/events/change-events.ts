// Change events for monitored records (contract §5), written into the outbox inside the
// publish transaction: an event exists if and only if the publish that made the change
// current committed. They compare the snapshot being published with the one it replaces:
//   sicar            car.situacao.alterada (status differs, or the property left or entered
//                    the state's registry: situacao or situacao_anterior null), car.embargo.criado (an active
//                    embargo overlaps the property now and did not before, same snapshot of each embargo layer)
//   ibama-embargos   car.embargo.criado (same CAR snapshots, old IBAMA snapshot against new)
//   icmbio-embargos  car.embargo.criado (the same, ICMBio's layer: EMBARGO_LAYERS)
//   receita-cnpj     socio.qsa.alterado (the monitored companies' partner lists, month made
//                    current against the month it replaces, whatever was loaded between)
// A first load has nothing to compare with and emits nothing. Event ids derive from what
// changed (key, record, embargo term and its agency) and from the publication that made it current
// (etl.publications, one row per committed publish or rollback): a publish writes each event
// once (a retried transaction left no row behind; the same snapshot again is no publication),
// a republish of the same data finds no change, and a change announced again later (a status
// that goes back and forth, a rolled-back snapshot published again, an embargo lifted and
// imposed again) is a new event with a new id: receivers deduplicate on the id.
// Only live keys still active are told (a revoked key's monitors stay until the key is purged;
// a test key's monitors hear nothing of live data).
import type pg from 'pg';
import { forEachBatch } from '../db/batches.ts';
import { ident } from '../db/pool.ts';
import { qualifiedSnapshotTable, REJECTED_PROPERTIES } from '../etl/names.ts';
import { OVERLAYS, type Overlay } from '../etl/overlaps.ts';
import { partnerListDiff } from '../etl/sql/qsa-changes.ts';
import { keyActiveSql } from '../platform/keys.ts';
import { formatCnpj } from '../privacy.ts';
import { sqlText } from '../sql.ts';

export interface PublishedChange {
  dataset: string;
  scope: string;
  /** The snapshot that was current before (null: a first load). */
  previousSnapshotId: number | null;
  snapshotId: number;
  /** The etl.publications row of this publish or rollback: part of every event id. */
  publicationId: number;
}

/**
 * Monitors of live keys that are still active (a rotated key in its grace period has handed its
 * monitors on). A test key reads the sandbox only (contract §4): a change in live data is none of
 * its business, and its monitors would otherwise have fed it live data unbilled.
 */
const ACTIVE_MONITORS = `(SELECT m.* FROM events.monitors m JOIN platform.api_keys k ON k.id = m.key_id WHERE k.env = 'live' AND ${keyActiveSql('k')})`;

const exists = async (c: pg.ClientBase, table: string) => (await c.query(`SELECT to_regclass($1) IS NOT NULL AS ok`, [table])).rows[0].ok as boolean;

/** Writes the change events of a publish into events.outbox; returns how many were new. */
export async function recordChangeEvents(c: pg.ClientBase, p: PublishedChange): Promise<number> {
  if (p.previousSnapshotId === null || p.previousSnapshotId === p.snapshotId) return 0;
  const watched = await c.query(`SELECT 1 FROM events.monitors LIMIT 1`);
  if (!watched.rowCount) return 0;
  const pub = p.publicationId;
  if (p.dataset === 'sicar') {
    let n = await situacaoChanges(c, p.scope, p.previousSnapshotId, p.snapshotId, pub);
    for (const layer of EMBARGO_LAYERS) n += await embargoesOfCarSnapshot(c, layer, p.previousSnapshotId, p.snapshotId, pub);
    return n;
  }
  const layer = EMBARGO_LAYERS.find((l) => l.dataset === p.dataset);
  if (layer) return embargoesOfLayerSnapshot(c, layer, p.previousSnapshotId, p.snapshotId, pub);
  if (p.dataset === 'receita-cnpj') return qsaChanges(c, p.previousSnapshotId, p.snapshotId, pub);
  return 0;
}

/**
 * Status changes of monitored properties between two snapshots of one state. A property the
 * new snapshot lacks left the registry (situacao null); one the old snapshot lacked entered it
 * (situacao_anterior null). `motivo` (additive to the contract's payload) says which of the
 * three happened: a status code none of §2.5's is null in `situacao` too, and a receiver must
 * not take a property whose code it cannot name for one that left the registry. Both snapshots are of the same state (only its monitored CAR
 * numbers, which begin with its UF, are looked up), so another state's load never makes a
 * property look gone, and both routes (zips, WFS) build the same car_imovel.
 * A property whose rows were rejected (REJECTED_PROPERTIES, with its status) is in its
 * snapshot's registry as a loaded one is: neither gone nor entering, and what happens to it
 * next (a new status, gone from the following snapshot) is announced.
 */
async function situacaoChanges(c: pg.ClientBase, uf: string, prev: number, next: number, pub: number): Promise<number> {
  const before = await registryOf(c, prev);
  const after = await registryOf(c, next);
  if (!before || !after) return 0;
  // Counted where the events are written: a row per event would come back to this process.
  const r = await c.query(
    `SELECT count(id)::int AS n FROM (SELECT events.enqueue('car.situacao.alterada', 'car.situacao.alterada:' || m.key_id || ':' || m.record || ':' || $1 || ':' || $2 || ':p' || $3, m.key_id,
              jsonb_build_object('car', m.record, 'situacao_anterior', o.situacao, 'situacao', n.situacao,
                                 'snapshot_anterior', $1::bigint, 'snapshot', $2::bigint,
                                 'motivo', CASE WHEN n.car IS NULL THEN 'saiu_do_registro' WHEN o.car IS NULL THEN 'entrou_no_registro' ELSE 'situacao' END)) AS id
       FROM ${ACTIVE_MONITORS} m LEFT JOIN ${after} n ON n.car = m.record LEFT JOIN ${before} o ON o.car = m.record
      WHERE m.kind = 'car' AND left(m.record, 2) = $4 AND (n.car IS NOT NULL OR o.car IS NOT NULL)
        AND (n.car IS NULL OR o.car IS NULL OR (n.known AND o.known AND n.situacao IS DISTINCT FROM o.situacao))) e`,
    [prev, next, pub, uf],
  );
  return r.rows[0].n;
}

/**
 * A SICAR snapshot's registry (car, situacao, known): its loaded properties and those whose rows
 * its load rejected (snapshots loaded before that table existed have only the former); null when
 * the snapshot's tables are gone. A rejected-properties table written before it kept the status
 * (car only: releases b026559 to f271bff, still current after an upgrade in place) gives those
 * properties an unknown status (known false): in the registry, but no status change is claimed.
 */
async function registryOf(c: pg.ClientBase, id: number): Promise<string | null> {
  const loaded = qualifiedSnapshotTable('car_imovel', id);
  if (!(await exists(c, loaded))) return null;
  const rejected = qualifiedSnapshotTable(REJECTED_PROPERTIES, id);
  if (!(await exists(c, rejected))) return `(SELECT car, situacao, true AS known FROM ${loaded})`;
  const withStatus = (await c.query(`SELECT 1 FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'situacao' AND NOT attisdropped`, [rejected])).rowCount;
  return `(SELECT car, situacao, true AS known FROM ${loaded} UNION ALL SELECT car, ${withStatus ? 'situacao, true' : 'NULL::text, false'} FROM ${rejected})`;
}

/**
 * The embargo layers whose new embargoes are car.embargo.criado, each its own overlap `camada`.
 * The payload keeps the contract's fields (`numero_tad` holds the layer's key: IBAMA's NUM_TAD,
 * ICMBio's num_emb[/serie]) and adds `orgao`, so a receiver tells the agencies apart. The
 * overlap's `camada`, the layer's relation and key column are its pipeline's overlay declaration
 * (OVERLAYS), read from there.
 */
export interface EmbargoLayer {
  dataset: string;
  orgao: 'IBAMA' | 'ICMBio';
  /**
   * Where the event id's text starts: IBAMA's is that of the ids already sent (kept, so they
   * stay stable); another layer's names its camada there, where IBAMA's has the key id
   * (`key_…`), so an ICMBio embargo never takes the id of an IBAMA term of the same number.
   */
  idPrefix: string;
}

export const EMBARGO_LAYERS: readonly EmbargoLayer[] = [
  { dataset: 'ibama-embargos', orgao: 'IBAMA', idPrefix: 'car.embargo.criado:' },
  { dataset: 'icmbio-embargos', orgao: 'ICMBio', idPrefix: 'car.embargo.criado:embargo_icmbio:' },
];

/** The overlay an embargo layer's pipeline declares (src/etl/overlaps.ts). */
function overlayOf(layer: EmbargoLayer): Overlay {
  const o = OVERLAYS.find((x) => x.dataset === layer.dataset);
  if (!o) throw new Error(`EMBARGO_LAYERS: ${layer.dataset} declares no overlay`);
  return o;
}

interface EmbargoPair {
  carBefore: number;
  layerBefore: number;
  carAfter: number;
  layerAfter: number;
}

/** New active embargoes of one layer on monitored properties between two overlap pairs (both must be computed). */
async function newEmbargoes(c: pg.ClientBase, layer: EmbargoLayer, pairs: EmbargoPair[], layerAfter: number, pub: number): Promise<number> {
  const done = await c.query(`SELECT car_snapshot_id, layer_snapshot_id FROM derived.overlap_pairs`);
  const have = new Set(done.rows.map((d) => `${d.car_snapshot_id}|${d.layer_snapshot_id}`));
  // A pair never computed cannot be compared: nothing is claimed about it.
  const usable = pairs.filter((q) => have.has(`${q.carBefore}|${q.layerBefore}`) && have.has(`${q.carAfter}|${q.layerAfter}`));
  const overlay = overlayOf(layer);
  const terms = qualifiedSnapshotTable(overlay.relation, layerAfter);
  if (usable.length === 0 || !(await exists(c, terms))) return 0;
  const key = ident(overlay.idColumn);
  // A layer that declares no active flag (ICMBio's says nothing of lifting: ativo NULL) counts
  // each of its embargoes as active; one that does (IBAMA's) only those it flags.
  const activeWhenUnknown = overlay.active === undefined;
  const r = await c.query(
    `WITH p AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[]) AS p(cb, lb, ca, la)),
     n AS (
       SELECT m.key_id, o.car, o.feicao_id AS numero_tad, p.cb, p.lb, sum(o.area_sobreposta_ha) AS area
         FROM p JOIN derived.car_overlaps o ON o.car_snapshot_id = p.ca AND o.layer_snapshot_id = p.la AND o.camada = $6 AND coalesce(o.ativo, $8)
         JOIN ${ACTIVE_MONITORS} m ON m.kind = 'car' AND m.record = o.car
        GROUP BY m.key_id, o.car, o.feicao_id, p.cb, p.lb
     )
     SELECT count(id)::int AS n FROM (SELECT events.enqueue('car.embargo.criado', $7 || n.key_id || ':' || n.car || ':' || n.numero_tad || ':p' || $5, n.key_id,
              jsonb_build_object('car', n.car, 'embargo', jsonb_build_object(
                'numero_tad', n.numero_tad, 'data_embargo', to_char(t.data_embargo, 'YYYY-MM-DD'), 'area_sobreposta_ha', round(n.area::numeric, 4),
                'orgao', $9::text))) AS id
       FROM n LEFT JOIN LATERAL (SELECT min(data_embargo) AS data_embargo FROM ${terms} WHERE ${key} = n.numero_tad) t ON true
      WHERE NOT EXISTS (SELECT 1 FROM derived.car_overlaps b
                         WHERE b.car_snapshot_id = n.cb AND b.layer_snapshot_id = n.lb AND b.camada = $6 AND coalesce(b.ativo, $8)
                           AND b.car = n.car AND b.feicao_id = n.numero_tad)) e`,
    [usable.map((q) => q.carBefore), usable.map((q) => q.layerBefore), usable.map((q) => q.carAfter), usable.map((q) => q.layerAfter), pub,
      overlay.camada, layer.idPrefix, activeWhenUnknown, layer.orgao],
  );
  return r.rows[0].n;
}

async function currentIds(c: pg.ClientBase, dataset: string): Promise<number[]> {
  const r = await c.query(`SELECT snapshot_id FROM etl.current WHERE dataset = $1`, [dataset]);
  return r.rows.map((x) => Number(x.snapshot_id));
}

async function embargoesOfCarSnapshot(c: pg.ClientBase, layer: EmbargoLayer, prev: number, next: number, pub: number): Promise<number> {
  const [current] = await currentIds(c, layer.dataset);
  if (current === undefined) return 0;
  return newEmbargoes(c, layer, [{ carBefore: prev, layerBefore: current, carAfter: next, layerAfter: current }], current, pub);
}

async function embargoesOfLayerSnapshot(c: pg.ClientBase, layer: EmbargoLayer, prev: number, next: number, pub: number): Promise<number> {
  const cars = await currentIds(c, 'sicar');
  return newEmbargoes(c, layer, cars.map((car) => ({ carBefore: car, layerBefore: prev, carAfter: car, layerAfter: next })), next, pub);
}

interface ReceitaPartner {
  nome_socio: string | null;
  cnpj_cpf_do_socio: string | null;
  identificador_de_socio: string | null;
  qualificacao_socio: string | null;
}

const RECEITA_MASKED_CPF = /^\*{3}(\d{6})\*{2}$/;

/** A partner's document as the API shows it: a person's CPF masked (***.NNN.NNN-**), a company's CNPJ formatted. */
export function partnerDocumentShown(p: ReceitaPartner): string | null {
  const doc = p.cnpj_cpf_do_socio?.trim() ?? '';
  if (p.identificador_de_socio === '1') return /^[0-9A-Z]{14}$/.test(doc) ? formatCnpj(doc) : null;
  if (p.identificador_de_socio !== '2') return null;
  const masked = RECEITA_MASKED_CPF.exec(doc);
  const digits = doc.replace(/\D/g, '');
  const miolo = masked ? masked[1] : digits.length === 11 ? digits.slice(3, 9) : null;
  return miolo ? `***.${miolo.slice(0, 3)}.${miolo.slice(3)}-**` : null;
}

interface QsaRow {
  key_id: string;
  record: string;
  entraram: ReceitaPartner[];
  sairam: ReceitaPartner[];
}

async function qsaChanges(c: pg.ClientBase, prev: number, next: number, pub: number): Promise<number> {
  // The monitored companies' partner lists in the month being made current against the month
  // it replaces, compared here: the month's stored diff (derived.cnpj_qsa_changes) is against
  // the month current when it was loaded, which is not the one it replaces after a skipped or
  // backfilled month, a rollback, or a publish by hand or --force while another month is
  // current. A rollback compares the same way (who had entered leaves again).
  const [after, before] = [next, prev].map((id) => qualifiedSnapshotTable('cnpj_socios', id));
  if (!(await exists(c, before)) || !(await exists(c, after))) return 0;
  const monitored = (table: string) =>
    sqlText(`(SELECT * FROM ${table} WHERE cnpj_basico IN (SELECT left(x.record, 8) FROM ${ACTIVE_MONITORS} x WHERE x.kind = 'cnpj'))`);
  const quals = qualifiedSnapshotTable('cnpj_qualificacoes', next);
  const names = new Map<string, string>(); // Receita's partner qualification codes: a lookup of a few dozen rows
  if (await exists(c, quals)) for (const q of (await c.query(`SELECT codigo, descricao FROM ${quals}`)).rows) names.set(q.codigo, q.descricao);
  const shown = (list: ReceitaPartner[]) =>
    list.map((p) => ({
      nome: p.nome_socio, cpf_cnpj: partnerDocumentShown(p),
      qualificacao: p.qualificacao_socio === null ? null : names.get(p.qualificacao_socio) ?? p.qualificacao_socio,
    }));
  let n = 0;
  // Read through a cursor in the publish transaction and written a batch per statement: a month
  // changes the partner lists of hundreds of thousands of companies, and monitors of them may be millions.
  await forEachBatch<QsaRow>(
    c,
    `SELECT m.key_id, m.record, d.entraram, d.sairam FROM (${partnerListDiff(monitored(after), monitored(before))}) d
       JOIN ${ACTIVE_MONITORS} m ON m.kind = 'cnpj' AND left(m.record, 8) = d.cnpj_basico`,
    [],
    async (rows) => {
      const e = await c.query(
        `SELECT count(events.enqueue('socio.qsa.alterado', d, k, b::jsonb))::int AS n FROM unnest($1::text[], $2::text[], $3::text[]) AS x(d, k, b)`,
        [
          rows.map((r) => `socio.qsa.alterado:${r.key_id}:${r.record}:${prev}:${next}:p${pub}`),
          rows.map((r) => r.key_id),
          rows.map((r) => JSON.stringify({ cnpj: formatCnpj(r.record), entraram: shown(r.entraram), sairam: shown(r.sairam) })),
        ],
      );
      n += e.rows[0].n;
    },
    { ownTransaction: false },
  );
  return n;
}
