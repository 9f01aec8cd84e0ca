// One declaration per snapshot relation: its columns (name, SQL type, every source spelling,
// required or not, how the text converts, counted when empty) and its indexes, together, in
// the spirit of osm2pgsql flex `define_table{columns, indexes}`. Everything the engine does
// with a relation is derived from it: the staging fields (stageLayers specs), the typed
// select list of the build, the raw text kept in `extra` when a value does not convert, the
// facts counted per column, and the indexes. The snapshot template (snap.<rel>__template,
// made by migrations) must list the same columns in the same order with the same types:
// every load checks it (checkSnapshotTable) and test/relations.test.ts checks it without one.
import { ident } from '../db/pool.ts';
import type { FieldSpec } from './stage-vector.ts';
import type { SnapshotIndexes } from './load-steps.ts';

/**
 * How a column's staged text becomes its value. Each conversion is NULL for empty text; those
 * with a failure rule keep the source text in `extra` under the column's name when it does not
 * convert, and count it (fields.unparsed, dates.unparseable). A run of asterisks (a DBF numeric
 * overflow) is no value: NULL, counted as fields.overflowed, not kept.
 */
export type Conversion = 'text' | 'upper' | 'code' | 'ibge_code' | 'list' | 'uf_list' | 'number' | 'area' | 'whole' | 'flag' | 'date' | 'date_dmy_iso' | 'timestamp';

interface ConversionRule {
  /** The typed value of the staged text `x`. */
  value(x: string): string;
  /** True when `x` holds text that did not convert (kept raw in `extra`, counted). */
  bad?(x: string): string;
  /** True when `x` is a known placeholder (dates: '00/00/0000'): NULL, counted, not kept. */
  placeholder?(x: string): string;
  /** What the report calls a failure of this conversion. */
  what?: string;
  /** A date: later than the release date is implausible (contract §3). */
  isDate?: boolean;
}

const notOverflow = (x: string) => `AND NOT etl.is_overflow(${x})`;
const IBGE_CODE = '^[0-9]{7}(\\.0+)?$';

export const CONVERSIONS: Record<Conversion, ConversionRule> = {
  text: { value: (x) => `nullif(btrim(${x}), '')` },
  upper: { value: (x) => `nullif(upper(btrim(${x})), '')` },
  code: { value: (x) => `etl.code_text(${x})` },
  /**
   * An IBGE municipality code: seven digits ('5208707.0', as a spreadsheet writes it, is 5208707).
   * A code that lost a digit or holds a letter O named another municipality, or none, uncounted.
   */
  ibge_code: {
    value: (x) => `(CASE WHEN btrim(${x}) ~ '${IBGE_CODE}' THEN left(btrim(${x}), 7) END)`,
    bad: (x) => `btrim(${x}) <> '' AND btrim(${x}) !~ '${IBGE_CODE}'`,
    what: 'not 7-digit IBGE municipality codes',
  },
  list: { value: (x) => `etl.text_list(${x})` },
  /** State siglas: split on ',', ';', '/', '|', '&' and the word 'e' (migration 0103). */
  uf_list: { value: (x) => `etl.uf_list(${x})` },
  number: {
    value: (x) => `etl.parse_number(${x})`,
    bad: (x) => `btrim(${x}) <> '' AND etl.parse_number(${x}) IS NULL ${notOverflow(x)}`,
    what: 'not numbers',
  },
  /** An area in hectares, as `number`; a negative one (no land measures less than nothing) is no value either. */
  area: {
    value: (x) => `(CASE WHEN etl.parse_number(${x}) >= 0 THEN etl.parse_number(${x}) END)`,
    bad: (x) => `btrim(${x}) <> '' AND coalesce(etl.parse_number(${x}) < 0, NOT etl.is_overflow(${x}))`,
    what: 'not numbers, or negative areas',
  },
  whole: {
    value: (x) => `etl.parse_whole(${x})`,
    bad: (x) => `btrim(${x}) <> '' AND etl.parse_whole(${x}) IS NULL ${notOverflow(x)}`,
    what: 'not whole numbers',
  },
  flag: {
    value: (x) => `etl.parse_flag(${x})`,
    bad: (x) => `btrim(${x}) <> '' AND etl.parse_flag(${x}) IS NULL`,
    what: 'not yes/no flags',
  },
  date: {
    value: (x) => `etl.parse_date(${x})`,
    bad: (x) => `etl.date_kind(${x}) = 'bad'`,
    placeholder: (x) => `etl.date_kind(${x}) = 'placeholder'`,
    isDate: true,
  },
  date_dmy_iso: {
    value: (x) => `etl.parse_date_dmy_iso(${x})`,
    bad: (x) => `etl.date_dmy_iso_kind(${x}) = 'bad'`,
    placeholder: (x) => `etl.date_dmy_iso_kind(${x}) = 'placeholder'`,
    isDate: true,
  },
  // A date with an optional time of day ('2025-03-10 09:15:00', '10/03/2025'); compared with the release date by its day.
  timestamp: {
    value: (x) => `etl.parse_timestamp(${x})`,
    bad: (x) => `etl.date_kind(${x}) = 'bad'`,
    placeholder: (x) => `etl.date_kind(${x}) = 'placeholder'`,
    isDate: true,
  },
};

