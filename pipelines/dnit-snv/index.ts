// DNIT SNV (SOURCES §8): the federal road network, one national snapshot per SNV version.
// A version is a zip `YYYYMM<letter>.zip` (e.g. 202507A) holding one polyline shapefile,
// possibly inside a sub-folder. The source is a version zip, a folder of them or a
// WebDAV folder (the DNIT Cloud share): the lexicographic maximum is the newest version.
// The CRS is unverified, so a layer without .prj fails the run instead of being guessed.
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { AgroError } from '../../src/errors.ts';
import { isHttp, joinSource, type FetchedFile } from '../../src/etl/download.ts';
import { readZipLayers } from '../../src/etl/layers.ts';
import { checkSnapshotTable, countNulls, countUnparsed, indexSnapshotTable } from '../../src/etl/load-steps.ts';
import type { LoadResult, Pipeline, RunContext, SnapshotTarget } from '../../src/etl/pipeline.ts';
import { addLayerFacts, addVerdicts, emptyFacts, sum, type QualityFacts } from '../../src/etl/quality.ts';
import { fetchOneFile, pickFromLocalFolder } from '../../src/etl/source-files.ts';
import type { FieldSpec } from '../../src/etl/stage-vector.ts';
import type { VectorLayer } from '../../src/etl/vector-reader.ts';
import { namedSql, render } from '../../src/sql.ts';

/**
 * Canonical staging name ← known spellings: the 10-character DBF names of SOURCES §8.4,
 * and the untruncated WFS property names (lower case; those are unverified).
 */
export const SNV_FIELDS: FieldSpec[] = [
  { name: 'codigo', aliases: ['vl_codigo'], required: true },
  // Distance-to-road keeps only main alignments: a source without the type would silently empty it.
  { name: 'tipo_trecho', aliases: ['sg_tipo_tr', 'sg_tipo_trecho'], required: true },
  { name: 'br', aliases: ['vl_br'] },
  { name: 'uf', aliases: ['sg_uf'] },
  { name: 'km_inicial', aliases: ['vl_km_inic', 'vl_km_inicial'] },
  { name: 'km_final', aliases: ['vl_km_fina', 'vl_km_final'] },
  { name: 'extensao_km', aliases: ['vl_extensa', 'vl_extensao'] },
  { name: 'nome_tipo_trecho', aliases: ['nm_tipo_tr', 'nm_tipo_trecho'] },
  { name: 'superficie', aliases: ['ds_superfi', 'ds_superficie'] },
  { name: 'legenda', aliases: ['ds_legenda'] },
  { name: 'jurisdicao', aliases: ['ds_jurisdi', 'ds_jurisdicao'] },
  { name: 'unidade_local', aliases: ['ul', 'sg_ul'] },
  // Kept in `extra` under these names.
  { name: 'ds_codigo', aliases: ['ds_codigo'] },
  { name: 'ds_coinc', aliases: ['ds_coinc'] },
  { name: 'ds_tipo_pln', aliases: ['ds_tipo_pln', 'ds_tipo_pl'] },
];

const REPORTED_OPTIONAL = new Set(['br', 'uf', 'km_inicial', 'km_final', 'extensao_km', 'nome_tipo_trecho', 'superficie', 'legenda', 'jurisdicao', 'unidade_local']);

/** Relative gap between geodesic and declared length above which a segment is reported. */
export const LENGTH_GAP_LIMIT = 0.1;
/** At most this many divergent segments are listed in the report (all are counted). */
const LIST_LIMIT = 200;

/** Version zip names as the DNIT folder lists them (SOURCES §8.1). */
export const VERSION_FILE = /^(\d{6})(\w+)\.zip$/i;

/** '202507A' for '202507A.zip'; null when the name is not a version. */
export function snvVersion(fileName: string): string | null {
  const m = VERSION_FILE.exec(fileName);
  return m ? `${m[1]}${m[2]}`.toUpperCase() : null;
}

/** First day of the version's month; null when YYYYMM is not a month. */
export function versionDate(versao: string): string | null {
  const m = /^(\d{4})(\d{2})/.exec(versao);
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 12) return null;
  return `${m[1]}-${m[2]}-01`;
}

/** The newest version among file names: the lexicographic maximum (letters are revisions). */
export function newestVersion(names: string[]): string | null {
  const versions = names.filter((n) => VERSION_FILE.test(n)).sort((a, b) => {
    const x = a.toUpperCase();
    const y = b.toUpperCase();
    return x < y ? -1 : x > y ? 1 : 0;
  });
  return versions.at(-1) ?? null;
}

const redact = (u: URL) => {
  const c = new URL(u.href);
  if (c.username || c.password) c.username = c.password = '';
  return c.href;
};

const decodeXml = (s: string) =>
  s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&amp;/g, '&');

/**
 * Names in a WebDAV folder (PROPFIND, Depth 1). Credentials come from the URL's user
 * info (DNIT Cloud: the public share token as user, empty password). 401/403/404 mean
 * the share or folder moved (SOURCES §8.7), not a transient error.
 */
