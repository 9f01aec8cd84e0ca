// Times the SQL steps of a stage so the ledger (etl.run_stages.detail) says where a
// slow load spends its time, step by step.
import type pg from 'pg';

export interface StepTimer {
  /** Milliseconds per step label, accumulated. */
  timings: Record<string, number>;
  query(label: string, sql: string, params?: unknown[]): Promise<pg.QueryResult>;
  time<T>(label: string, fn: () => Promise<T>): Promise<T>;
}

export function stepTimer(client: pg.ClientBase): StepTimer {
  const timings: Record<string, number> = {};
  const time = async <T>(label: string, fn: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await fn();
    } finally {
      timings[label] = Math.round((timings[label] ?? 0) + performance.now() - t0);
    }
  };
  return { timings, time, query: (label, sql, params) => time(label, () => client.query(sql, params)) };
}
