// Fields of a panel form. The routes take any body fastify parses, JSON included, so a field
// may arrive as a number, an object or an array where the form sends text: only strings count
// (a field sent as anything else is absent), never String(x) of an object, never .trim() of a
// number.
import crypto from 'node:crypto';
import type { FastifyRequest } from 'fastify';

const body = (req: FastifyRequest): Record<string, unknown> => {
  const b = req.body;
  return b !== null && typeof b === 'object' && !Array.isArray(b) ? (b as Record<string, unknown>) : {};
};

/** A text field, trimmed; '' when absent or not text. */
export function formText(req: FastifyRequest, name: string): string {
  const v = body(req)[name];
  return typeof v === 'string' ? v.trim() : '';
}

/** A field that may repeat (checkboxes): its text values. */
export function formList(req: FastifyRequest, name: string): string[] {
  const v = body(req)[name];
  return (Array.isArray(v) ? v : [v]).filter((x): x is string => typeof x === 'string');
}

/** Constant-time comparison of a sent token with the expected one (bytes, whatever characters were sent). */
export function sameToken(sent: string, want: string): boolean {
  const a = Buffer.from(sent);
  const b = Buffer.from(want);
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}