export function listWebdavFolder(folderUrl: string, userAgent: string, timeoutMs = 60_000): Promise<string[]> {
  const u = new URL(folderUrl.endsWith('/') ? folderUrl : `${folderUrl}/`);
  const get = u.protocol === 'https:' ? https.request : http.request;
  const body = '<?xml version="1.0" encoding="utf-8"?><d:propfind xmlns:d="DAV:"><d:prop><d:resourcetype/><d:getlastmodified/></d:prop></d:propfind>';
  return new Promise((resolve, reject) => {
    const req = get(u, { method: 'PROPFIND', headers: { depth: '1', 'content-type': 'application/xml; charset=utf-8', 'user-agent': userAgent } }, (res) => {
      const status = res.statusCode ?? 0;
      if (status === 401 || status === 403 || status === 404) {
        res.resume();
        reject(new AgroError('source_not_found', `${redact(u)}: HTTP ${status} on PROPFIND: the share token or folder has moved (update the dnit-snv source)`));
        return;
      }
      if (status !== 207 && status !== 200) {
        res.resume();
        reject(new AgroError('download_failed', `${redact(u)}: HTTP ${status} on PROPFIND`));
        return;
      }
      let xml = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (xml += c));
      res.on('error', (e) => reject(new AgroError('download_failed', `${redact(u)}: ${e.message}`)));
      res.on('end', () => {
        const names: string[] = [];
        for (const m of xml.matchAll(/<(?:[\w-]+:)?href>([^<]*)<\/(?:[\w-]+:)?href>/gi)) {
          const last = decodeXml(m[1]).replace(/\/+$/, '').split('/').pop() ?? '';
          try {
            names.push(decodeURIComponent(last));
          } catch {
            names.push(last);
          }
        }
        resolve(names);
      });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`PROPFIND stalled for ${timeoutMs} ms`)));
    req.on('error', (e) => reject(new AgroError('download_failed', `${redact(u)}: ${e.message}`)));
    req.end(body);
  });
}

async function fetchVersion(ctx: RunContext): Promise<FetchedFile[]> {
  const base = ctx.options.source ?? ctx.cfg.sources['dnit-snv'];
  if (!base) throw new AgroError('usage', 'dnit-snv needs --source <YYYYMM<letter>.zip, a folder of them, or the DNIT WebDAV folder URL>');
  const pick = (names: string[]) => newestVersion(names)!;
  let uri = await pickFromLocalFolder(base, VERSION_FILE, pick, 'SNV version zip (YYYYMM<letter>.zip)');
  let name: string | undefined;
  if (isHttp(uri) && !/\.zip$/i.test(new URL(uri).pathname)) {
    const names = await listWebdavFolder(uri, ctx.cfg.userAgent);
    name = newestVersion(names) ?? undefined;
    if (!name) throw new AgroError('source_not_found', `${redact(new URL(uri))} lists no SNV version zip (YYYYMM<letter>.zip)`);
    uri = joinSource(uri, name);
  }
  return fetchOneFile(ctx, uri, { expect: 'zip', name });
}

/** Pipeline-specific facts, stored with the quality report beside the common ones. */
export interface SnvFacts extends QualityFacts {
  snv: {
    versao: string | null;
    /** Observed `superficie` values of this version and their segment counts. */
    superficies: { superficie: string | null; trechos: number }[];
    extensao_divergente: {
      limite: number;
      total: number;
      sem_extensao_declarada: number;
      trechos: { codigo: string; extensao_km: number; extensao_calculada_km: number; diferenca: number }[];
    };
    codigos_repetidos: { codigo: string; trechos: number }[];
  };
}

const round = (n: number, d: number) => Math.round(n * 10 ** d) / 10 ** d;

