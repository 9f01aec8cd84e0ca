// Configuration, resolved once at start-up into one frozen object.
// Core code receives a Config and never reads process.env itself.
import path from 'node:path';
import { DEFAULT_ZIP_LIMITS, type ZipLimits } from './etl/archive.ts';
import { ROOT_DIR } from './sql.ts';

export interface QualityThresholds {
  /** Largest allowed drop in row count against the current snapshot (0..1). */
  maxRowDrop: number;
  /** Largest allowed share of rejected rows (0..1). */
  maxRejectedShare: number;
}

export interface Config {
  /** Root of raw downloads, reports and the embedded cluster. */
  dataDir: string;
  /** Explicit DATABASE_URL; null means "use the embedded cluster". */
  databaseUrl: string | null;
  /** AGRO_SANDBOX_DATABASE_URL; null means the live database's name + `_sandbox`. */
  sandboxDatabaseUrl: string | null;
  /**
   * DATABASE_READ_URL: a streaming replica the API reads its data from (live keys); keys,
   * metering, history and everything written stay on the primary. null: the primary.
   */
  databaseReadUrl: string | null;
  /** Port of the embedded cluster (loopback only). */
  embeddedPort: number;
  /** AGRO_DB_PORT was set: a taken port is an error, not a reason to pick another one. */
  embeddedPortExplicit: boolean;
  logLevel: string;
  /** LOG_FORMAT (json or auto, any case): 'json' always writes JSON logs; 'auto' writes readable lines when stderr is a terminal. */
  logFormat: 'json' | 'auto';
  /** TERM=dumb: the terminal takes no escape codes (the progress line clears with spaces). */
  dumbTerminal: boolean;
  /** The scheduler's one config file (AGRO_SCHEDULE_FILE, default agro.schedule.json). */
  scheduleFile: string;
  /** AGRO_SCHEDULE_FILE was set: a missing file is an error, not the defaults. */
  scheduleFileExplicit: boolean;
  port: number;
  host: string;
  /** Snapshots kept per dataset (and per state for sicar). */
  retention: number;
  quality: QualityThresholds;
  /**
   * Publishing waits for readers at most `publishLockTimeoutMs` per attempt (a pending view
   * lock queues every new reader), retries with backoff, and gives up after `publishMaxWaitMs`.
   */
  publishLockTimeoutMs: number;
  publishMaxWaitMs: number;
  /** Per-geometry repair budget: a feature that takes longer is rejected, not the load. */
  repairTimeoutMs: number;
  /** Descriptive User-Agent for government hosts (FUNAI answers 403 without one). */
  userAgent: string;
  /**
   * Key of documento_hmac (keyed hash of CPF/CNPJ for equality lookups across datasets).
   * AGRO_HMAC_KEY in production; a fixed development key otherwise (reported in quality reports).
   */
  hmacKey: string;
  hmacKeySource: 'env' | 'development';
  /** States the nightly SICAR load covers (AGRO_SICAR_UFS, comma-separated; default all 27). */
  sicarUfs: readonly string[];
  /** Official source locations, overridable per pipeline with AGRO_SOURCE_<PIPELINE>. */
  sources: Readonly<Record<string, string>>;
  /**
   * Plain HTTP downloads (a zip, a CSV, a CKAN or localidades answer): no byte for `stallTimeoutMs`
   * aborts an attempt, `retries` attempts without progress fail the run (AGRO_DOWNLOAD_*). A silent
   * agency held the night 5 × 60 s with no way to shorten it.
   */
  download: Readonly<{ stallTimeoutMs: number; retries: number; backoffMs: number }>;
  /** Bounds on what one zip may inflate to (AGRO_MAX_UNZIPPED_BYTES, AGRO_MAX_UNZIP_RATIO). */
  zip: Readonly<ZipLimits>;
  /** SICAR's GeoServer WFS (route B: AREA_IMOVEL without a CAPTCHA); endpoint in sources['sicar-wfs']. */
  sicarWfs: WfsSettings;
  /**
   * IBAMA's ArcGIS REST layer (the embargoes' second route, SOURCES.md §3.1): the same paging
   * machinery and knobs (AGRO_IBAMA_REST_*), modern TLS by default; endpoint in sources['ibama-embargos-rest'].
   */
  ibamaRest: WfsSettings;
  /** HTTP API: per-statement timeout (AGRO_API_STATEMENT_TIMEOUT_MS) and pool size (AGRO_API_POOL). */
  api: Readonly<{ statementTimeoutMs: number; poolSize: number; bodyLimitBytes: number; historyRetentionMonths: number; keyRotationGraceHours: number; metricsToken: string | null; requestTimeoutMs: number; authFailuresPerMinute: number; authFailureAddresses: number; keyMaxInFlight: number;
    /**
     * AGRO_TRUST_PROXY: which peers' X-Forwarded-Proto/-For are believed (fastify's trustProxy): false (unset),
     * true (any: only when nothing but the proxy can reach the API), a hop count, or addresses/CIDRs.
     */
    trustProxy: boolean | number | readonly string[] }>;
  /** Receita CNPJ month downloads (the share's WebDAV URL is sources['receita-cnpj']). */
  receitaCnpj: Readonly<ReceitaCnpjConfig>;
  /** Webhook delivery: AGRO_WEBHOOKS_ALLOW_PRIVATE=1 permits private/loopback targets (development, tests); the outbox poll interval. */
  webhooks: Readonly<{ allowPrivate: boolean; pollMs: number }>;
}

