// The quality report of one load and the gate that decides whether it may publish.
import type { QualityThresholds } from '../config.ts';
import type { AgroError } from '../errors.ts';
import type { MissingWhere } from './read/staging.ts';
import type { RepairResult } from './repair.ts';
import type { Publication } from './report-status.ts';
import type { TextColumnFinding } from './text-checks.ts';
import type { VectorLayer } from './vector-reader.ts';
import type { RowExample, VerdictExamples } from './verdict-examples.ts';
import { renderReportHtml } from './report-html.ts';

/** Key under which countVerdicts attaches examples to its counts (see verdict-examples.ts). */
export const VERDICT_EXAMPLES = Symbol('verdict examples');

/** What a pipeline observed while reading and normalising. */
export interface QualityFacts {
  /** Rows that failed validation, by reason (count toward the rejected share). */
  rejected: Record<string, number>;
  /** Rows dropped by design, by reason (other state, duplicate key): reported, not rejected. */
  dropped: Record<string, number>;
  geometry: {
    invalid: number;
    repaired: number;
    rejected: number;
    empty: number;
    srid: number | null;
    sridAssumed: boolean;
    outsideBrazil: number;
  };
  fields: {
    /** Optional canonical columns absent from the source (loaded as NULL). */
    missingOptional: string[];
    /** Source columns with no mapping (kept in `extra`). */
    unknown: string[];
    /** Null or empty values per canonical column among loaded rows. */
    empty: Record<string, number>;
    /** Values that did not parse, per column: loaded as NULL, source text kept in `extra` (set when any). */
    unparsed?: Record<string, number>;
    /** Runs of asterisks (a DBF numeric overflow) per column: no value, loaded as NULL (set when any). */
    overflowed?: Record<string, number>;
    /** DBF text cells with text after a NUL, per column: loaded up to the NUL (as GDAL reads them), the rest lost (set when any). */
    cutAtNul?: Record<string, number>;
  };
  dates: {
    /** Values that are neither a valid date nor a known placeholder. */
    unparseable: Record<string, number>;
    /** Placeholders such as "", "0", "00/00/0000" turned into NULL. */
    placeholders: Record<string, number>;
    /** Dates after the source's release date (contract §3): NULL, source text kept in `extra` (set when any). */
    implausible?: Record<string, number>;
  };
  encoding: { name: string | null; assumed: boolean; replacementChars: number };
  layers: { name: string; features: number; srid: number; encoding: string; decided_by?: string }[];
  /** The engine's text check of the snapshot's tables (text-checks.ts), added by the quality stage. */
  text?: { scanned: Record<string, number>; findings: TextColumnFinding[] };
  /** Up to ten example rows per rejection reason (source, row, values; CPFs masked). */
  examples?: Record<string, RowExample[]>;
  /** Where repaired and rejected geometries lie (lon, lat), for the report's map. */
  locations?: VerdictExamples['locations'];
  /** Pipeline-specific rule failures (e.g. U+FFFD in FUNAI names). */
  failures: GateFailure[];
  notes: string[];
}

export interface GateFailure {
  rule: string;
  message: string;
  value?: number;
  threshold?: number;
  /** false: --force cannot override this rule (nothing could be loaded); absent: it can. */
  forceable?: boolean;
}

/**
 * Contract §2 "required fields missing": a source without a required column (a key, the
 * geometry). Its code is the reader's error code; it names the fields, the spellings looked
 * for and where (file or layer, the detected encoding and delimiter of a CSV). No row can be
 * loaded without them, so it is the one rule --force cannot override.
 */
export interface MissingFieldFailure extends GateFailure, MissingWhere {
  rule: 'required_field_missing';
  forceable: false;
  fields: string[];
  looked_for: Record<string, string[]>;
}

/** The gate rule made of a reader's `required_field_missing` error (read/staging.ts requiredFieldMissing). */
export function missingFieldFailure(e: AgroError): MissingFieldFailure {
  const d = e.details as Partial<MissingFieldFailure>;
  const where: MissingWhere = {};
  for (const k of ['file', 'layer', 'encoding', 'delimiter'] as const) if (typeof d[k] === 'string') where[k] = d[k];
  return { rule: 'required_field_missing', message: e.message, forceable: false, fields: d.fields ?? [], looked_for: d.looked_for ?? {}, ...where };
}

/** The rules among `failures` that --force cannot override. */
export const unforceable = (failures: readonly GateFailure[]) => failures.filter((f) => f.forceable === false);