/** The conversion a column gets when it names none, by its SQL type. */
const DEFAULT_CONVERSION: Record<string, Conversion> = {
  text: 'text',
  'text[]': 'list',
  'double precision': 'number',
  integer: 'whole',
  boolean: 'flag',
  date: 'date',
  'timestamp without time zone': 'timestamp',
};

/** A snapshot column, in template order. */
export interface ColumnDef {
  name: string;
  /** The SQL type as format_type prints it ('text', 'text[]', 'double precision', 'geometry(MultiPolygon,4326)'). */
  type: string;
  /** Source spellings (lower case: current, legacy, truncated DBF, WFS), staged as text under `name`. */
  from?: string[];
  /** The source must carry one of `from`: a drifted source fails before anything is loaded ('csv': only a delimited-text source, e.g. WKT where a shapefile has its own geometry). */
  required?: boolean | 'csv';
  /** Personal data (a document, a person's name): never shown in the report's example rows. */
  personal?: boolean;
  /** How the staged text converts (default by type); ignored when `sql` is given. */
  convert?: Conversion;
  /** The value as SQL over the kept row `c`, the staged row `s` and the run values `v`, instead of a conversion. */
  sql?: string;
  /** With `sql`: SQL of the raw text this column keeps in `extra` under its name (NULL for none). */
  keepRaw?: string;
  /** NULLs counted in the report (facts.fields.empty). */
  counted?: boolean;
  /** Filled by the engine: `extra` (unknown source columns and unconverted text) or `snapshot_id`. */
  role?: 'extra' | 'snapshot_id';
  /**
   * A streamed column (a source copied straight into the snapshot table, no staging: Receita's
   * CNPJ month): the name of the pipeline's own conversion its line builder applies (e.g.
   * 'date', 'money', 'name'). With `at`, of the record's field at that position; without, a
   * value the builder derives from the record. The engine neither stages nor converts it.
   */
  cell?: string;
  /** Position of the column's field in a header-less (positional) record, from 0; with `cell`. */
  at?: number;
}

/** A source field staged without a column of its own. */
export interface FieldDef {
  name: string;
  from: string[];
  required?: boolean | 'csv';
  /** Personal data: never shown in the report's example rows. */
  personal?: boolean;
  /** 'extra': kept in `extra` under `name`; 'sql': read by some column's `sql` only; 'drop': not loaded (and not reported missing). */
  keep: 'extra' | 'sql' | 'drop';
  /** A conversion whose failures are counted (fields.unparsed) although no column of its own keeps the value. */
  check?: Conversion;
  /** Reported when no source layer carries it (facts.fields.missingOptional); default true for 'sql', false for 'extra'. */
  reportMissing?: boolean;
}

export interface RelationDef {
  /** snap.<name>__template, current.<name>. */
  name: string;
  columns: ColumnDef[];
  fields?: FieldDef[];
  indexes: SnapshotIndexes;
  /** Joins the select list reads from, after `FROM <kept> c JOIN <stage> s` (e.g. a lateral parse). */
  joins?: string;
  /** ORDER BY of the build (physical order of the snapshot), when it matters. */
  orderBy?: string;
  /** More entries of `extra`: key → SQL (NULL for none), e.g. where a fallback key came from. */
  extra?: Record<string, string>;
  /** Why the template has no `extra` column (personal data: unmapped source columns are reported by name and not loaded). */
  withoutExtra?: string;
}