/** How the WFS client talks to a slow GeoServer behind legacy TLS (SOURCES.md §1.7, §2.1). */
export interface WfsSettings {
  /** Features per GetFeature page (count). */
  pageSize: number;
  /** Sort that keeps pages from shifting between requests (WFS 2.0 sortBy). */
  sortBy: string;
  /** CRS asked of the server; its EPSG code is the source SRID (transformed to 4326 in SQL). */
  srsName: string;
  /** Coordinate order of the served geometries: 'auto' decides per page from the data (see wfs-pages.ts). */
  axisOrder: 'auto' | 'lon-lat' | 'lat-lon';
  connectTimeoutMs: number;
  /** No byte for this long (headers or body) aborts the attempt. BA/MG/MT need ~180 s. */
  stallTimeoutMs: number;
  /** A whole page must arrive within this. */
  pageTimeoutMs: number;
  /** Consecutive attempts that brought no bytes before giving up; any byte received resets it. */
  retries: number;
  backoffMs: number;
  maxBackoffMs: number;
  /** Stored pages of an unfinished (or finished) download are reused for this long. */
  resumeMaxAgeMs: number;
  /**
   * TLS for this host only: SICAR's servers need legacy settings, every other host keeps the
   * defaults. Node 20's OpenSSL 3 already runs at security level 1, and TLS 1.0/1.1 handshakes
   * need level 0, so the defaults are TLSv1 + DEFAULT:@SECLEVEL=0 + legacy renegotiation.
   * Certificates are always verified; `ca` (a PEM file) pins the chain when the public one fails.
   */
  tls: { minVersion: string; ciphers: string; legacyRenegotiation: boolean; ca: string | null };
  /** Prefix of these settings' environment variables (named in error messages). */
  envPrefix: string;
}

export interface ReceitaCnpjConfig {
  /** Nextcloud public-share token (Basic-auth user, empty password); AGRO_CNPJ_SHARE_TOKEN. */
  shareToken: string;
  /** Parallel downloads at the start (steps down to 2, then 1, when transfers stall). */
  parallel: number;
  /** Stalls that make parallelism step down. */
  stallsPerStep: number;
  /** Attempts without new bytes before a file fails. */
  retries: number;
  stallTimeoutMs: number;
  backoffMs: number;
  /** Interval of progress lines while downloading and loading. */
  progressMs: number;
}