export interface ChangeSummary {
  previous_snapshot_id: number | null;
  previous_rows: number | null;
  rows: number;
  delta_share: number | null;
  added: number | null;
  removed: number | null;
}

/**
 * A rule of the gate as it was measured on the load: the value, the threshold it is held to
 * (`above`: the value must exceed it; `at_most`: it must not) and whether it passed. The
 * engine's rules are always listed (value null where a rule did not apply: no previous
 * snapshot, nothing read); a pipeline's own rules when they failed.
 */
export interface GateRule {
  rule: string;
  value: number | null;
  threshold: number | null;
  compare: 'above' | 'at_most';
  passed: boolean;
}

export interface QualityReport {
  dataset: string;
  uf: string | null;
  run_id: number;
  snapshot_id: number;
  as_of: string;
  generated_at: string;
  /** `parts`: what the load read besides the files (Pipeline.sourceParts), its SHA-256 of a canonical form. */
  source: { files: { name: string; sha256: string; size: number; uri: string }[]; sha256: string; parts?: { name: string; sha256: string; size: number; uri: string }[] };
  counts: { read: number; loaded: number; rejected: number; dropped: number };
  facts: QualityFacts;
  change: ChangeSummary;
  /** `rules`: every rule measured (reports written before it have only `failures`). */
  gate: { passed: boolean; forced: boolean; failures: GateFailure[]; rules?: GateRule[] };
  /** Whether the snapshot is served and what to do (report-status.ts): added by agro report from the catalogue. */
  publication?: Publication;
}

export function emptyFacts(): QualityFacts {
  return {
    rejected: {},
    dropped: {},
    geometry: { invalid: 0, repaired: 0, rejected: 0, empty: 0, srid: null, sridAssumed: false, outsideBrazil: 0 },
    fields: { missingOptional: [], unknown: [], empty: {} },
    dates: { unparseable: {}, placeholders: {} },
    encoding: { name: null, assumed: false, replacementChars: 0 },
    layers: [],
    failures: [],
    notes: [],
  };
}

/**
 * Unknown values a report names per list (the most frequent): a shifted column or a broken
 * file can make every row's value different, and each named value is a note and a report key.
 */
export const CODES_NAMED = 20;

export const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);

/** A layer as the report (and the read stage's detail) lists it. */
export const describeLayer = (l: VectorLayer): QualityFacts['layers'][number] => ({
  name: l.name, features: l.featureCount, srid: l.srid, encoding: l.encoding, decided_by: l.encodingDecidedBy,
});

/** Lists the layers read; SRID and encoding are the first one's, assumed when any layer's was. */
export function addLayerFacts(facts: QualityFacts, layers: VectorLayer[]): void {
  for (const l of layers) facts.layers.push(describeLayer(l));
  facts.geometry.srid = layers[0].srid;
  facts.geometry.sridAssumed = layers.some((l) => l.sridAssumed);
  facts.encoding.name = layers[0].encoding;
  facts.encoding.assumed = layers.some((l) => l.encodingAssumed);
}

/**
 * Folds verdict counts (verdict → rows) into the report: 'ok' is skipped, the verdicts named
 * in `dropped` are dropped by design, every other one is rejected. Counts add up under
 * `prefix + verdict` (several layers may fold into one report).
 */
export function addVerdicts(facts: QualityFacts, verdicts: Record<string, number>, o: { dropped?: readonly string[]; prefix?: string } = {}): void {
  const prefix = o.prefix ?? '';
  for (const [verdict, n] of Object.entries(verdicts)) {
    if (verdict === 'ok') continue;
    const bucket = o.dropped?.includes(verdict) ? facts.dropped : facts.rejected;
    bucket[prefix + verdict] = (bucket[prefix + verdict] ?? 0) + n;
  }
  const ex = (verdicts as { [VERDICT_EXAMPLES]?: VerdictExamples })[VERDICT_EXAMPLES];
  if (ex) addExamples(facts, ex, prefix);
}

/** Adds example rows (at most ten per reason) and geometry locations to the facts. */
export function addExamples(facts: QualityFacts, ex: VerdictExamples, prefix = ''): void {
  for (const [verdict, rows] of Object.entries(ex.examples)) {
    if (verdict === 'ok') continue;
    const list = ((facts.examples ??= {})[prefix + verdict] ??= []);
    list.push(...rows.slice(0, 10 - list.length));
  }
  const loc = (facts.locations ??= { repaired: [], rejected: [] });
  loc.repaired.push(...ex.locations.repaired);
  loc.rejected.push(...ex.locations.rejected);
}

