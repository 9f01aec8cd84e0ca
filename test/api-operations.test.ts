// Operating the API (issue 11): freshness of each source in GET /v1/sources against the
// schedule's cadence, and GET /metrics in the Prometheus text format, parsed line by line.
// A real API over a PostGIS loaded with the fixtures by the real pipelines.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { Histogram, renderFamily } from '../src/metrics/registry.ts';
import { call, expectEnvelope, fixtureApi, newKey, startApi } from './helpers/api.ts';

const fx = fixtureApi();
const GO1 = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2';

interface Source {
  dataset: string;
  uf: string | null;
  published_at: string;
  freshness: 'fresh' | 'stale' | 'critical' | null;
  checked_at: string | null;
  age_hours: number | null;
  cadence_hours: number | null;
  last_run: { run_id: number; status: string; started_at: string; finished_at: string | null; error_code: string | null } | null;
}

async function sources(base = fx.api.base): Promise<Source[]> {
  const r = await call(base, '/v1/sources', { key: await newKey(fx.db) });
  expect(r.status).toBe(200);
  return r.body.sources;
}
const find = (ss: Source[], dataset: string, uf: string | null = null) => ss.find((s) => s.dataset === dataset && s.uf === uf)!;

/** Moves a current snapshot's publication back in time. */
const publishedHoursAgo = (dataset: string, uf: string | null, hours: number) =>
  fx.db.pool.query(
    `UPDATE etl.snapshots SET published_at = now() - make_interval(secs => $3 * 3600)
      WHERE snapshot_id = (SELECT snapshot_id FROM etl.current WHERE dataset = $1 AND scope = coalesce($2, ''))`,
    [dataset, uf, hours],
  );