async function load(ctx: RunContext, files: FetchedFile[], target: SnapshotTarget): Promise<LoadResult> {
  const facts = emptyFacts();
  const file = files[0];
  const versao = snvVersion(file.name);
  const client = await ctx.pool.connect();
  try {
    // SOURCES §8.3: the SNV CRS is unverified; the reader would assume 4674 without a .prj.
    const refuseBlind = (layers: VectorLayer[]) => {
      const blind = layers.filter((l) => l.sridAssumed);
      if (blind.length) {
        throw new AgroError(
          'missing_layer_part',
          `${blind.map((l) => path.basename(l.file)).join(', ')} in ${file.name} has no .prj: the SNV coordinate system is not guessed (SOURCES §8.3)`,
          { part: '.prj', layers: blind.map((l) => l.name) },
        );
      }
    };
    const staged = await readZipLayers(ctx, client, file.path, SNV_FIELDS, { table: 'snv', srid: 4674, check: refuseBlind });

    const classified = ctx.stagingTable('snv_cls');
    const built = await ctx.stage(
      'normalise',
      async () => {
        await client.query(render(namedSql('queries/dnit_classify'), { classified, stage: staged.stage }));
        const v = await client.query(
          `SELECT verdict, count(*)::int AS n, count(*) FILTER (WHERE was_invalid)::int AS invalid FROM ${classified} GROUP BY verdict`,
        );
        const verdicts = Object.fromEntries(v.rows.map((x) => [x.verdict, x.n])) as Record<string, number>;
        const repaired = v.rows.find((x) => x.verdict === 'ok')?.invalid ?? 0;
        const invalid = v.rows.reduce((a, x) => a + x.invalid, 0);
        const table = await target.table('dnit_snv');
        await client.query(
          render(namedSql('queries/dnit_snv'), {
            target: table, classified, stage: staged.stage,
            versao: versao ? client.escapeLiteral(versao) : 'NULL', snapshot_id: String(target.snapshotId),
          }),
        );
        const rows = await checkSnapshotTable(client, 'dnit_snv', table);
        return { table, verdicts, invalid, repaired, rows };
      },
      (r) => r.rows,
    );

    await ctx.stage('index', () =>
      indexSnapshotTable(client, built.table, { gist: ['geom'], btree: ['codigo', { name: 'br', columns: ['br', 'uf'] }] }),
    );

    // Quality facts.
    addVerdicts(facts, built.verdicts);
    const rep = (await client.query(render(namedSql('queries/dnit_report'), { target: built.table, limit: String(LENGTH_GAP_LIMIT) }))).rows;
    const superficies = rep.filter((r) => r.kind === 'superficie').map((r) => ({ superficie: r.codigo as string | null, trechos: r.n as number }));
    const divergent = rep
      .filter((r) => r.kind === 'extensao_divergente')
      .map((r) => ({
        codigo: r.codigo as string,
        extensao_km: r.extensao_km as number,
        extensao_calculada_km: round(r.calculada_km, 3),
        diferenca: round((r.calculada_km - r.extensao_km) / r.extensao_km, 4),
      }));
    const semExtensao = rep.find((r) => r.kind === 'sem_extensao_declarada')?.n ?? 0;
    const repetidos = rep.filter((r) => r.kind === 'codigo_repetido').map((r) => ({ codigo: r.codigo as string, trechos: r.n as number }));

    const label = versao ?? file.name;
    facts.notes.push(`superficie values in ${label}: ${superficies.map((s) => `${s.superficie ?? '(empty)'} (${s.trechos})`).join(', ')}`);
    if (divergent.length) {
      facts.notes.push(
        `${divergent.length} segments differ from their declared vl_extensa by more than ${LENGTH_GAP_LIMIT * 100} % (kept as published): ` +
          divergent.slice(0, 20).map((d) => `${d.codigo} ${d.extensao_km} km declared, ${d.extensao_calculada_km} km drawn`).join('; ') +
          (divergent.length > 20 ? '; …' : ''),
      );
    }
    if (semExtensao) facts.notes.push(`${semExtensao} segments declare no vl_extensa`);
    if (repetidos.length) facts.notes.push(`${repetidos.length} codes are carried by several segments (all kept): ${repetidos.slice(0, 20).map((r) => r.codigo).join(', ')}`);
    if (!versao) facts.notes.push(`${file.name} is not named YYYYMM<letter>.zip: versao is NULL`);

    facts.fields.empty = await countNulls(client, built.table, ['br', 'uf', 'extensao_km', 'tipo_trecho', 'superficie', 'jurisdicao']);
    await countUnparsed(client, built.table, ['km_inicial', 'km_final', 'extensao_km'], facts);
    facts.fields.missingOptional = staged.missingOptional.filter((n) => REPORTED_OPTIONAL.has(n));
    facts.fields.unknown = staged.unknown;
    facts.geometry.invalid = built.invalid;
    facts.geometry.repaired = built.repaired;
    facts.geometry.rejected = built.verdicts.geometry_empty_after_repair ?? 0;
    facts.geometry.empty = built.verdicts.no_geometry ?? 0;
    facts.geometry.outsideBrazil = built.verdicts.outside_brazil ?? 0;
    addLayerFacts(facts, staged.layers); // every layer has a .prj (checked when read): no SRID is assumed
    facts.encoding.replacementChars = staged.replacementChars;
    for (const d of staged.detected) facts.notes.push(`${d.layer} had no .cpg: its DBF bytes read as ${d.encoding}`);
    if (staged.replacementChars) facts.notes.push(`${staged.replacementChars} values hold U+FFFD (bytes not valid in ${facts.encoding.name})`);

    const snvFacts: SnvFacts = {
      ...facts,
      snv: {
        versao,
        superficies,
        extensao_divergente: { limite: LENGTH_GAP_LIMIT, total: divergent.length, sem_extensao_declarada: semExtensao, trechos: divergent.slice(0, LIST_LIMIT) },
        codigos_repetidos: repetidos.slice(0, LIST_LIMIT),
      },
    };
    return { rowsRead: staged.rows, rowsLoaded: built.rows, rowsRejected: sum(facts.rejected), facts: snvFacts, fingerprint: staged.fingerprint };
  } finally {
    client.release();
  }
}

export const dnitSnv: Pipeline & { key: string } = {
  name: 'dnit-snv',
  scopedByUf: false,
  relations: ['dnit_snv'],
  mainRelation: 'dnit_snv',
  key: 'codigo',
  fetch: fetchVersion,
  async releaseDate(_ctx, files) {
    const v = snvVersion(files[0]?.name ?? '');
    return v ? versionDate(v) : null;
  },
  load,
};