/** A conversion the engine checks, on a column or on a staged-only field. */
export interface CheckedField {
  /** The staged column (and the key under which raw text goes to `extra`). */
  name: string;
  rule: ConversionRule;
  /** Raw text goes to `extra` under `name` (false: some column's `keepRaw` places it). */
  keepsRaw: boolean;
}

export interface Relation extends Required<Pick<RelationDef, 'name' | 'columns' | 'fields' | 'indexes' | 'extra'>> {
  joins: string;
  orderBy?: string;
  /** What stageLayers stages: every column and field with source spellings. */
  staging: FieldSpec[];
  /** Staged names whose absence is reported (facts.fields.missingOptional). */
  reportedMissing: Set<string>;
  /** Columns counted when empty (facts.fields.empty). */
  counted: string[];
  /** Conversions whose failures are counted and kept raw. */
  checked: CheckedField[];
  /** Date columns (NULL when after the release date, their text kept raw). */
  dates: { name: string; rule: ConversionRule }[];
  /** The key of the relation: the primary key's single column, else the first column. */
  key: string;
  /** Staged names required only when the source is a delimited text (read.csv). */
  csvRequired: string[];
  /** Columns and fields holding personal data (left out of example rows). */
  personal: string[];
  /** A positional source's fields in record order (columns with `at`): what a record holds, field by field. */
  positional: { name: string; at: number; cell: string; counted: boolean }[];
}

function conversionOf(c: ColumnDef): Conversion | null {
  if (c.sql !== undefined || c.role || c.cell !== undefined) return null;
  const conv = c.convert ?? DEFAULT_CONVERSION[c.type];
  if (!conv) throw new Error(`column ${c.name} (${c.type}): name a conversion or give its sql`);
  if (!c.from?.length) throw new Error(`column ${c.name}: a converted column needs its source spellings (from)`);
  return conv;
}

/** Declares a relation; throws on a declaration that cannot be built (caught when the module loads). */
export function defineRelation(def: RelationDef): Relation {
  const fields = def.fields ?? [];
  const names = [...def.columns.map((c) => c.name), ...fields.map((f) => f.name)];
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup) throw new Error(`relation ${def.name}: ${dup} declared twice`);
  if ((!def.withoutExtra && !def.columns.some((c) => c.role === 'extra')) || !def.columns.some((c) => c.role === 'snapshot_id')) {
    throw new Error(`relation ${def.name}: declare its extra and snapshot_id columns (role) where the template has them`);
  }
  const staging: FieldSpec[] = [
    ...def.columns.filter((c) => c.from?.length).map((c) => ({ name: c.name, aliases: c.from!, required: c.required === true })),
    ...fields.map((f) => ({ name: f.name, aliases: f.from, required: f.required === true })),
  ];
  const positional = positionalFields(def);
  const checked: CheckedField[] = [];
  const dates: Relation['dates'] = [];
  for (const c of def.columns) {
    const conv = conversionOf(c);
    if (!conv) continue;
    const rule = CONVERSIONS[conv];
    if (rule.bad) checked.push({ name: c.name, rule, keepsRaw: true });
    if (rule.isDate) dates.push({ name: c.name, rule });
  }
  for (const f of fields) if (f.check) checked.push({ name: f.name, rule: CONVERSIONS[f.check], keepsRaw: f.keep === 'extra' });
  const reportedMissing = new Set([
    ...def.columns.filter((c) => c.from?.length).map((c) => c.name),
    ...fields.filter((f) => f.reportMissing ?? f.keep === 'sql').map((f) => f.name),
  ]);
  if (def.withoutExtra && (checked.some((c) => c.keepsRaw) || def.columns.some((c) => c.keepRaw) || def.extra)) {
    throw new Error(`relation ${def.name}: raw text of values that do not convert needs an extra column`);
  }
  const pk = def.indexes.primaryKey;
  return {
    positional,
    name: def.name,
    columns: def.columns,
    fields,
    indexes: def.indexes,
    extra: def.extra ?? {},
    joins: def.joins ?? '',
    orderBy: def.orderBy,
    staging,
    reportedMissing,
    counted: def.columns.filter((c) => c.counted).map((c) => c.name),
    checked,
    dates,
    key: pk?.length === 1 ? pk[0] : def.columns[0].name,
    csvRequired: [...def.columns, ...fields].filter((x) => x.required === 'csv').map((x) => x.name),
    personal: [...def.columns, ...fields].filter((x) => x.personal).map((x) => x.name),
  };
}