describe('GET /v1/sources: freshness against the schedule', () => {
  test('cadences come from the scheduler defaults; a fresh load is fresh; an unscheduled dataset has none', async () => {
    const ss = await sources();
    expect(find(ss, 'sicar', 'GO')).toMatchObject({ freshness: 'fresh', cadence_hours: 24, last_run: { status: 'published', error_code: null } });
    expect(find(ss, 'sicar', 'GO').age_hours).toBeLessThan(1);
    // The last run's id, as `agro runs` names it: what `agro report <run_id>` takes.
    const lastGo = await fx.db.pool.query(`SELECT max(run_id)::int AS id FROM etl.runs WHERE pipeline = 'sicar' AND scope = 'GO'`);
    expect(find(ss, 'sicar', 'GO').last_run!.run_id).toBe(lastGo.rows[0].id);
    expect(find(ss, 'sicar', 'GO').checked_at).toBe(find(ss, 'sicar', 'GO').published_at);
    expect(find(ss, 'ibama-embargos').cadence_hours).toBe(24);
    for (const layer of ['funai-tis', 'cnuc-ucs', 'incra-quilombos', 'ibge-municipios', 'dnit-snv', 'zarc']) expect(find(ss, layer).cadence_hours).toBe(168);
    expect(find(ss, 'receita-cnpj').cadence_hours).toBe(31 * 24); // the longest month among the last firings
    expect(find(ss, 'car-titulares')).toMatchObject({ freshness: null, cadence_hours: null }); // no job runs it
    expect(ss.filter((s) => s.cadence_hours !== null).every((s) => s.freshness === 'fresh')).toBe(true);
  });

  test('stale after 1.5 cadences, critical after 3: snapshots published long ago', async () => {
    await publishedHoursAgo('sicar', 'GO', 30);
    await publishedHoursAgo('sicar', 'MT', 40);
    await publishedHoursAgo('sicar', 'DF', 80);
    await publishedHoursAgo('funai-tis', null, 8 * 24);
    await publishedHoursAgo('cnuc-ucs', null, 11 * 24);
    await publishedHoursAgo('incra-quilombos', null, 22 * 24);
    await publishedHoursAgo('receita-cnpj', null, 40 * 24);
    await publishedHoursAgo('ibama-embargos', null, 50);
    const ss = await sources();
    expect(find(ss, 'sicar', 'GO').freshness).toBe('fresh');
    expect(find(ss, 'sicar', 'MT').freshness).toBe('stale');
    expect(find(ss, 'sicar', 'DF').freshness).toBe('critical');
    expect(find(ss, 'sicar', 'DF').age_hours).toBeCloseTo(80, 0);
    expect(find(ss, 'funai-tis').freshness).toBe('fresh');
    expect(find(ss, 'cnuc-ucs').freshness).toBe('stale');
    expect(find(ss, 'incra-quilombos').freshness).toBe('critical');
    expect(find(ss, 'receita-cnpj').freshness).toBe('fresh'); // 40 d < 1.5 × 31 d
    expect(find(ss, 'ibama-embargos').freshness).toBe('stale');

    // A run that found the source unchanged confirms the copy: fresh again, and the last run shows it.
    await fx.db.pool.query(
      `INSERT INTO etl.runs (pipeline, scope, status, started_at, finished_at) VALUES ('sicar', 'DF', 'unchanged', now() - interval '70 minutes', now() - interval '1 hour')`,
    );
    // A failed run after that does not: still what it was, and the failure is visible.
    const failed = await fx.db.pool.query(
      `INSERT INTO etl.runs (pipeline, scope, status, started_at, finished_at, error_code, error) VALUES ('sicar', 'MT', 'failed', now() - interval '20 minutes', now() - interval '10 minutes', 'download_failed', 'x') RETURNING run_id::int`,
    );
    const again = await sources();
    expect(find(again, 'sicar', 'DF')).toMatchObject({ freshness: 'fresh', last_run: { status: 'unchanged' } });
    expect(find(again, 'sicar', 'DF').age_hours).toBeCloseTo(1, 0);
    expect(find(again, 'sicar', 'MT')).toMatchObject({ freshness: 'stale', last_run: { run_id: failed.rows[0].run_id, status: 'failed', error_code: 'download_failed' } });
    expect(JSON.stringify(again)).not.toContain('"error"'); // the error code, never the error text
  });

  test('the cadence follows the schedule file: an hourly SICAR job makes a 2-hour-old state stale', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-schedule-'));
    const file = path.join(dir, 'agro.schedule.json');
    fs.writeFileSync(file, JSON.stringify({ jobs: { 'sicar-hourly': { cron: '0 * * * *', pipelines: ['sicar'] } } }));
    const cfg = loadConfig({ ...process.env, DATABASE_URL: fx.db.url, AGRO_DATA_DIR: fx.db.dataDir, AGRO_SCHEDULE_FILE: file });
    const api = await startApi(cfg, fx.db.url, fx.db);
    try {
      await publishedHoursAgo('sicar', 'GO', 2);
      const ss = await sources(api.base);
      expect(find(ss, 'sicar', 'GO')).toMatchObject({ freshness: 'stale', cadence_hours: 1 });
      expect(find(ss, 'funai-tis')).toMatchObject({ freshness: null, cadence_hours: null }); // not in this schedule
    } finally {
      await api.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the rule is stated in the OpenAPI document', async () => {
    const doc = (await call(fx.api.base, '/v1/openapi.json')).body;
    expect(doc.paths['/v1/sources'].get.description).toMatch(/stale up to 3 × cadence, critical beyond/);
    expect(doc.paths['/v1/sources'].get.description).toMatch(/fresh while age ≤ 1\.5 × cadence/);
  });
});

// ---- a line-by-line parser of the Prometheus text format (0.0.4) ------------------------

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
interface Parsed {
  families: Map<string, { type: string; help: string; samples: Sample[] }>;
}

function parseLabels(text: string, line: string): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const m = /^([a-zA-Z_][a-zA-Z0-9_]*)="/.exec(text.slice(i));
    if (!m) throw new Error(`bad label at ${i}: ${line}`);
    i += m[0].length;
    let v = '';
    for (;;) {
      if (i >= text.length) throw new Error(`unterminated label value: ${line}`);
      const c = text[i++];
      if (c === '"') break;
      if (c === '\\') {
        const e = text[i++];
        if (e === 'n') v += '\n';
        else if (e === '\\' || e === '"') v += e;
        else throw new Error(`bad escape \\${e}: ${line}`);
      } else if (c === '\n') throw new Error(`raw line feed in a label: ${line}`);
      else v += c;
    }
    if (m[1] in out) throw new Error(`label ${m[1]} twice: ${line}`);
    out[m[1]] = v;
    if (text[i] === ',') i++;
    else if (i !== text.length) throw new Error(`expected , or } at ${i}: ${line}`);
  }
  return out;
}