/** Adds per-column counts into an optional facts map (created on the first non-zero count). */
export function addCounts(facts: QualityFacts, where: 'unparsed' | 'overflowed' | 'cutAtNul' | 'implausible', counts: Record<string, number>): void {
  const entries = Object.entries(counts).filter(([, n]) => n > 0);
  if (!entries.length) return;
  const map = where === 'implausible' ? (facts.dates.implausible ??= {}) : (facts.fields[where] ??= {});
  for (const [k, n] of entries) map[k] = (map[k] ?? 0) + n;
}

/** The report's line for the implausible dates counted so far (contract §3: published as NULL, the text kept in `extra`). */
export function noteImplausibleDates(facts: QualityFacts, asOf: string, rule = 'after the release date'): void {
  if (facts.dates.implausible) facts.notes.push(`dates ${rule} ${asOf} loaded as NULL (text kept in extra): ${JSON.stringify(facts.dates.implausible)}`);
}

/** Adds a repair pass's counts to the geometry facts (a repair that failed or left nothing polygonal counts as rejected). */
export function addRepairFacts(facts: QualityFacts, repair: RepairResult): void {
  facts.geometry.invalid += repair.invalid;
  facts.geometry.repaired += repair.repaired;
  facts.geometry.rejected += repair.rejected + repair.empty;
}

/** The engine's rules of contract §2 measured on a load (the failures are made of these). */
export function measureGate(counts: QualityReport['counts'], change: ChangeSummary, t: QualityThresholds): GateRule[] {
  // Emptiness and the drop are judged on the main relation (change.rows), as the previous
  // snapshot's rows were counted: a streamed load's `loaded` counts every relation.
  const rows = change.rows;
  const drop = change.previous_rows && change.previous_rows > 0 ? (change.previous_rows - rows) / change.previous_rows : null;
  const share = counts.read > 0 ? counts.rejected / counts.read : null;
  return [
    { rule: 'empty', value: rows, threshold: 0, compare: 'above', passed: rows > 0 },
    { rule: 'row_drop', value: drop, threshold: t.maxRowDrop, compare: 'at_most', passed: drop === null || drop <= t.maxRowDrop },
    { rule: 'rejected_share', value: share, threshold: t.maxRejectedShare, compare: 'at_most', passed: share === null || share <= t.maxRejectedShare },
  ];
}

/** Applies the gate rules of contract §2; an empty list means the load may publish. */
export function evaluateGate(counts: QualityReport['counts'], change: ChangeSummary, facts: QualityFacts, t: QualityThresholds): GateFailure[] {
  const failures: GateFailure[] = [...facts.failures];
  for (const m of measureGate(counts, change, t)) {
    if (m.passed) continue;
    if (m.rule === 'empty') failures.push({ rule: 'empty', message: 'no rows were loaded' });
    else if (m.rule === 'row_drop') {
      failures.push({
        rule: 'row_drop',
        message: `rows dropped ${(m.value! * 100).toFixed(1)} % against snapshot ${change.previous_snapshot_id} (${change.previous_rows} → ${change.rows})`,
        value: m.value!,
        threshold: t.maxRowDrop,
      });
    } else {
      failures.push({
        rule: 'rejected_share',
        message: `${counts.rejected} of ${counts.read} rows rejected (${(m.value! * 100).toFixed(2)} %)`,
        value: m.value!,
        threshold: t.maxRejectedShare,
      });
    }
  }
  return failures;
}

/**
 * The gate's verdict: the failures, and every rule with its measured value and threshold — the
 * `measured` ones (passed unless a failure names them) and each other failure.
 */
export function gateVerdict(failures: GateFailure[], measured: GateRule[], force: boolean): QualityReport['gate'] {
  const rules: GateRule[] = [
    // A failure of a measured rule (a pipeline's own, more specific) gives its value when it has one.
    ...measured.map((m) => {
      const f = failures.find((x) => x.rule === m.rule);
      return { ...m, ...(f?.value !== undefined && { value: f.value, threshold: f.threshold ?? m.threshold }), passed: !f };
    }),
    ...failures.filter((f) => !measured.some((m) => m.rule === f.rule))
      .map((f): GateRule => ({ rule: f.rule, value: f.value ?? null, threshold: f.threshold ?? null, compare: 'at_most', passed: false })),
  ];
  return { passed: failures.length === 0, forced: failures.length > 0 && force, failures, rules };
}

/** A self-contained HTML page of the report (report-html.ts draws it). */
export function renderHtml(r: QualityReport): string {
  return renderReportHtml(r);
}