/** The columns with a record position, in record order; positions must run 0, 1, 2, … without a gap. */
function positionalFields(def: RelationDef): Relation['positional'] {
  const out: Relation['positional'] = [];
  for (const c of def.columns) {
    if (c.at === undefined) continue;
    if (c.cell === undefined) throw new Error(`relation ${def.name}: positional column ${c.name} needs its conversion (cell)`);
    out.push({ name: c.name, at: c.at, cell: c.cell, counted: c.counted ?? false });
  }
  out.sort((a, b) => a.at - b.at);
  out.forEach((f, i) => {
    if (f.at !== i) throw new Error(`relation ${def.name}: record positions must run 0..${out.length - 1} (${f.name} is at ${f.at})`);
  });
  return out;
}

/** The column list of the template a relation declares, as `name type` pairs (format_type spelling, spaces after commas removed). */
export function declaredShape(rel: Relation): string {
  return rel.columns.map((c) => `${c.name} ${c.type.replace(/,\s+/g, ',')}`).join(', ');
}

const s = (name: string) => `s.${ident(name)}`;

/**
 * The typed select list of the build: each column's value cast to its declared type, in
 * declaration order. `asOf` is the release date literal: later dates are NULL, kept raw.
 */
export function selectList(rel: Relation, asOf: string, snapshotId: number): string {
  const dateNames = new Set(rel.dates.map((d) => d.name));
  return rel.columns
    .map((c) => {
      let value: string;
      if (c.role === 'snapshot_id') value = String(snapshotId);
      else if (c.role === 'extra') value = extraObject(rel, asOf);
      else if (c.sql !== undefined) value = c.sql;
      else {
        const rule = CONVERSIONS[conversionOf(c)!];
        value = rule.value(s(c.name));
        if (dateNames.has(c.name)) value = `CASE WHEN (${value})::date <= ${asOf} THEN ${value} END`;
      }
      return `       (${value})::${c.type} AS ${ident(c.name)}`;
    })
    .join(',\n');
}

/**
 * `extra`: the source columns without a mapping (staged extra), fields kept in extra, and the
 * raw text of every value that did not convert or is an implausible date, under the column's name.
 */
function extraObject(rel: Relation, asOf: string): string {
  const entries: string[] = [];
  for (const f of rel.fields) if (f.keep === 'extra') entries.push(`'${f.name}', nullif(btrim(${s(f.name)}), '')`);
  const dates = new Map(rel.dates.map((d) => [d.name, d.rule]));
  for (const c of rel.checked) {
    if (!c.keepsRaw) continue;
    const x = s(c.name);
    const late = dates.has(c.name) ? ` OR (${c.rule.value(x)})::date > ${asOf}` : '';
    entries.push(`'${c.name}', CASE WHEN ${c.rule.bad!(x)}${late} THEN ${x} END`);
  }
  for (const c of rel.columns) if (c.keepRaw) entries.push(`'${c.name}', ${c.keepRaw}`);
  for (const [k, v] of Object.entries(rel.extra)) entries.push(`'${k}', ${v}`);
  // jsonb_build_object takes at most 100 arguments: 50 entries a call, concatenated.
  const objects: string[] = [];
  for (let i = 0; i < entries.length; i += 50) objects.push(`jsonb_build_object(\n         ${entries.slice(i, i + 50).join(',\n         ')})`);
  return `nullif(coalesce(s.extra, '{}'::jsonb) || jsonb_strip_nulls(${objects.join(' || ') || "'{}'::jsonb"}), '{}'::jsonb)`;
}