function parseValue(s: string): number {
  if (s === '+Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  if (s === 'NaN') return NaN;
  if (!/^-?\d+(\.\d+)?(e[+-]?\d+)?$/i.test(s)) throw new Error(`bad value ${s}`);
  return Number(s);
}

/** Parses the exposition and checks its rules: HELP then TYPE before a family's samples, sample names of their family. */
function parseExposition(text: string): Parsed {
  expect(text.endsWith('\n')).toBe(true);
  const families: Parsed['families'] = new Map();
  let current: string | null = null;
  let pendingHelp: { name: string; help: string } | null = null;
  for (const line of text.slice(0, -1).split('\n')) {
    let m: RegExpExecArray | null;
    if ((m = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line))) {
      if (families.has(m[1])) throw new Error(`family ${m[1]} declared twice`);
      pendingHelp = { name: m[1], help: m[2] };
    } else if ((m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line))) {
      if (pendingHelp?.name !== m[1]) throw new Error(`TYPE without its HELP: ${line}`);
      families.set(m[1], { type: m[2], help: pendingHelp.help, samples: [] });
      current = m[1];
      pendingHelp = null;
    } else if ((m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line))) {
      if (!current) throw new Error(`sample before any TYPE: ${line}`);
      const f = families.get(current)!;
      const allowed = f.type === 'histogram' ? ['_bucket', '_sum', '_count'].map((x) => current + x) : f.type === 'summary' ? [current, current + '_sum', current + '_count'] : [current];
      if (!allowed.includes(m[1])) throw new Error(`sample ${m[1]} outside its family ${current}`);
      f.samples.push({ name: m[1], labels: m[2] ? parseLabels(m[2], line) : {}, value: parseValue(m[3]) });
    } else throw new Error(`not a line of the format: ${JSON.stringify(line)}`);
  }
  return { families };
}

/** Histogram rules: per label set, le ascending, counts cumulative, +Inf last and equal to _count, _sum present. */
function checkHistogram(p: Parsed, name: string): Map<string, { buckets: [number, number][]; sum: number; count: number; labels: Record<string, string> }> {
  const f = p.families.get(name)!;
  expect(f.type).toBe('histogram');
  const series = new Map<string, { buckets: [number, number][]; sum: number; count: number; labels: Record<string, string> }>();
  const keyOf = (l: Record<string, string>) => JSON.stringify(Object.entries(l).filter(([k]) => k !== 'le').sort());
  for (const s of f.samples) {
    const k = keyOf(s.labels);
    const e = series.get(k) ?? { buckets: [], sum: NaN, count: NaN, labels: Object.fromEntries(Object.entries(s.labels).filter(([x]) => x !== 'le')) };
    series.set(k, e);
    if (s.name.endsWith('_bucket')) e.buckets.push([parseValue(s.labels.le), s.value]);
    else if (s.name.endsWith('_sum')) e.sum = s.value;
    else e.count = s.value;
  }
  for (const [k, e] of series) {
    expect(e.buckets.length, k).toBeGreaterThan(1);
    for (let i = 1; i < e.buckets.length; i++) {
      expect(e.buckets[i][0], k).toBeGreaterThan(e.buckets[i - 1][0]);
      expect(e.buckets[i][1], k).toBeGreaterThanOrEqual(e.buckets[i - 1][1]);
    }
    expect(e.buckets.at(-1)![0], k).toBe(Infinity);
    expect(e.buckets.at(-1)![1], k).toBe(e.count);
    expect(Number.isFinite(e.sum), k).toBe(true);
    expect(e.sum, k).toBeGreaterThanOrEqual(0);
  }
  return series;
}

const value = (p: Parsed, name: string, labels: Record<string, string>) =>
  p.families.get(name.replace(/_(sum|count)$/, ''))?.samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;

