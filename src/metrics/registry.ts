// A small Prometheus registry and its text exposition format (version 0.0.4): counters, gauges
// and histograms with labels, rendered with their # HELP and # TYPE lines. Written here rather
// than taken from prom-client: the format is a few rules (escaping, cumulative buckets with
// +Inf, _sum and _count), and the API needs one histogram.

export type Labels = Readonly<Record<string, string>>;

/** Label values: backslash, double quote and line feed escaped (the format's three rules). */
export const escapeLabelValue = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
/** HELP text: backslash and line feed escaped. */
const escapeHelp = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** A sample value: integers as they are, +Inf/-Inf/NaN spelt the Prometheus way. */
export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

function labelText(labels: Labels, extra?: [string, string]): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabelValue(v)}"`);
  if (extra) parts.push(`${extra[0]}="${escapeLabelValue(extra[1])}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
}

function checkNames(name: string, labelNames: readonly string[]): void {
  if (!NAME.test(name)) throw new Error(`metric name ${JSON.stringify(name)} is not valid`);
  for (const l of labelNames) if (!LABEL.test(l) || l.startsWith('__') || l === 'le') throw new Error(`label name ${JSON.stringify(l)} of ${name} is not valid`);
}

/** The # HELP / # TYPE header of a metric family. */
export function familyHeader(name: string, type: 'counter' | 'gauge' | 'histogram' | 'summary', help: string): string {
  return `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} ${type}\n`;
}

/** One sample line. */
export function sampleLine(name: string, labels: Labels, value: number): string {
  return `${name}${labelText(labels)} ${formatValue(value)}\n`;
}

/** A family of samples computed when rendered (figures read from the database at scrape time). */
export interface Family {
  name: string;
  type: 'counter' | 'gauge' | 'summary';
  help: string;
  samples: { labels: Labels; value: number; suffix?: '_sum' | '_count' }[];
}

export function renderFamily(f: Family): string {
  checkNames(f.name, [...new Set(f.samples.flatMap((s) => Object.keys(s.labels)))]);
  return familyHeader(f.name, f.type, f.help) + f.samples.map((s) => sampleLine(f.name + (s.suffix ?? ''), s.labels, s.value)).join('');
}

/** Latency-style histogram kept in memory: per label set, cumulative counts per upper bound. */
export class Histogram {
  readonly #series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    readonly buckets: readonly number[],
  ) {
    checkNames(name, labelNames);
    for (let i = 1; i < buckets.length; i++) if (!(buckets[i] > buckets[i - 1])) throw new Error(`${name}: buckets must increase`);
  }

  observe(labels: Labels, value: number): void {
    const key = this.labelNames.map((l) => labels[l] ?? '').join('\u0000');
    let s = this.#series.get(key);
    if (!s) {
      s = { labels: Object.fromEntries(this.labelNames.map((l) => [l, labels[l] ?? ''])), counts: new Array(this.buckets.length).fill(0), sum: 0, count: 0 };
      this.#series.set(key, s);
    }
    // Stored per bucket (not cumulative): one increment per observation.
    const i = this.buckets.findIndex((b) => value <= b);
    if (i >= 0) s.counts[i]++;
    s.sum += value;
    s.count++;
  }

  render(): string {
    let out = familyHeader(this.name, 'histogram', this.help);
    for (const s of this.#series.values()) {
      let cumulative = 0;
      this.buckets.forEach((b, i) => {
        cumulative += s.counts[i];
        out += `${this.name}_bucket${labelText(s.labels, ['le', formatValue(b)])} ${cumulative}\n`;
      });
      out += `${this.name}_bucket${labelText(s.labels, ['le', '+Inf'])} ${s.count}\n`;
      out += sampleLine(`${this.name}_sum`, s.labels, s.sum);
      out += sampleLine(`${this.name}_count`, s.labels, s.count);
    }
    return out;
  }
}