/** Official default locations; each is config, never a constant in code (hosts move). */
const OFFICIAL_SOURCES: Record<string, string> = {
  sicar: 'https://consultapublica.car.gov.br/publico/estados/downloadBase',
  // Route B (no CAPTCHA, AREA_IMOVEL only): layer sicar:sicar_imoveis_<uf>. AGRO_SOURCE_SICAR_WFS.
  'sicar-wfs': 'https://geoserver.car.gov.br/geoserver/sicar/wfs',
  'ibama-embargos':
    'https://dadosabertos.ibama.gov.br/dados/SIFISC/termo_embargo/termo_embargo/termo_embargo.csv',
  // ArcGIS REST layer, taken when the CSV download fails (SOURCES §3.7); AGRO_SOURCE_IBAMA_EMBARGOS_REST, 'off' turns it off.
  'ibama-embargos-rest': 'https://pamgia.ibama.gov.br/server/rest/services/01_Publicacoes_Bases/adm_embargos_ibama_a/FeatureServer/0',
  // ICMBio embargoes in federal conservation units (SOURCES §3, URL UNVERIFIED); AGRO_SOURCE_ICMBIO_EMBARGOS.
  'icmbio-embargos':
    'https://www.gov.br/icmbio/pt-br/assuntos/dados_geoespaciais/mapa-tematico-e-dados-geoestatisticos-das-unidades-de-conservacao-federais/embargos_icmbio.zip',
  'funai-tis':
    'https://geoserver.funai.gov.br/geoserver/Funai/ows?service=WFS&version=1.0.0&request=GetFeature&typeName=Funai%3Atis_poligonais&maxFeatures=10000&outputFormat=SHAPE-ZIP',
  // Resource ids change with every CNUC release (SOURCES §5.1): the newest shp_cnuc_YYYY_MM.zip is
  // discovered through CKAN. Fallback, a file's own URL, e.g. the 2024_02 release:
  // https://dados.mma.gov.br/dataset/44b6dc8a-dc82-4a84-8d95-1b0da7c85dac/resource/9ec98f66-44ad-4397-8583-a1d9cc3a9835/download/shp_cnuc_2024_02.zip
  'cnuc-ucs': 'https://dados.mma.gov.br/api/3/action/package_show?id=44b6dc8a-dc82-4a84-8d95-1b0da7c85dac',
  'incra-quilombos': 'https://certificacao.incra.gov.br/csv_shp/zip/%C3%81reas%20de%20Quilombolas.zip',
  // DNIT Cloud (Nextcloud) public share over WebDAV: the share token is the user name.
  'dnit-snv': 'https://oTpPRmYs5AAdiNr:@servicos.dnit.gov.br/dnitcloud/public.php/webdav/SNV%20Bases%20Geom%C3%A9tricas%20(2013-Atual)%20(SHP)/',
  // CKAN discovery: every season CSV and the perennials file (resource ids change every season).
  zarc: 'https://dados.agricultura.gov.br/api/3/action/package_show?id=tabua-de-risco-zoneamento-agricola-de-risco-climatico',
  // Nextcloud public share (SOURCES §10.1): WebDAV root; the token is AGRO_CNPJ_SHARE_TOKEN.
  'receita-cnpj': 'https://arquivos.receitafederal.gov.br/public.php/webdav/',
  'ibge-municipios':
    'https://geoftp.ibge.gov.br/organizacao_do_territorio/malhas_territoriais/malhas_municipais/municipio_2024/Brasil/BR_Municipios_2024.zip',
  // The official municipality list a downloaded mesh is joined with (SOURCES §9.7); 'none': not used.
  'ibge-localidades': 'https://servicodados.ibge.gov.br/api/v1/localidades/municipios',
};

const ALL_UFS = 'AC,AL,AM,AP,BA,CE,DF,ES,GO,MA,MG,MS,MT,PA,PB,PE,PI,PR,RJ,RN,RO,RR,RS,SC,SE,SP,TO';
/** The 27 federative units (26 states and the Federal District). */
export const KNOWN_UFS: readonly string[] = Object.freeze(ALL_UFS.split(','));

/** Used when AGRO_HMAC_KEY is not set: development and tests only. */
export const DEV_HMAC_KEY = 'agro-dev-hmac-key-not-for-production';

/**
 * A number from the environment variable `name`, or `fallback` when unset or empty. Not a number,
 * or below `min` (none of these settings may be negative), is a configuration error naming the
 * variable: a mistyped value is refused at start, never read as something else (it was clamped
 * to the floor without a word, and a typo's message named no variable).
 */
function num(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0): number {
  const v = env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`${name}: not a number: ${v}`);
  if (n < min) throw new Error(`${name} must be at least ${min}: ${v}`);
  return n;
}

/**
 * AGRO_SICAR_UFS: states, any case, comma-separated, each once; a typo fails at start, not when
 * the night reaches SICAR. A value naming no state (',', spaces) is one too: it planned no run.
 */
function sicarUfs(v: string | undefined): string[] {
  const ufs = [...new Set((v || ALL_UFS).split(',').map((u) => u.trim().toUpperCase()).filter(Boolean))];
  const bad = ufs.find((u) => !KNOWN_UFS.includes(u));
  if (bad !== undefined) throw new Error(`AGRO_SICAR_UFS: "${bad}" is not a Brazilian state (known: ${ALL_UFS})`);
  if (!ufs.length) throw new Error(`AGRO_SICAR_UFS names no state: ${JSON.stringify(v)} (unset: all of them)`);
  return ufs;
}

