// Dates as the command line and the API take them.

/**
 * A real calendar date written YYYY-MM-DD, and one PostgreSQL takes too: 2026-02-30 is not
 * one, and neither is year 0000 (a date to JavaScript only).
 */
export function isCalendarDate(v: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(v) || v < '0001-01-01') return false;
  const d = new Date(`${v}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === v;
}

/**
 * Brasília time: the calendar of the federal publishers and of the data's dates (UTC−3, no
 * daylight saving since 2019). A release put up at 22:30 on 10 June is dated 10/06 by its
 * publisher, though its Last-Modified reads 01:30 GMT on the 11th.
 */
export const BRAZIL_TIMEZONE = 'America/Sao_Paulo';

const brazilClock = new Intl.DateTimeFormat('en-CA', {
  timeZone: BRAZIL_TIMEZONE, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
});

/** Brasília's wall time of an instant: YYYY-MM-DD HH:MM:SS. */
export function brazilDateTime(d: Date): string {
  const p = Object.fromEntries(brazilClock.formatToParts(d).map((x) => [x.type, x.value]));
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second}`;
}

/** The Brazilian calendar day (YYYY-MM-DD) of an instant. */
export const brazilDay = (d: Date): string => brazilDateTime(d).slice(0, 10);

/** Today in Brazil: a nightly firing at 22:00 in São Paulo is already tomorrow in UTC. */
export const todayInBrazil = (): string => brazilDay(new Date());

/**
 * Whole Brazilian calendar days from a day (YYYY-MM-DD) to an instant: an as_of's age. Counted
 * from midnight UTC it was a day older from 21:00 in Brasília on, while `agro run` still said
 * today was the as_of day.
 */
export const brazilDaysSince = (day: string, now: Date): number =>
  Math.round((Date.parse(`${brazilDay(now)}T00:00:00Z`) - Date.parse(`${day}T00:00:00Z`)) / 864e5);
