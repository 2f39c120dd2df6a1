// The server's own words for a refused change (403, 404, 409, 422), which say what to do; other
// statuses as describeError words them.

import { describeError } from "./format.js";

const REFUSALS = new Set([403, 404, 409, 422]);

export function refused(error, subject) {
  if (!REFUSALS.has(error.status)) return describeError(error, subject);
  const reason = error.message.replace(/\.$/, "");
  if (error.status === 403) return `${subject}: not allowed (${reason}).`;
  return `${subject}: refused (${reason}).`;
}