/** The logger's levels (pino's, any case); another LOG_LEVEL is a configuration error, not a crash when the logger starts. */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
function logLevel(v: string | undefined): string {
  const level = (v || 'info').trim().toLowerCase();
  if (!LOG_LEVELS.includes(level)) throw new Error(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}: ${v}`);
  return level;
}

/** LOG_FORMAT (any case): unset, empty or auto → auto; json; anything else (a typo) a configuration error, not a silent auto. */
const LOG_FORMATS = ['json', 'auto'] as const;
function logFormat(v: string | undefined): Config['logFormat'] {
  const f = (v || 'auto').trim().toLowerCase();
  const known = LOG_FORMATS.find((x) => x === f);
  if (!known) throw new Error(`LOG_FORMAT must be ${LOG_FORMATS.join(' or ')}: ${v}`);
  return known;
}

/** AGRO_TRUST_PROXY: '' / 0 / false → false, true → true, a positive integer → hops, else a comma-separated list of addresses or CIDRs. */
export function trustProxy(v: string | undefined): boolean | number | readonly string[] {
  const t = (v ?? '').trim();
  if (t === '' || t === '0' || /^false$/i.test(t)) return false;
  if (/^true$/i.test(t)) return true;
  if (/^\d+$/.test(t)) return Number(t);
  return Object.freeze(t.split(',').map((a) => a.trim()).filter(Boolean));
}

/**
 * Why a source location is none contract §1 takes (a path, a file:// or an http(s):// URL), or
 * null: another scheme (ftp://host/x.zip) is refused wherever a source is given (--source, a
 * --series-file line, a schedule job, AGRO_SOURCE_<PIPELINE>), not read as the relative path ./ftp:/host/x.zip.
 */
export function sourceSchemeProblem(uri: string): string | null {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(uri)?.[1];
  return scheme && !/^(https?|file)$/i.test(scheme) ? `takes a path, a file:// or an http(s):// URL, not ${scheme}://` : null;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): Config {
  const sources: Record<string, string> = { ...OFFICIAL_SOURCES };
  for (const [k, v] of Object.entries(env)) {
    const m = /^AGRO_SOURCE_(.+)$/.exec(k);
    if (!m || !v) continue;
    const problem = sourceSchemeProblem(v);
    if (problem) throw new Error(`${k} ${problem}`);
    sources[m[1].toLowerCase().replace(/_/g, '-')] = v;
  }
  return Object.freeze({
    // The defaults are the checkout's, wherever agro is started from (a crontab starts it in
    // $HOME, systemd in /): a second cluster and raw store under <cwd>/.data loaded data the API
    // never served. A path given in the environment is the caller's, relative to where they are.
    dataDir: env.AGRO_DATA_DIR ? path.resolve(cwd, env.AGRO_DATA_DIR) : path.join(ROOT_DIR, '.data'),
    databaseUrl: env.DATABASE_URL || null,
    sandboxDatabaseUrl: env.AGRO_SANDBOX_DATABASE_URL || null,
    databaseReadUrl: env.DATABASE_READ_URL || null,
    embeddedPort: num(env, 'AGRO_DB_PORT', 54329),
    embeddedPortExplicit: !!env.AGRO_DB_PORT,
    logLevel: logLevel(env.LOG_LEVEL),
    logFormat: logFormat(env.LOG_FORMAT),
    dumbTerminal: env.TERM === 'dumb',
    scheduleFile: env.AGRO_SCHEDULE_FILE ? path.resolve(cwd, env.AGRO_SCHEDULE_FILE) : path.join(ROOT_DIR, 'agro.schedule.json'),
    scheduleFileExplicit: !!env.AGRO_SCHEDULE_FILE,
    port: num(env, 'PORT', 8080),
    host: env.HOST || '127.0.0.1',
    retention: num(env, 'AGRO_RETENTION', 3, 1),
    quality: Object.freeze({
      maxRowDrop: num(env, 'AGRO_QUALITY_MAX_ROW_DROP', 0.2),
      maxRejectedShare: num(env, 'AGRO_QUALITY_MAX_REJECTED', 0.01),
    }),
    publishLockTimeoutMs: num(env, 'AGRO_PUBLISH_LOCK_TIMEOUT_MS', 250, 1),
    publishMaxWaitMs: num(env, 'AGRO_PUBLISH_MAX_WAIT_MS', 30_000, 0),
    repairTimeoutMs: num(env, 'AGRO_REPAIR_TIMEOUT_MS', 30_000),
    userAgent: env.AGRO_USER_AGENT || 'agro-data/0.1 (+https://github.com/agro-data; data engineering loader)',
    hmacKey: env.AGRO_HMAC_KEY || DEV_HMAC_KEY,
    hmacKeySource: env.AGRO_HMAC_KEY ? 'env' : 'development',
    sicarUfs: Object.freeze(sicarUfs(env.AGRO_SICAR_UFS)),
    sources: Object.freeze(sources),
    download: Object.freeze({
      stallTimeoutMs: num(env, 'AGRO_DOWNLOAD_STALL_TIMEOUT_MS', 60_000, 100),
      retries: num(env, 'AGRO_DOWNLOAD_RETRIES', 5, 1),
      backoffMs: num(env, 'AGRO_DOWNLOAD_BACKOFF_MS', 1_000, 0),
    }),
    zip: Object.freeze({
      maxBytes: num(env, 'AGRO_MAX_UNZIPPED_BYTES', DEFAULT_ZIP_LIMITS.maxBytes),
      maxRatio: num(env, 'AGRO_MAX_UNZIP_RATIO', DEFAULT_ZIP_LIMITS.maxRatio),
      ratioFloor: DEFAULT_ZIP_LIMITS.ratioFloor,
    }),
    sicarWfs: Object.freeze(wfsSettings(env)),
    ibamaRest: Object.freeze(wfsSettings(env, 'AGRO_IBAMA_REST', IBAMA_REST_DEFAULTS)),
    api: Object.freeze({
      statementTimeoutMs: num(env, 'AGRO_API_STATEMENT_TIMEOUT_MS', 10_000),
      poolSize: num(env, 'AGRO_API_POOL', 16, 1),
      bodyLimitBytes: num(env, 'AGRO_API_BODY_LIMIT', 1_048_576),
      historyRetentionMonths: num(env, 'AGRO_HISTORY_RETENTION_MONTHS', 13, 1),
      keyRotationGraceHours: num(env, 'AGRO_KEY_ROTATION_GRACE_HOURS', 24, 0),
      // GET /metrics needs `Authorization: Bearer <this>` when set; open when not (src/api/metrics.ts).
      metricsToken: env.AGRO_METRICS_TOKEN || null,
      // A request (headers and body) must arrive within this: a client that trickles bytes is cut off
      // with a 408. 60 s lets a 1 MB body through at 17 KB/s.
      requestTimeoutMs: num(env, 'AGRO_API_REQUEST_TIMEOUT_MS', 60_000, 100),
      // Failed authentications (and open /metrics scrapes) a client address may make per minute
      // before it is refused with a 429 (src/platform/auth-failures.ts); 0 turns it off. The
      // addresses tracked are bounded (about 100 bytes each).
      authFailuresPerMinute: num(env, 'AGRO_API_AUTH_FAILURES_PER_MINUTE', 30, 0),
      authFailureAddresses: num(env, 'AGRO_API_AUTH_FAILURE_ADDRESSES', 10_000, 100),
      // Database connections one key's requests in flight may hold at once (an enrichment counts
      // its parallel statements; src/platform/in-flight.ts): by default half the pool, so that
      // one key cannot starve the others.
      keyMaxInFlight: num(env, 'AGRO_API_KEY_MAX_IN_FLIGHT', Math.floor(num(env, 'AGRO_API_POOL', 16, 1) / 2), 1),
      // Behind a TLS-terminating proxy: its X-Forwarded-Proto makes the panel's cookie Secure, its
      // X-Forwarded-For is the address failed authentications count on. Unset, both are ignored.
      trustProxy: trustProxy(env.AGRO_TRUST_PROXY),
    }),
    receitaCnpj: Object.freeze({
      shareToken: env.AGRO_CNPJ_SHARE_TOKEN || 'YggdBLfdninEJX9',
      parallel: num(env, 'AGRO_CNPJ_PARALLEL', 4, 1),
      stallsPerStep: num(env, 'AGRO_CNPJ_STALLS_PER_STEP', 2, 1),
      retries: num(env, 'AGRO_CNPJ_RETRIES', 32, 1),
      // a floor as AGRO_DOWNLOAD_STALL_TIMEOUT_MS's: 0 was no listing timeout (req.setTimeout(0)) and every transfer 'too slow'
      stallTimeoutMs: num(env, 'AGRO_CNPJ_STALL_TIMEOUT_MS', 180_000, 100),
      backoffMs: num(env, 'AGRO_CNPJ_BACKOFF_MS', 2_000),
      progressMs: num(env, 'AGRO_CNPJ_PROGRESS_MS', 15_000, 100),
    }),
    webhooks: Object.freeze({
      allowPrivate: env.AGRO_WEBHOOKS_ALLOW_PRIVATE === '1',
      pollMs: num(env, 'AGRO_WEBHOOKS_POLL_MS', 1_000, 50),
    }),
  });
}