describe('GET /metrics', () => {
  test('the text format, parsed line by line: API latency by route pattern and status, ETL figures from the ledger', async () => {
    const key = await newKey(fx.db);
    const cpf = '52998224725';
    expect((await call(fx.api.base, `/v1/car/${GO1}`, { key })).status).toBe(200);
    expect((await call(fx.api.base, `/v1/car/${GO1}`, { key })).status).toBe(200);
    expect((await call(fx.api.base, `/v1/car/GO-5208707-${'0'.repeat(32)}`, { key })).status).toBe(404);
    expect((await call(fx.api.base, `/v1/car/by-document/${cpf}`, { key })).status).toBe(200);
    expect((await call(fx.api.base, `/v1/no/such/route/${cpf}`, { key })).status).toBe(404);

    const r = await call(fx.api.base, '/metrics');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(r.headers.get('x-ratelimit-limit')).toBeNull(); // not metered
    const p = parseExposition(r.text);

    const lat = checkHistogram(p, 'agro_api_request_duration_seconds');
    const lookup = [...lat.values()].find((s) => s.labels.route === '/v1/car/:numero' && s.labels.method === 'GET' && s.labels.status === '200')!;
    expect(lookup.count).toBeGreaterThanOrEqual(2);
    expect([...lat.values()].find((s) => s.labels.route === '/v1/car/:numero' && s.labels.status === '404')!.count).toBeGreaterThanOrEqual(1);
    expect([...lat.values()].find((s) => s.labels.route === 'unmatched' && s.labels.status === '404')!.count).toBeGreaterThanOrEqual(1);
    expect([...lat.values()].some((s) => s.labels.route === '/v1/car/by-document/:documento')).toBe(true);
    // Route patterns only: no CAR number, document, key or key id anywhere.
    expect(r.text).not.toContain(GO1);
    expect(r.text).not.toContain(cpf);
    expect(r.text).not.toMatch(/ck_(live|test)_/);
    expect(r.text).not.toContain('key_');

    // ETL figures agree with the ledger.
    const runs = (await fx.db.pool.query(`SELECT pipeline, status, count(*)::int AS n FROM etl.runs GROUP BY 1, 2`)).rows;
    expect(runs.length).toBeGreaterThan(0);
    for (const x of runs) expect(value(p, 'agro_etl_runs', { pipeline: x.pipeline, status: x.status })).toBe(x.n);
    const loaded = (await fx.db.pool.query(`SELECT sum(rows_loaded)::int AS n FROM etl.runs WHERE pipeline = 'sicar' AND finished_at IS NOT NULL`)).rows[0].n;
    expect(value(p, 'agro_etl_rows_loaded_total', { pipeline: 'sicar' })).toBe(loaded);
    expect(p.families.get('agro_etl_rows_loaded_total')!.type).toBe('counter');
    const stages = (await fx.db.pool.query(
      `SELECT count(*)::int AS n, sum(duration_ms)::float8 / 1000 AS s FROM etl.run_stages s JOIN etl.runs r USING (run_id) WHERE r.pipeline = 'sicar' AND s.stage = 'download' AND s.status = 'done'`,
    )).rows[0];
    expect(value(p, 'agro_etl_stage_duration_seconds_count', { pipeline: 'sicar', stage: 'download' })).toBe(stages.n);
    expect(value(p, 'agro_etl_stage_duration_seconds_sum', { pipeline: 'sicar', stage: 'download' })).toBeCloseTo(stages.s, 6);
    // The latest finished run's stage, in seconds; the snapshot's age from its published_at (a few seconds of slack).
    const lastPublish = (await fx.db.pool.query(
      `SELECT s.duration_ms::float8 / 1000 AS s FROM etl.runs r JOIN etl.run_stages s USING (run_id)
        WHERE r.pipeline = 'sicar' AND r.scope = 'GO' AND r.finished_at IS NOT NULL AND s.stage = 'publish' ORDER BY r.run_id DESC LIMIT 1`,
    )).rows[0].s;
    expect(value(p, 'agro_etl_last_run_stage_duration_seconds', { pipeline: 'sicar', scope: 'GO', stage: 'publish', status: 'done' })).toBeCloseTo(lastPublish, 6);
    const age = async (dataset: string, uf: string | null) => (await fx.db.pool.query(
      `SELECT extract(epoch FROM now() - published_at)::float8 AS s FROM serving.snapshots WHERE dataset = $1 AND uf IS NOT DISTINCT FROM $2 AND status = 'current'`, [dataset, uf],
    )).rows[0].s as number;
    for (const [dataset, uf] of [['sicar', 'GO'], ['funai-tis', null]] as const) {
      const got = value(p, 'agro_snapshot_age_seconds', { dataset, scope: uf ?? 'BR' })!;
      expect(Math.abs(got - (await age(dataset, uf))), `${dataset} age ${got}`).toBeLessThan(5);
    }
    expect(value(p, 'agro_source_expected_cadence_seconds', { dataset: 'sicar' })).toBe(86_400);
    // One freshness state set per scheduled source: exactly one of the three is 1.
    const fresh = p.families.get('agro_source_freshness')!.samples.filter((s) => s.labels.dataset === 'sicar' && s.labels.scope === 'GO');
    expect(fresh.map((s) => s.labels.freshness).sort()).toEqual(['critical', 'fresh', 'stale']);
    expect(fresh.reduce((a, s) => a + s.value, 0)).toBe(1);
    expect(value(p, 'agro_api_history_dropped_rows_total', {})).toBe(0);
  });

  test('with AGRO_METRICS_TOKEN set, only that bearer token reads it', async () => {
    const cfg = loadConfig({ ...process.env, DATABASE_URL: fx.db.url, AGRO_DATA_DIR: fx.db.dataDir, AGRO_METRICS_TOKEN: 'scrape-me-9f2c' });
    const api = await startApi(cfg, fx.db.url, fx.db);
    try {
      expectEnvelope(await call(api.base, '/metrics'), 401, 'unauthorized');
      expectEnvelope(await call(api.base, '/metrics', { headers: { authorization: 'Bearer scrape-me-9f2' } }), 401, 'unauthorized');
      expectEnvelope(await call(api.base, '/metrics', { key: await newKey(fx.db) }), 401, 'unauthorized'); // an API key is not the token
      const ok = await call(api.base, '/metrics', { headers: { authorization: 'Bearer scrape-me-9f2c' } });
      expect(ok.status).toBe(200);
      parseExposition(ok.text);
    } finally {
      await api.close();
    }
  });

  test('registry: label values escaped (backslash, quote, line feed) and read back; buckets cumulative', () => {
    const h = new Histogram('t_seconds', 'a "test"\nwith a line feed \\ and a backslash', ['route', 'status'], [0.1, 1]);
    const nasty = 'a\\b"c\nd';
    h.observe({ route: nasty, status: '200' }, 0.05);
    h.observe({ route: nasty, status: '200' }, 0.5);
    h.observe({ route: nasty, status: '200' }, 5);
    h.observe({ route: '/x', status: '500' }, 0.1); // on a bound: counted in it (le is "less or equal")
    const text = h.render() + renderFamily({ name: 't_total', type: 'counter', help: 'plain', samples: [{ labels: { who: nasty }, value: 3 }] });
    expect(text).toContain('route="a\\\\b\\"c\\nd"');
    expect(text).toContain('# HELP t_seconds a "test"\\nwith a line feed \\\\ and a backslash\n');
    const p = parseExposition(text);
    const series = checkHistogram(p, 't_seconds');
    const s = [...series.values()].find((x) => x.labels.route === nasty)!;
    expect(s.buckets).toEqual([[0.1, 1], [1, 2], [Infinity, 3]]);
    expect(s.sum).toBeCloseTo(5.55, 10);
    expect([...series.values()].find((x) => x.labels.route === '/x')!.buckets).toEqual([[0.1, 1], [1, 1], [Infinity, 1]]);
    expect(value(p, 't_total', { who: nasty })).toBe(3);
    expect(() => renderFamily({ name: 'bad-name', type: 'gauge', help: 'x', samples: [] })).toThrow(/not valid/);
    expect(() => new Histogram('t2', 'x', ['le'], [1])).toThrow(/not valid/);
  });
});