const AXIS_ORDERS = ['auto', 'lon-lat', 'lat-lon'] as const;

/** Defaults of one paged service's settings where they differ between services. */
interface PagedDefaults {
  pageSize: number;
  sortBy: string;
  axisOrder: WfsSettings['axisOrder'];
  stallTimeoutMs: number;
  pageTimeoutMs: number;
  tls: { minVersion: string; ciphers: string; legacyRenegotiation: boolean };
}

/** SICAR's GeoServer: slow pages (BA/MG/MT), legacy TLS (SOURCES §1.7). */
const SICAR_WFS_DEFAULTS: PagedDefaults = {
  pageSize: 5000, sortBy: 'cod_imovel ASC', axisOrder: 'auto', stallTimeoutMs: 300_000, pageTimeoutMs: 1_800_000,
  tls: { minVersion: 'TLSv1', ciphers: 'DEFAULT:@SECLEVEL=0', legacyRenegotiation: true },
};

/** IBAMA's ArcGIS server: pages of 1000 (or the layer's maxRecordCount), GeoJSON always lon/lat, Node's TLS defaults. */
const IBAMA_REST_DEFAULTS: PagedDefaults = {
  pageSize: 1000, sortBy: 'OBJECTID', axisOrder: 'lon-lat', stallTimeoutMs: 120_000, pageTimeoutMs: 600_000,
  tls: { minVersion: 'TLSv1.2', ciphers: '', legacyRenegotiation: false },
};

function wfsSettings(env: NodeJS.ProcessEnv, prefix = 'AGRO_SICAR_WFS', d: PagedDefaults = SICAR_WFS_DEFAULTS): WfsSettings {
  const v = (name: string) => env[`${prefix}_${name}`];
  const axis = v('AXIS_ORDER') || d.axisOrder;
  if (!(AXIS_ORDERS as readonly string[]).includes(axis)) throw new Error(`${prefix}_AXIS_ORDER must be one of ${AXIS_ORDERS.join(', ')}: ${axis}`);
  return {
    pageSize: num(env, `${prefix}_PAGE_SIZE`, d.pageSize, 1),
    sortBy: v('SORT_BY') || d.sortBy,
    srsName: v('SRS') || 'EPSG:4674',
    axisOrder: axis as WfsSettings['axisOrder'],
    connectTimeoutMs: num(env, `${prefix}_CONNECT_TIMEOUT_MS`, 30_000),
    stallTimeoutMs: num(env, `${prefix}_STALL_TIMEOUT_MS`, d.stallTimeoutMs),
    pageTimeoutMs: num(env, `${prefix}_PAGE_TIMEOUT_MS`, d.pageTimeoutMs),
    retries: num(env, `${prefix}_RETRIES`, 8, 1),
    backoffMs: num(env, `${prefix}_BACKOFF_MS`, 2_000),
    maxBackoffMs: num(env, `${prefix}_MAX_BACKOFF_MS`, 120_000),
    resumeMaxAgeMs: num(env, `${prefix}_RESUME_HOURS`, 20) * 3_600_000,
    tls: Object.freeze({
      minVersion: v('TLS_MIN_VERSION') || d.tls.minVersion,
      ciphers: v('TLS_CIPHERS') || d.tls.ciphers,
      legacyRenegotiation: (v('TLS_LEGACY_RENEGOTIATION') ?? (d.tls.legacyRenegotiation ? '1' : '0')) !== '0',
      ca: v('TLS_CA') || null,
    }),
    envPrefix: prefix,
  };
}
